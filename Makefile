# Two commands on a fresh Debian machine:  make demo   and   make test
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test docs bench bundle image system-deps clean go-components kube-apiserver

$(STAMP): pyproject.toml setup.py breakglass/logs/_newlines.c scripts/bootstrap.sh
	bash scripts/bootstrap.sh python
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

system-deps:
	bash scripts/bootstrap.sh test

demo: $(STAMP)
	bash scripts/bootstrap.sh demo
	bash scripts/gobuild.sh --if-go kube-apiserver@1.34.4  # the one its story runs (the seed's upgrade target)
	$(PY) examples/demo.py

# Real components built from their published Go modules (go/versions): kube-apiserver per version, Talos'
# config machinery. The first build downloads modules and compiles (see README for timings); later ones link.
go-components:
	bash scripts/gobuild.sh --if-go

kube-apiserver:
	bash scripts/gobuild.sh kube-apiserver

# The tests start while the `later` builds of go/versions (the newest apiservers, each a few minutes of compiling)
# run in the background at nice 19; the tests that need them run last and wait for them (scripts/gobuild.sh).
# The pytest summary ends with a timing report (tests/conftest.py): the builds before the tests, the tests, and the
# share of the tests that start real components. TESTS=tests/test_cli.py runs a part.
# JOBS: pytest-xdist workers. Most of the suite waits (apiservers starting, engines syncing, prompts), so more
# workers than cores keep both cores busy; tests sharing a module's fixture run on one worker (tests/conftest.py).
JOBS ?= 4
test: $(STAMP) system-deps
	@t0=$$(date +%s); bash scripts/gobuild.sh --if-go --now && \
	  export BREAKGLASS_BUILD_SECONDS=$$(( $$(date +%s) - t0 )) && \
	  bash scripts/gobuild.sh --if-go --later-in-background && \
	  $(PY) -m pytest -q -n $(JOBS) --durations=30 $(TESTS)  # the slowest, printed at the end

# The manual, as static files in site/ (open site/index.html; for its search, serve it: python3 -m http.server -d site)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d site

bench: $(STAMP) bundle
	$(PY) bench/startup.py
	$(PY) bench/diagnose.py
	$(PY) bench/etcd_list.py
	$(PY) bench/etcd.py
	$(PY) bench/triage.py
	$(PY) bench/leaks.py
	$(PY) bench/bundle.py
	$(PY) bench/real_apiserver.py
	$(PY) bench/hugeline.py
	$(PY) bench/fleet.py
	$(PY) bench/readiness_call.py
	$(PY) bench/scale.py

# dist/breakglass.pyz: one file for python3 >= 3.10 on Linux x86_64 and aarch64, offline (see README)
# (PYTHONS=3.11,3.12 MACHINES=x86_64 make bundle: a smaller file for fewer targets)
bundle: $(STAMP)
	$(PY) scripts/bundle.py $(if $(PYTHONS),--python $(PYTHONS)) $(if $(MACHINES),--machine $(MACHINES))

# The in-cluster guard's image (deploy/Dockerfile): docker, or buildah where no Docker engine runs.
# IMAGE_ARGS="--tag REGISTRY/breakglass:0.1.0 --debian-base --save breakglass.tar" (scripts/image.sh --help)
image:
	bash scripts/image.sh $(IMAGE_ARGS)

clean:
	rm -rf $(VENV) bench/.data .pytest_cache dist build
