"""What an lm-eval task template may use, judged on its parsed tree before it renders
(docs/eval.md, "Tasks"): the allow-list `eval.sandbox` enforces, one place.

Invariant: every construct a template may use costs, per evaluation, time and memory
bounded by the sizes of the values it touches, and each of those is charged to the
render's budget by `eval.sandbox`; constructs whose cost can multiply (macros and call
blocks recurse, `*` and `**` multiply sizes, padding filters allocate what an argument
says, `regex_replace` backtracks) are refused, whatever their arguments. Sized for what
lm-eval's own tasks use: output, `if`, `for` (at most `MAX_LOOP_DEPTH` deep), `set`
outside loops, `+ - ~`, comparisons, boolean logic, literals, the filters, tests and
methods below, and `range()`.
"""

from __future__ import annotations

from jinja2 import nodes

MAX_TEMPLATE = 1 << 16
MAX_LOOP_DEPTH = 2

FILTERS = frozenset(
    {
        "length", "count", "string", "join", "int", "float", "replace", "list", "trim",
        "lower", "upper", "capitalize", "title", "first", "last", "default", "d", "map",
    }
)  # fmt: skip
TESTS = frozenset(
    {
        "defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
        "number", "string", "mapping", "sequence", "iterable", "even", "odd",
    }
)  # fmt: skip
STR_METHODS = frozenset(
    {
        "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "lower", "upper",
        "capitalize", "title", "casefold", "replace", "join", "startswith", "endswith",
        "find", "rfind", "index", "rindex", "count", "isdigit", "isalpha", "isalnum",
        "isspace", "isupper", "islower", "isnumeric", "isdecimal", "istitle",
    }
)  # fmt: skip
LIST_METHODS = frozenset({"index", "count"})
DICT_METHODS = frozenset({"get", "keys", "values", "items"})
METHODS = STR_METHODS | LIST_METHODS | DICT_METHODS

_ALLOWED: tuple[type[nodes.Node], ...] = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.For, nodes.Assign,
    nodes.Name, nodes.Const, nodes.List, nodes.Tuple, nodes.Dict, nodes.Pair,
    nodes.Keyword, nodes.Getattr, nodes.Getitem, nodes.Slice, nodes.CondExpr, nodes.And,
    nodes.Or, nodes.Not, nodes.Neg, nodes.Pos, nodes.Add, nodes.Sub, nodes.Concat,
    nodes.Compare, nodes.Operand, nodes.Filter, nodes.Test, nodes.Call,
)  # fmt: skip
_WHY = {
    "Macro": "a macro (macros recurse)",
    "CallBlock": "a call block (it calls a macro)",
    "FilterBlock": "a filter block",
    "With": "a with block",
    "AssignBlock": "a set block",
    "Include": "an include (it reads another template)",
    "Import": "an import (it reads another template)",
    "FromImport": "an import (it reads another template)",
    "Extends": "extends (it reads another template)",
    "Block": "a block",
    "NSRef": "a namespace",
    "Mul": "the operator * (it multiplies sizes)",
    "Pow": "the operator ** (it multiplies sizes)",
    "Mod": "the operator % (string formatting pads to any width)",
    "FloorDiv": "the operator //",
    "Div": "the operator /",
}
_FILTER_WHY = {"regex_replace": "a pattern from a commit can backtrack for hours; use replace"}


def template_problem(tree: nodes.Template) -> str | None:
    """Why the parsed template `tree` is outside the allow-list (None: inside)."""
    for found in tree.find_all((nodes.Getattr, nodes.Getitem)):
        name = found.attr if isinstance(found, nodes.Getattr) else _const(found)  # type: ignore[arg-type]
        if isinstance(name, str) and name.startswith("_"):
            return f"it reads {name!r}, a Python internal (unsafe)"
    stack: list[tuple[nodes.Node, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        why = _node_problem(node, depth)
        if why is not None:
            return why
        if isinstance(node, nodes.For):  # pushed last first: visited in document order
            inner = [node.target, *node.body, *node.else_, *([node.test] if node.test else [])]
            stack.extend((child, depth + 1) for child in reversed(inner))
            stack.append((node.iter, depth))
        else:
            stack.extend((child, depth) for child in reversed(list(node.iter_child_nodes())))
    return None


def _const(node: nodes.Getitem) -> object:
    return node.arg.value if isinstance(node.arg, nodes.Const) else None


def _node_problem(node: nodes.Node, depth: int) -> str | None:
    """What is wrong with one node, `depth` loops deep (None: nothing)."""
    if not isinstance(node, _ALLOWED):
        kind = type(node).__name__
        return f"it uses {_WHY.get(kind, f'the construct {kind}')}"
    if isinstance(node, nodes.For):
        if node.recursive:
            return "it uses a recursive loop"
        if depth + 1 > MAX_LOOP_DEPTH:
            return f"it nests loops over {MAX_LOOP_DEPTH} deep"
    if isinstance(node, nodes.Assign) and depth > 0:
        return "it uses set inside a loop"
    if isinstance(node, nodes.Compare) and len(node.ops) != 1:
        return "it chains comparisons (write them with and)"
    if isinstance(node, nodes.Filter | nodes.Test | nodes.Call) and (
        node.dyn_args is not None or node.dyn_kwargs is not None
    ):
        return "it passes *args or **kwargs"
    if isinstance(node, nodes.Filter):
        return _filter_problem(node)
    if isinstance(node, nodes.Test) and node.name not in TESTS:
        return f"it uses the test {node.name!r}, not one a template may use"
    if isinstance(node, nodes.Call):
        return _call_problem(node)
    return None


def _filter_problem(node: nodes.Filter) -> str | None:
    if node.name in _FILTER_WHY:
        return f"it uses the filter {node.name!r} ({_FILTER_WHY[node.name]})"
    if node.name not in FILTERS:
        return f"it uses the filter {node.name!r}, not one a template may use"
    if node.name == "map" and (node.args or [k.key for k in node.kwargs] != ["attribute"]):
        return "it uses map other than map(attribute=...)"
    return None


def _call_problem(node: nodes.Call) -> str | None:
    callee = node.node
    if isinstance(callee, nodes.Name):
        return None if callee.name == "range" else f"it calls {callee.name!r} (only range())"
    if isinstance(callee, nodes.Getattr) and callee.attr in METHODS:
        return None
    name = callee.attr if isinstance(callee, nodes.Getattr) else type(callee).__name__
    return f"it calls the method {name!r}, not one a template may call"
