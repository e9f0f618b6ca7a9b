"""The package's layers, as the README's architecture section draws them: imports point only down this list, and no
two modules import each other (directly or around a circle). Read from the source with ast, lazy imports
included: an import inside a function is still a dependency."""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "breakglass")

# top to bottom; packages on one line are peers and may import each other's modules, never in a circle
LAYERS = [
    {"__main__", "cli"},
    {"flows"},
    {"present"},
    {"ways"},
    {"diagnose", "webhooks", "leaks", "sandbox", "k3s", "talos"},
    {"heal"},
    {"access", "logs"},
    {"text"},
    {"core"},
    {"__init__"},
]
# what only a front end may import
FRONT_END_ONLY = {"typer", "questionary", "click"}


def _rank(pkg: str) -> int:
    for i, layer in enumerate(LAYERS):
        if pkg in layer:
            return i
    raise AssertionError(f"breakglass/{pkg} is in no layer: add it to tests/test_layers.py and the README")


def _modules():
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                name = "breakglass." + (rel[:-len(".__init__")] if rel.endswith(".__init__") else rel)
                out[name] = path
    return out


def _imports(name: str, path: str, known: set) -> set:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    pkg = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
    return found


def _graph():
    mods = _modules()
    known = set(mods)
    return mods, {m: {i for i in _imports(m, p, known) if i in known and i != m} for m, p in mods.items()}


def _top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_point_down():
    mods, graph = _graph()
    bad = []
    for m, deps in graph.items():
        for d in deps:
            if d == "breakglass":
                continue  # the package's __init__ holds only __version__
            if _rank(_top(d)) < _rank(_top(m)):
                bad.append(f"{m} imports {d}, a layer above it")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circles():
    _, graph = _graph()
    circles = []
    state: dict = {}

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    # a package's __init__ that re-exports its own submodules is not a circle of ideas
    circles = [c for c in circles if not all(x.startswith(c.split(" -> ")[0].rsplit(".", 1)[0]) for x in
                                             c.split(" -> ")) or ".__init__" in c]
    assert not circles, "\n".join(circles)


@pytest.mark.parametrize("layer", ["flows", "present", "ways", "diagnose", "webhooks", "heal", "access", "core",
                                   "text"])
def test_below_the_front_ends_no_cli_library(layer):
    mods = _modules()
    bad = []
    for m, p in mods.items():
        if _top(m) != layer:
            continue
        for imp in _imports(m, p, set(mods)):
            if imp.split(".")[0] in FRONT_END_ONLY:
                bad.append(f"{m} imports {imp}")
    assert not bad, "\n".join(bad)


def test_no_loose_modules_at_the_top():
    loose = sorted(f for f in os.listdir(ROOT) if f.endswith(".py") and f not in ("__init__.py", "__main__.py"))
    assert not loose, f"modules loose at the top of the package: {loose}"
