"""Bad input gives one clear BadInput (exit 2) or an honest "nothing found"; never a traceback."""

from __future__ import annotations

import gzip
import os

import pytest

from breakglass.diagnose.engine import diagnose_paths
from breakglass.core.errors import BadInput
from breakglass.logs import sources
from tests import logbuild as lb

LINE = (lb.klog(lb.fail_closed("a.b", "connection refused")) + "\n").encode()


def test_gzip_and_concatenated_members(tmp_path):
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(LINE) + gzip.compress(LINE))
    d, _ = diagnose_paths([str(p)])
    assert d.findings[0].count == 2


def test_gzip_detected_by_magic_not_name(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(gzip.compress(LINE))
    assert diagnose_paths([str(p)])[0].findings


def test_truncated_gzip_is_bad_input(tmp_path):
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(LINE * 100)[:-20])
    with pytest.raises(BadInput, match="truncated gzip"):
        diagnose_paths([str(p)])


def test_corrupt_gzip_is_bad_input(tmp_path):
    p = tmp_path / "x.gz"
    data = bytearray(gzip.compress(LINE * 100))
    data[20:40] = b"\xff" * 20
    p.write_bytes(bytes(data))
    with pytest.raises(BadInput, match="gzip"):
        diagnose_paths([str(p)])


def test_binary_garbage_is_bad_input(tmp_path):
    p = tmp_path / "core"
    p.write_bytes(os.urandom(100_000))
    with pytest.raises(BadInput, match="binary data"):
        diagnose_paths([str(p)])


def test_invalid_utf8_is_read_anyway(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"\xff\xfe\xc3(\n" + LINE + b"\xed\xa0\x80\n")
    assert diagnose_paths([str(p)])[0].findings


def test_an_empty_file_is_no_all_clear(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    with pytest.raises(BadInput, match="read nothing from .*empty.log"):
        diagnose_paths([str(p)])


@pytest.mark.parametrize("content", [b"\x00\x01\x02" * 5000, b"apiVersion: v1\nkind: List\nitems: []\n",
                                     b"QUJD" * 50000])
def test_what_is_not_a_log_is_bad_input_not_nothing_found(tmp_path, content):
    p = tmp_path / "thing"
    p.write_bytes(content)
    with pytest.raises(BadInput, match="none of it is a log|binary data, not a text log"):
        diagnose_paths([str(p)])


def test_a_log_with_nothing_wrong_in_it_is_still_an_all_clear(tmp_path):
    p = tmp_path / "ok.log"
    p.write_bytes(b"I1130 03:00:00.000000       1 controller.go:1] all quiet\n")
    d, _ = diagnose_paths([str(p)])
    assert d.findings == [] and d.verdict.state == "clear"


def test_a_failed_pipe_is_exit_2_not_nothing_found():
    from tests.conftest import run_cli

    p = run_cli("diagnose", stdin=b"")
    assert p.returncode == 2 and b"read nothing from <stdin>" in p.stderr and b"nothing found" not in p.stdout


def test_missing_file(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        diagnose_paths([str(tmp_path / "nope.log")])


def test_directory_without_logs(tmp_path):
    (tmp_path / "sub").mkdir()
    with pytest.raises(BadInput, match="no log files"):
        diagnose_paths([str(tmp_path)])


def test_pod_log_directory_order_and_broken_member_is_a_warning(tmp_path):
    d = tmp_path / "kube-system_kube-apiserver-cp1_uid" / "kube-apiserver"
    d.mkdir(parents=True)
    (d / "0.log").write_bytes(LINE)
    (d / "0.log.20260224-153250.gz").write_bytes(gzip.compress(LINE))
    (d / "0.log.20260224-150000.gz").write_bytes(gzip.compress(LINE)[:-10])  # kubelet was compressing it
    (d / "1.log").write_bytes(LINE)
    srcs = sources.expand([str(tmp_path)])
    assert [os.path.basename(s.name) for s in srcs] == [
        "0.log.20260224-150000.gz", "0.log.20260224-153250.gz", "0.log", "1.log"]
    diag, warnings = diagnose_paths([str(tmp_path)])
    assert diag.findings[0].count == 3
    assert any("truncated gzip" in w for w in warnings)


def test_huge_single_line(tmp_path):
    """One 50 MiB line: read up to the 4 MiB a record may hold (what it says there is found), cut there, and the
    cut said by its line number; the rest is never held."""
    p = tmp_path / "one.log"
    with open(p, "wb") as f:
        f.write(LINE.rstrip(b"\n") + b" ")
        f.write(b"z" * (50 << 20) + b"\n")
    d, warnings = diagnose_paths([str(p)])
    assert d.findings and d.stats.lines == 1
    assert any("line 1" in w and "cut" in w for w in warnings), warnings
