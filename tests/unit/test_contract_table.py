"""The check table is the one list: every check id the code sets a state for is a row of
`contract.table.TABLE`, and the docs name the checks by the table's ids (docs/verify.md
the ones `verify` runs, docs/hooks.md the ones the hooks run)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dlm_git.contract.table import RULES, TABLE, Runs

ROOT = Path(__file__).resolve().parents[2]
CONSTRUCTORS = {"Check", "passed", "failed", "judged", "absent"}
"""Calls whose first argument is a check id: the outcome constructors, `Check(...)`, and
`checks.add/run/absent(...)` on a `Checks`."""
METHODS = {"add", "run", "absent"}
CHECK_ID = re.compile(r"[a-z]+(\.[a-z0-9_]+)*")


def _first_string(node: ast.Call) -> str | None:
    first = node.args[0] if node.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.Tuple) and first.elts and isinstance(first.elts[0], ast.Constant):
        value = first.elts[0].value  # sign.judge's (check, ok, detail) tuples
        return value if isinstance(value, str) and value.startswith("signature.") else None
    return None


def _sets_a_check(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in CONSTRUCTORS
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "append":
        return isinstance(node.args[0] if node.args else None, ast.Tuple)
    receiver = func.value
    return func.attr in METHODS and isinstance(receiver, ast.Name) and receiver.id == "checks"


def ids_set_in_code() -> dict[str, str]:
    """Every string literal the package passes as a check id, with where."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "dlm_git").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and _sets_a_check(node):
                value = _first_string(node)
                if value is not None and CHECK_ID.fullmatch(value):
                    found[value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_check_the_code_sets_is_a_row() -> None:
    found = ids_set_in_code()
    assert {"lock.binding", "adapter.sha256", "signature.binding", "lock.drift"} <= set(found)
    unknown = {k: where for k, where in found.items() if k not in RULES}
    assert not unknown, f"add these to contract.table.TABLE: {unknown}"


def test_ids_are_unique_and_stable_in_shape() -> None:
    ids = [rule.id for rule in TABLE]
    assert len(ids) == len(set(ids))
    assert all(CHECK_ID.fullmatch(i) for i in ids), ids


def documented(doc: str) -> set[str]:
    """The check ids in the first column of the doc's tables headed `| check |`."""
    named: set[str] = set()
    in_table = False
    for line in (ROOT / "docs" / doc).read_text("utf-8").splitlines():
        if line.startswith("| check |"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and not line.startswith("|---"):
            named.update(re.findall(r"`([a-z][a-z0-9_.]*)`", line.split("|")[1]))
    return named


def test_docs_verify_names_every_check_verify_runs() -> None:
    runs = {r.id for r in TABLE if r.runs & (Runs.HASH | Runs.LEVEL)}
    named = documented("verify.md")
    assert runs <= named, f"docs/verify.md lacks {sorted(runs - named)}"
    assert named <= set(RULES), f"docs/verify.md names unknown checks {sorted(named - set(RULES))}"


def test_docs_hooks_names_every_check_the_hook_runs() -> None:
    runs = {r.id for r in TABLE if r.runs & Runs.HOOK}
    named = documented("hooks.md")
    assert runs <= named, f"docs/hooks.md lacks {sorted(runs - named)}"
    assert named <= set(RULES), f"docs/hooks.md names unknown checks {sorted(named - set(RULES))}"
