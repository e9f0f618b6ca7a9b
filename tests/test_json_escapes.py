"""Issue 34 §6: JSON output carried raw bidi overrides and isolates (`evil\u202egpj.exe` shows as `evilexe.jpg`
in a terminal, a CI log or a review) and lone surrogates (which a strict UTF-8 writer cannot even encode). Every JSON
writer goes through core.envelope.json_text: those characters come out as \\uXXXX, the JSON parses to the same
strings, and the raw bytes never appear in the output."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from breakglass.core import envelope
from tests.conftest import run_cli

UNSAFE = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b",
          "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\ufeff", "\u061c", "\u2060", "\x85", "\x9b",
          "\x7f", "\U000e0041"]
LONE = ["\ud800", "\udcff", "\udfff"]


def _raw_hits(data: bytes) -> list[str]:
    return [repr(c) for c in UNSAFE if c.encode("utf-8") in data]


@pytest.mark.parametrize("c", UNSAFE + LONE, ids=lambda c: f"U+{ord(c):04X}")
def test_each_deceiving_character_is_escaped_and_parses_back(c):
    doc = {"name": f"evil{c}gpj.exe", c: [c * 2]}
    text = envelope.dumps(doc)
    assert text.isascii(), text
    assert f"\\u{ord(c):04x}" in text or ord(c) > 0xFFFF
    assert json.loads(text) == doc
    text.encode("utf-8")  # strict: a lone surrogate no longer makes the writer raise


def test_ordinary_text_stays_readable_utf8():
    doc = {"name": "café Δ 日本 🚀", "path": "/etc/rancher/k3s/config.yaml", "tab": "a\tb", "esc": "\x1b[31m"}
    text = envelope.dumps(doc)
    assert "café Δ 日本 🚀" in text and "\\u001b" in text and json.loads(text) == doc


def test_diagnose_json_of_a_log_naming_a_bidi_webhook_has_no_raw_bidi_bytes(tmp_path):
    log = tmp_path / "apiserver.log"
    name = "evil\u202egpj.exe\u2066.example\u2069.com"
    log.write_text('E0224 15:00:00.000000       1 dispatcher.go:214] Failed calling webhook, failing closed '
                   f'{name}: failed calling webhook "{name}": failed to call webhook: Post '
                   '"https://evil.svc:443/?timeout=10s": dial tcp 10.96.0.50:443: connect: connection refused '
                   '\u200b\ufeff\u2028\n', encoding="utf-8")
    p = run_cli("diagnose", str(log), "-o", "json")
    assert p.returncode == 3, p.stderr
    assert _raw_hits(p.stdout) == [] and p.stdout.isascii()
    assert name in json.dumps(json.loads(p.stdout), ensure_ascii=False)  # the exact string, escaped


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_fleet_json_and_sarif_escape_hostile_context_names(tmp_path, fmt):
    names = ["evil\u202egpj.exe", "iso\u2066late\u2069", "zw\u200bsp\ufeff"]
    kc = {"apiVersion": "v1", "kind": "Config", "current-context": names[0],
          "clusters": [{"name": f"c{i}", "cluster": {"server": "https://127.0.0.1:1"}} for i in range(len(names))],
          "users": [{"name": "u", "user": {"token": "x"}}],
          "contexts": [{"name": n, "context": {"cluster": f"c{i}", "user": "u"}} for i, n in enumerate(names)]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kc, allow_unicode=True), encoding="utf-8")
    p = run_cli("audit", "--kubeconfig", str(path), "--all-contexts", "--timeout", "2", "-o", fmt,
                env={"KUBECONFIG": ""})
    assert p.stdout, p.stderr
    assert _raw_hits(p.stdout) == [], p.stdout[:400]
    text = json.dumps(json.loads(p.stdout), ensure_ascii=False)
    assert all(n in text for n in names)


def test_every_json_writer_goes_through_the_one_function():
    """json.dumps with ensure_ascii=False anywhere but core/envelope would carry these characters raw again."""
    import breakglass

    root = os.path.dirname(breakglass.__file__)
    offenders = []
    for d, _, files in os.walk(root):
        for n in files:
            if n.endswith(".py"):
                path = os.path.join(d, n)
                text = open(path, encoding="utf-8").read()
                if "ensure_ascii=False" in text and not path.endswith(os.path.join("core", "envelope.py")):
                    offenders.append(os.path.relpath(path, root))
    assert offenders == []
