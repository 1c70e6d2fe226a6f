"""The allowed import direction, enforced: no lower layer imports a higher one, and no
module imports itself back through others.

The layers (README, "Layout") from the bottom up; a module may import from its own unit
and from any lower layer, never from a higher one or from another unit of its own layer.
Function-level (deferred) imports count too: deferring an import hides the arrow from
start-up time, not from the design.

Inside a unit, the modules' imports form no circle: module-level and function-level
imports both count (for the same reason); an import under `if TYPE_CHECKING:` does not,
since it never runs (it names a type for the checker only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dlm_git"

LAYERS: list[set[str]] = [
    {"bounds"},
    {"errors", "validated"},
    {"fsutil", "safeparse", "paths", "severity"},
    {"merkle", "safetensors_header"},
    {"hashing", "numerics", "topology", "layout", "gitio", "versions"},
    {"output", "dvcfiles", "token_stream", "statedir", "statcache", "childproc", "selfid"},
    {"doc", "base", "lock", "manifest"},
    {"cache", "docset", "sign"},
    {"docat"},
    {"contract"},
    {"train"},
    {"eval"},
    {"verify"},
    {"history"},
    {"hooks", "fsck"},
    {"pipeline"},
    {"clidecl"},
    {"commands"},
    {"cli"},
    {"__main__"},
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def unit_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0]


def imported_units(path: Path) -> set[str]:
    units: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "dlm_git":
                continue
            if len(parts) > 1:
                units.add(parts[1])
            else:
                units.update(a.name for a in node.names if a.name != "__version__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "dlm_git" and len(parts) > 1:
                    units.add(parts[1])
    return units


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert units <= set(LAYER), f"place these in LAYERS: {sorted(units - set(LAYER))}"


def test_no_arrow_runs_back_up() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(path)
        if unit == "__init__":
            continue
        for target in sorted(imported_units(path) - {unit}):
            if LAYER[target] >= LAYER[unit]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)} ({unit}) imports {target}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


# --------------------------------------------------------------------------- circles


def module_of(path: Path, package: Path) -> str:
    """`dlm_git/train/run.py` -> `dlm_git.train.run`; a package's `__init__` is the package."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _checker_only(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): imports that never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(path: Path, modules: set[str]) -> dict[str, list[int]]:
    """The package's modules that `path` imports when it runs (at any depth of the file,
    not under `if TYPE_CHECKING:`), each with the lines that import it."""
    found: dict[str, list[int]] = {}

    def named(name: str, line: int) -> None:
        if name not in modules:
            return
        lines = found.setdefault(name, [])
        if line not in lines:
            lines.append(line)

    def visit(node: ast.AST) -> None:
        if _checker_only(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                named(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from P import m`: the module P.m if there is one
                sub = f"{node.module}.{alias.name}"
                named(sub if sub in modules else node.module, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text("utf-8")))
    return found


Graph = dict[str, dict[str, list[int]]]


def import_graph(package: Path) -> Graph:
    paths = {module_of(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(paths)
    graph: Graph = {}
    for name, path in paths.items():
        graph[name] = {t: ls for t, ls in imported_modules(path, modules).items() if t != name}
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """Every set of modules that import one another round a circle (Tarjan's strongly
    connected components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def describe(graph: Graph, circle: list[str]) -> str:
    members = set(circle)
    arrows = [
        f"  {a} -> {b} (line {', '.join(map(str, graph[a][b]))})"
        for a in circle
        for b in sorted(graph[a])
        if b in members
    ]
    return "circle " + " / ".join(circle) + ":\n" + "\n".join(arrows)


def test_no_import_circles() -> None:
    graph = import_graph(PACKAGE)
    found = circles(graph)
    assert not found, "modules that import each other:\n" + "\n".join(
        describe(graph, c) for c in found
    )


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return package


@pytest.mark.parametrize(
    ("b_text", "circle"),
    [
        ("from pkg.a import x\n", [["pkg.a", "pkg.b"]]),
        ("def f():\n    from pkg import a\n", [["pkg.a", "pkg.b"]]),
        ("import typing\nif typing.TYPE_CHECKING:\n    from pkg.a import x\n", []),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n", []),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n"
            "else:\n    import pkg.a\n",
            [["pkg.a", "pkg.b"]],
        ),
    ],
    ids=["module-level", "function-level", "typing.TYPE_CHECKING", "TYPE_CHECKING", "else"],
)
def test_a_circle_is_found_wherever_the_import_runs(
    tmp_path: Path, b_text: str, circle: list[list[str]]
) -> None:
    """`a` imports `b` inside a function; `b` imports `a` back: a circle, unless `b`'s
    import is only for the type checker."""
    package = write_package(
        tmp_path,
        {"__init__.py": "", "a.py": "x = 1\n\ndef g():\n    from pkg.b import y\n", "b.py": b_text},
    )
    assert circles(import_graph(package)) == circle


def test_a_circle_through_three_modules_names_every_arrow(tmp_path: Path) -> None:
    package = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg import b\n",
            "b.py": "import pkg.c\n",
            "c.py": "def f():\n    from pkg.a import g\n",
            "d.py": "from pkg import a\n",  # imports into the circle, is not part of it
        },
    )
    graph = import_graph(package)
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    text = describe(graph, ["pkg.a", "pkg.b", "pkg.c"])
    assert "pkg.c -> pkg.a (line 2)" in text and "pkg.a -> pkg.b (line 1)" in text
