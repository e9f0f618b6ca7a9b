# Two commands on a fresh Debian machine:  make demo   and   make test
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench system-deps clean

$(STAMP): pyproject.toml scripts/bootstrap.sh
	bash scripts/bootstrap.sh python
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

system-deps:
	bash scripts/bootstrap.sh test

demo: $(STAMP)
	bash scripts/bootstrap.sh demo
	$(PY) examples/demo.py

test: $(STAMP) system-deps
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/startup.py
	$(PY) bench/diagnose.py
	$(PY) bench/etcd_list.py
	$(PY) bench/etcd.py
	$(PY) bench/triage.py
	$(PY) bench/leaks.py

clean:
	rm -rf $(VENV) bench/.data .pytest_cache
