"""MkDocs hook: the parts of the manual made from the code, filled in at build time.

``<!-- reference: COMMAND [SUB] -->``  the command's reference, from the CLI itself (breakglass.cli.reference);
                                       ``<!-- reference: -->`` is `breakglass` itself
``<!-- include: PATH -->``             a file of the repository (bench/RESULTS.md), so it has one source
``<!-- commands -->``                  the table of commands, each linked to its page
"""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MARK = re.compile(r"<!-- (reference|include|commands):? ?([^>]*?) -->")
# the page of each top-level command, relative to docs/commands/ (the rest have a page of their own name)
PAGES = {"wizard": "../wizard.md", "exporter": "../fleet.md"}


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - MkDocs' hook signature
    from breakglass.cli import reference  # noqa: PLC0415 - the CLI is imported only when a page asks for it

    def fill(m: re.Match) -> str:
        what, arg = m.group(1), m.group(2).strip()
        if what == "reference":  # no command named: `breakglass` itself, its own options only
            return reference.page(arg.split(), level=3, recursive=bool(arg))
        if what == "commands":
            rows = ["| Command | What it does |", "|---|---|"]
            for name, summary in reference.top_level():
                rows.append(f"| [`breakglass {name}`]({PAGES.get(name, name + '.md')}) | {summary} |")
            return "\n".join(rows)
        path = os.path.normpath(os.path.join(ROOT, arg))
        if not path.startswith(ROOT + os.sep):
            raise ValueError(f"{page.file.src_path}: include outside the repository: {arg}")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # its own title would be a second H1 on the page: one level down, and every heading below it
        return re.sub(r"^(#+) ", lambda h: "#" + h.group(1) + " ", text, flags=re.M)

    return _MARK.sub(fill, markdown)
