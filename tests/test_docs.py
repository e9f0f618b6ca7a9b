"""The manual (docs/, MkDocs): it builds with --strict (a broken link, an unknown anchor or a page missing from
the nav fails), its command pages name every command and option of the CLI itself, the README stays short, and
two pages are looked at in a real browser (Chromium headless) at a laptop's and a phone's width."""

from __future__ import annotations

import glob
import html
import os
import shutil
import struct
import subprocess
import sys
import zlib

import pytest

from tests.conftest import ROOT

SITE_PAGES = ("index.html", "commands/recover.html")
WIDTHS = {"laptop": (1366, 900), "phone": (390, 844)}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return out


def _text(site, pattern: str) -> str:
    out = []
    for path in glob.glob(os.path.join(site, pattern), recursive=True):
        with open(path, encoding="utf-8") as f:
            out.append(html.unescape(f.read()))
    return "\n".join(out)


def test_the_site_builds_strictly_and_has_every_page(site):
    for page in ("index.html", "at-3am.html", "wizard.html", "exit-codes.html", "security.html",
                 "architecture.html", "real-components.html", "commands/index.html", "runbooks/index.html",
                 "runbooks/start-here.html", "runbooks/static-manifests.html"):
        assert os.path.exists(os.path.join(site, page)), page


def test_every_command_and_option_is_in_the_reference(site):
    from breakglass.cli import reference

    text = _text(site, "**/*.html")
    missing = []
    for command, flags in reference.everything():
        if command not in text:
            missing.append(command)
        missing += [f"{command} {f}" for f in flags if f not in text]
    assert not missing, missing
    # each top-level command is linked from the commands table to its own page
    table = _text(site, "commands/index.html")
    for name, _summary in reference.top_level():
        assert f"breakglass {name}</code></a>" in table, name


def test_the_reference_is_the_cli_s_own_help():
    """A new option appears without anyone writing it down: the page is made from the same objects as --help."""
    from breakglass.cli import reference

    page = reference.page(["recover", "static-manifests"])
    assert "`--static-manifests <str>`" in page and "`--node-backup-dir <str>`" in page
    assert "```sh\nbreakglass recover static-manifests --ssh cp1,cp2,cp3" in page  # the examples paste


def test_the_readme_is_short_and_points_at_the_manual():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert len(readme.splitlines()) <= 300
    for page in ("docs/commands/diagnose.md", "docs/commands/recover.md", "docs/runbooks/index.md",
                 "docs/exit-codes.md", ".venv/bin/breakglass", "make docs"):
        assert page in readme, page
    for link in [part.split(")")[0] for part in readme.split("](")[1:]]:
        if not link.startswith("http"):
            assert os.path.exists(os.path.join(ROOT, link.split("#")[0])), link


def _browser() -> str | None:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _png(path: str) -> tuple[int, int, bytes]:
    """Width, height and the decompressed pixel rows of a PNG (no imaging library needed)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    return width, height, zlib.decompress(idat)


@pytest.mark.parametrize("page", SITE_PAGES)
@pytest.mark.parametrize("width", list(WIDTHS))
def test_two_pages_render_in_a_real_browser_at_two_widths(site, tmp_path, page, width):
    browser = _browser()
    if browser is None:
        pytest.skip("no Chromium here (Debian: chromium-headless-shell, which make test installs)")
    w, h = WIDTHS[width]
    shot = tmp_path / "shot.png"
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size={w},{h}", f"--screenshot={shot}", f"file://{site}/{page}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    pw, ph, rows = _png(str(shot))
    assert (pw, ph) == (w, h)
    # not a blank page: the text, the header bar and the code blocks make many distinct rows
    stride = len(rows) // ph
    distinct = len({rows[i * stride:(i + 1) * stride] for i in range(ph)})
    assert distinct > ph // 4, (page, width, distinct)
