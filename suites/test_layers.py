"""The house's floors: data flows one way, generators -> harness -> oracles ->
reports -> campaigns. A module may import its own floor and the floors below,
never a higher one, and no modules may import each other in a circle. Every
import counts, a deferred one inside a function too, and so does a module
loaded by name ("package.module:callable" specs, ``importlib.import_module``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("generators", "harness", "oracles", "reports", "campaigns")
# The one import that runs up, by design: ``python -m harness`` is the
# documented entry and names the top floor's command line.
ALLOWED_UP = {("harness.__main__", "campaigns.cli")}
SPEC = re.compile(r"^([A-Za-z_]\w*(?:\.\w+)+)(?::\w+)?$")


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path, packages=FLOORS) -> dict[str, set[str]]:
    """Each module of ``packages`` under ``root`` -> the modules of ``packages`` it imports."""
    files = {_module(p, root): p for pkg in packages for p in sorted((root / pkg).glob("*.py"))}
    known = set(files)

    def resolve(name: str) -> str | None:
        while name and name not in known:  # "pkg.mod.attr" -> "pkg.mod"
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                names += [f"{base}.{a.name}" for a in node.names]  # "pkg.mod.Name" resolves to "pkg.mod"
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                spec = SPEC.match(node.value)
                if spec and spec.group(1).split(".")[0] in packages:
                    names.append(spec.group(1))
        graph[mod] = {r for r in map(resolve, names) if r and r != mod and r != package}
    return graph


def missing(root: Path, packages=FLOORS) -> list[str]:
    """Imports of the project's own modules that name nothing there: a module
    that is not a file, or a name its module does not define. A deferred
    import left stale by a move fails only when its function runs."""
    files = {_module(p, root): p for pkg in packages for p in sorted((root / pkg).glob("*.py"))}

    @functools.cache  # asked once per name imported from the module
    def defined(module: str) -> set[str]:
        names = set()
        for node in ast.parse(files[module].read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.If, ast.Try)):  # names bound under a guard
                names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        return names

    found = []
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [f"{mod}: import {a.name}" for a in node.names
                          if a.name.split(".")[0] in packages and a.name not in files]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.split(".")[0] not in packages:
                    continue
                if base not in files:
                    found.append(f"{mod}: from {base} import ...")
                    continue
                found += [f"{mod}: from {base} import {a.name}" for a in node.names
                          if f"{base}.{a.name}" not in files and a.name != "*" and a.name not in defined(base)]
    return sorted(found)


def upward(graph: dict[str, set[str]]) -> list[str]:
    floor = {pkg: i for i, pkg in enumerate(FLOORS)}
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if floor[b.split(".")[0]] > floor[a.split(".")[0]] and (a, b) not in ALLOWED_UP)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_a_higher_floor():
    assert upward(imports(ROOT)) == []


def test_no_import_circles():
    assert circles(imports(ROOT)) == []


def test_every_import_of_our_own_modules_names_something_that_exists():
    assert missing(ROOT) == []


def test_every_floor_is_read():
    graph = imports(ROOT)
    assert {m.split(".")[0] for m in graph} == set(FLOORS)
    assert "campaigns.cli" in graph["harness.__main__"]  # the allowed exception is seen, not missed


def test_planted_upward_import_and_circle_are_caught(tmp_path):
    """The check fires: a planted upward import (a deferred one and a spec
    string) and a planted circle inside one floor."""
    for pkg in FLOORS:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "generators" / "a.py").write_text("def f():\n    from reports import b\n")
    (tmp_path / "reports" / "b.py").write_text("from . import c\n")
    (tmp_path / "reports" / "c.py").write_text("from .b import x\n")
    (tmp_path / "harness" / "d.py").write_text('POOL = "campaigns.e:handle"\n')
    (tmp_path / "campaigns" / "e.py").write_text("def handle(): pass\n")
    (tmp_path / "campaigns" / "f.py").write_text("def g():\n    from harness import stats\n    from .e import handle, gone\n")
    assert missing(tmp_path) == ["campaigns.f: from campaigns.e import gone", "campaigns.f: from harness import stats",
                                 "reports.c: from reports.b import x"]
    graph = imports(tmp_path)
    assert upward(graph) == ["generators.a -> reports.b", "harness.d -> campaigns.e"]
    assert circles(graph) == [["reports.b", "reports.c"]]
