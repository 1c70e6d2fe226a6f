"""One door for hostile bytes: `dlm_git.safeparse` is the only module that parses JSON or
YAML (or unpickles anything).

Every parse there bounds what hostile bytes can do (nesting depth, non-finite numbers,
duplicate keys where asked): a `json.loads` or `yaml.load` written anywhere else is a
parser without those bounds. Dumping is fine. The module tree is read with `ast`, so
deferred (function-level) imports and calls count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dlm_git"
DOOR = PACKAGE / "safeparse.py"

PARSERS = {
    "json": {"load", "loads", "JSONDecoder", "decoder", "scanner"},
    "yaml": {
        "load",
        "load_all",
        "safe_load",
        "safe_load_all",
        "full_load",
        "full_load_all",
        "unsafe_load",
        "unsafe_load_all",
        "compose",
        "compose_all",
        "parse",
        "scan",
        "constructor",
        "composer",
        "parser",
        "reader",
        "scanner",
        "loader",
        "cyaml",
    },
}
"""Module -> the names whose use parses (or builds a parser). Any `yaml.*Loader`/`*Parser`
counts too; so does every use of `pickle`, `marshal` and `shelve`."""
NEVER = {"pickle", "marshal", "shelve", "_pickle", "cPickle"}


def _parser_name(module: str, name: str) -> bool:
    if module in NEVER:
        return True
    if module not in PARSERS:
        return False
    return name in PARSERS[module] or (
        module == "yaml" and name.endswith(("Loader", "Parser", "Constructor", "Composer"))
    )


def violations(source: str) -> list[str]:
    """`line: what` for each parse of JSON or YAML (or use of pickle) in `source`."""
    return [
        f"{getattr(node, 'lineno', '?')}: {what}"
        for node in ast.walk(ast.parse(source))
        if (what := _reaches_a_parser(node)) is not None
    ]


def _reaches_a_parser(node: ast.AST) -> str | None:
    """What `node` uses that parses, or None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        found = _parser_name(node.value.id, node.attr)
        return f"{node.value.id}.{node.attr}" if found else None
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        parts = node.module.split(".")
        names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
        found = parts[0] in NEVER or any(_parser_name(parts[0], n) for n in names)
        return f"from {node.module} import ..." if found else None
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] in NEVER or (len(parts) > 1 and _parser_name(parts[0], parts[1])):
                return f"import {alias.name}"
        return None
    if isinstance(node, ast.Call) and _getattr_parser(node):
        return f"getattr(..., {ast.unparse(node.args[1])})"
    return None


def _getattr_parser(call: ast.Call) -> bool:
    """`getattr(yaml, "CSafeLoader", ...)`: a parser reached by name."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "getattr" and len(call.args) >= 2):
        return False
    target, name = call.args[0], call.args[1]
    return (
        isinstance(target, ast.Name)
        and isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and _parser_name(target.id, name.value)
    )


def test_only_safeparse_parses_json_or_yaml() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{where}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != DOOR
        for where in violations(path.read_text("utf-8"))
    ]
    assert not wrong, "parse through dlm_git.safeparse instead:\n" + "\n".join(wrong)


def test_the_check_sees_each_way_in() -> None:
    """The check itself can fail: each way of reaching a parser is caught."""
    caught = [
        "import json\njson.loads(b)",
        "import json\njson.load(f)",
        "import json\njson.JSONDecoder().decode(s)",
        "from json import loads",
        "import yaml\nyaml.safe_load(t)",
        "import yaml\nyaml.load(t, Loader=yaml.CSafeLoader)",
        "import yaml\nyaml.full_load(t)",
        "import yaml\nyaml.unsafe_load(t)",
        "import yaml\nyaml.compose(t)",
        "import yaml\nclass L(yaml.SafeLoader): pass",
        "import yaml\nL = getattr(yaml, 'CSafeLoader', None)",
        "from yaml import CSafeLoader",
        "from yaml.constructor import SafeConstructor",
        "import pickle",
        "import numpy\nfrom pickle import loads",
        "def f(p):\n    import marshal\n    return marshal.loads(p)",
        "def f(yaml, t):\n    return yaml.load(t)",  # ruamel's YAML() bound to `yaml`
    ]
    for source in caught:
        assert violations(source), source
    fine = [
        "import json\njson.dumps(x)",
        "import json\njson.JSONDecodeError",
        "import yaml\nyaml.safe_dump(x)",
        "import yaml\nyaml.YAMLError",
        "import yaml\nyaml.MappingNode",
        "from dlm_git.safeparse import load_json, load_yaml",
    ]
    for source in fine:
        assert not violations(source), source
