"""The allowed import direction, enforced: no lower layer imports a higher one.

The layers (README, "Layout") from the bottom up; a module may import from its own unit
and from any lower layer, never from a higher one or from another unit of its own layer.
Function-level (deferred) imports count too: deferring an import hides the arrow from
start-up time, not from the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dlm_git"

LAYERS: list[set[str]] = [
    {"errors"},
    {"fsutil"},
    {"merkle", "safetensors_header"},
    {"hashing", "safeparse", "numerics", "topology", "layout", "gitio", "versions"},
    {"output", "dvcfiles", "token_stream", "statedir"},
    {"doc", "base", "lock", "manifest"},
    {"determinism", "cache", "docset", "revdoc", "sign"},
    {"train"},
    {"verify"},
    {"history"},
    {"hooks"},
    {"pipeline"},
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
