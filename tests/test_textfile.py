"""User-given text files: every way a wrong file can look is one BadInput line."""

from __future__ import annotations

import pytest

from breakglass.core import textfile
from breakglass.core.errors import BadInput
from tests.conftest import run_cli


@pytest.mark.parametrize("make,match", [
    (lambda d: "/dev/zero", "larger than 64 MiB"),
    (lambda d: str(d), "is a directory"),
    (lambda d: str(d / "missing.yaml"), "no such file"),
    (lambda d: (d / "b").write_bytes(b"a: 1\n\x00\x01") and str(d / "b"), "binary data"),
    (lambda d: (d / "l").write_bytes("a: caf\u00e9\n".encode("latin-1")) and str(d / "l"), "not UTF-8 text \\(byte 6\\)"),
])
def test_wrong_files(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(BadInput, match=match) as e:
        textfile.read(path, "a YAML plan")
    assert "\n" not in str(e.value) and str(e.value).startswith(path)


def test_text_is_returned_as_is(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_bytes("name: caf\u00e9\r\n".encode())
    assert textfile.read(str(p), "a YAML plan") == "name: caf\u00e9\r\n"


def test_audit_of_an_endless_file_stops():
    p = run_cli("audit", "-f", "/dev/zero", timeout=60)
    assert p.returncode == 2 and b"larger than 64 MiB" in p.stderr
