"""An audit log read in parts on several cores gives exactly the report one pass gives.

Parts are forced small (PARALLEL_MIN 1, up to eight parts) so cuts fall between a leak and the delete that
makes its recheck moot, between the two stages of one request, and around lines nested past MAX_DEPTH.
"""

from __future__ import annotations

import gzip
import random

import pytest

from breakglass.leaks import audit
from breakglass.logs import forked
from tests.test_leaks import event, fo, story
from tests.test_leaks_gke import entries


def _mixed(n: int = 400, seed: int = 7) -> list[str]:
    """Ordinary traffic, leaks, their deletes and re-creations, decoys and deep lines, in a random order."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        name = f"p{rnd.randrange(30)}"
        r = rnd.random()
        ts = f"2026-11-30T03:{10 + i // 60:02d}:{i % 60:02d}Z"
        if r < 0.3:
            out.append(event(f"a{i}", rnd.choice(["create", "update", "patch"]), name=name, ann=fo(), ts=ts))
        elif r < 0.45:
            out.append(event(f"d{i}", "delete", name=name, code=200, ts=ts))
        elif r < 0.5:
            out.append('{"kind":"Event","annotations":{"failed-open.x":' + "[" * 300 + "]" * 300 + "}}")
        else:
            out.append(event(f"n{i}", "get", name=name, code=200, ts=ts))
    return out


def _reports(monkeypatch, path, parts: int, **kw) -> tuple[dict, dict, list]:
    monkeypatch.setattr(audit, "PARALLEL_MIN", 1 << 60)
    one = audit.scan([str(path)], **kw).to_json()
    monkeypatch.setattr(audit, "PARALLEL_MIN", 1)
    monkeypatch.setattr(forked, "usable_cpus", lambda: parts)
    planned = []
    real_plan = audit._plan
    monkeypatch.setattr(audit, "_plan", lambda *a: planned.append(real_plan(*a)) or planned[-1])
    return one, audit.scan([str(path)], **kw).to_json(), planned


@pytest.mark.parametrize("parts", [2, 3, 8])
@pytest.mark.parametrize("lines", [story, _mixed, lambda: story() * 5 + _mixed(200, 3)],
                         ids=["story", "mixed", "both"])
def test_parts_give_the_one_pass_report(monkeypatch, tmp_path, parts, lines):
    p = tmp_path / "audit.log"
    p.write_text("\n".join(lines()) + "\n")
    one, many, planned = _reports(monkeypatch, p, parts)
    assert planned and planned[0] is not None and len(planned[0][1]) == parts
    assert many == one
    assert one["leaks"], "the log holds leaks"


def test_a_delete_in_a_later_part_clears_the_recheck_of_a_leak_in_an_earlier_one(monkeypatch, tmp_path):
    lines = [event("a1", name="gone", ann=fo())] + [event(f"n{i}", "get", code=200) for i in range(50)]
    lines += [event("d1", "delete", name="gone", code=200, ts="2026-11-30T03:30:00Z")]
    p = tmp_path / "audit.log"
    p.write_text("\n".join(lines) + "\n")
    one, many, _ = _reports(monkeypatch, p, 4)
    assert many == one
    assert [r["name"] for r in many["recheck"]] == []


def test_window_filters_are_the_same_in_parts(monkeypatch, tmp_path):
    p = tmp_path / "audit.log"
    p.write_text("\n".join(_mixed()) + "\n")
    one, many, _ = _reports(monkeypatch, p, 3, since="2026-11-30T03:12:00Z", until="2026-11-30T03:14:00Z")
    assert many == one and one["outside_window"] > 0


def test_cloud_logging_lines_in_parts(monkeypatch, tmp_path):
    import json

    p = tmp_path / "gke.log"
    p.write_text("\n".join(json.dumps(e) for e in entries() * 4) + "\n")
    one, many, _ = _reports(monkeypatch, p, 3)
    assert many == one and one["leaks"]


def test_gzip_and_event_list_batches_are_read_in_one_pass(monkeypatch, tmp_path):
    gz = tmp_path / "audit.log.gz"
    gz.write_bytes(gzip.compress(("\n".join(story()) + "\n").encode()))
    one, many, planned = _reports(monkeypatch, gz, 4)
    assert planned == [None] and many == one


@pytest.mark.parametrize("chunk", [1, 5, 64, 4096])
def test_placed_lines_name_where_each_line_is(chunk):
    from breakglass.logs.lines import lines_with, placed_lines_with
    from breakglass.logs.scanner import Finder

    rnd = random.Random(chunk)
    data = b"".join(rnd.choice([b"plain line\n", b'{"verb":"delete","x":1}\n', b"failed-open. here\n", b"\n",
                                b"failed-open. without newline at the end"]) for _ in range(300))
    finder = Finder((b"failed-open.", b'"verb":"delete'), "python")
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    placed = list(placed_lines_with(chunks, finder, 1000))
    assert [line for _, line in placed] == list(lines_with(chunks, finder))
    assert placed and all(data[at - 1000:at - 1000 + len(line)] == line for at, line in placed)
