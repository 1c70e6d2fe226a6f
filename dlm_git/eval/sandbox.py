"""The bounded Jinja sandbox lm-eval task templates render in (docs/eval.md, "Tasks").

Invariant: a template from a commit under audit costs at most fixed bounds to render,
the same on every machine (no clock decides): it is refused, as one `TemplateRefused`
or `OverBudget` (both Jinja `SecurityError`s), before it renders or while it renders,
by rules that depend only on the template and the row.
- Before (`problem`, run when a task is checked and again at every compile): at most
  `MAX_TEMPLATE` characters; only the tags, operators, filters, tests and methods of
  `templaterules`; loops nested at most `MAX_LOOP_DEPTH` deep and never recursive;
  `set` outside loops only; no macro, call block, include, import or namespace; no
  `*`, `/`, `//`, `%`, `**`; no `regex_replace` (a pattern from a commit can backtrack
  for hours). Attribute and item names starting with `_` are Python internals: unsafe.
- While (a `Budget` per render): no string, list or text a template builds or reads
  by size is over `MAX_TEXT` characters or items, checked before it is built; the
  rendered text is at most `MAX_TEXT` characters; loop iterations cost their body's
  size (one per node, one per literal character), at most `MAX_STEPS` per render; the
  characters (a list item: `ITEM_COST`) that sized operations read and build are at
  most `MAX_WORK` per render.
- The environment is `ImmutableSandboxedEnvironment` (no attribute that runs code, no
  mutation of lists and dicts), with lm-eval's settings (StrictUndefined, trailing
  newline kept) and no globals but `range`.
Imports jinja2: import it lazily (the eval extra, or torch, brings it).
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jinja2 import BaseLoader, StrictUndefined, nodes, pass_context
from jinja2.exceptions import TemplateError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from dlm_git.eval.templatebudget import (
    ITEM_COST,
    Budget,
    OverBudget,
    TemplateRefused,
    budget_of,
    check,
    items_of,
    joined,
    replaced,
    text,
    weight,
)
from dlm_git.eval.templatefilters import bounded_filters
from dlm_git.eval.templaterules import (
    DICT_METHODS,
    FILTERS,
    LIST_METHODS,
    MAX_TEMPLATE,
    STR_METHODS,
    TESTS,
    template_problem,
)

__all__ = ["BoundedSandbox", "OverBudget", "TemplateRefused", "problem"]


class Counted:
    """A loop's iterable: each item taken costs the loop body's size in steps."""

    def __init__(self, iterable: Any, budget: Budget, cost: int) -> None:
        self._source = iterable
        self._iterator = iter(iterable)
        self._budget = budget
        self._cost = cost

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        item = next(self._iterator)
        self._budget.step(self._cost)
        return item

    def __len__(self) -> int:
        return len(self._source)  # TypeError when unsized: the loop counts as it goes


@pass_context
def _loop(context: Context, iterable: Any, cost: int) -> Counted:
    return Counted(iterable, budget_of(context), cost)


@pass_context
def _concat(context: Context, parts: list[Any]) -> str:
    return joined(context, [text(p) for p in parts])


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "lteq": operator.le,
    "gt": operator.gt,
    "gteq": operator.ge,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}


@pass_context
def _compare(context: Context, left: Any, op: str, right: Any) -> Any:
    cost = weight(left) + weight(right)
    if op in ("in", "notin") and isinstance(right, list | tuple):
        cost += len(right) * weight(left)
    budget_of(context).spend(cost)
    return _COMPARE[op](left, right)


@pass_context
def _slice(context: Context, value: Any, start: Any, stop: Any, step: Any) -> Any:
    cut = slice(start, stop, step)
    if isinstance(value, str | list | tuple):
        size = len(range(*cut.indices(len(value))))
        budget_of(context).spend(check(size, "a slice"))
    return value[cut]


def _range(*args: int) -> range:
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        raise TemplateRefused("range() takes whole numbers only")
    made = range(*args)
    check(len(made), "a range")
    return made


@pass_context
def _finalize(context: Context, value: Any) -> str:
    out = text(value)
    budget_of(context).spend(len(out))
    return out


def _bounded_concat(pieces: Iterable[str]) -> str:
    """The rendered text, refused once it passes `MAX_TEXT` characters."""
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        check(size, "the rendered text")
        out.append(piece)
    return "".join(out)


class _Bound(NodeTransformer):
    """The checked tree rewritten so every sized step goes through a budget: loops'
    iterables counted, `~`, comparisons and slices through bounded filters."""

    def _filter(self, node: nodes.Node, name: str, arg: Any, *args: Any) -> nodes.Expr:
        return nodes.Filter(arg, name, list(args), [], None, None, lineno=node.lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        cost = _size_of([*node.body, *([node.test] if node.test else [])])
        node.iter = self._filter(node, "_dlm_loop", node.iter, nodes.Const(cost))
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._filter(node, "_dlm_concat", nodes.List(node.nodes, lineno=node.lineno))

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        (operand,) = node.ops  # chains are refused by the rules
        return self._filter(node, "_dlm_compare", node.expr, nodes.Const(operand.op), operand.expr)

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        self.generic_visit(node)
        if not isinstance(node.arg, nodes.Slice):
            return node
        cut = node.arg
        ends = [e if e is not None else nodes.Const(None) for e in (cut.start, cut.stop, cut.step)]
        return self._filter(node, "_dlm_slice", node.node, *ends)


def _size_of(body: list[nodes.Node]) -> int:
    """A loop body's cost per iteration: one per node, one per literal character."""
    size = 1
    for top in body:
        for node in [top, *top.find_all(nodes.Node)]:
            size += 1
            if isinstance(node, nodes.TemplateData):
                size += len(node.data)
            elif isinstance(node, nodes.Const) and isinstance(node.value, str):
                size += len(node.value)
    return size


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The environment lm-eval's templates render in (see the module invariants)."""

    intercepted_binops = frozenset({"+", "-"})
    concat = staticmethod(_bounded_concat)

    def __init__(self) -> None:
        super().__init__(
            loader=BaseLoader(),
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            finalize=_finalize,
        )
        tests = self.tests
        self.tests = {name: tests[name] for name in TESTS}
        self.filters = {
            **bounded_filters(),
            "_dlm_loop": _loop,
            "_dlm_concat": _concat,
            "_dlm_compare": _compare,
            "_dlm_slice": _slice,
        }
        assert set(FILTERS) <= set(self.filters)
        self.globals = {"range": _range}
        self._compiled: dict[str, Any] = {}

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        if len(source) > MAX_TEMPLATE:
            raise TemplateRefused(f"it is {len(source)} characters long (at most {MAX_TEMPLATE})")
        tree = super()._parse(source, name, filename)
        why = template_problem(tree)
        if why is not None:
            raise TemplateRefused(why)
        bounded = _Bound().visit(tree)
        bounded.set_environment(self)
        return bounded  # type: ignore[no-any-return]

    def from_string(self, source: Any, globals: Any = None, template_class: Any = None) -> Any:
        """A template compiled once per source text (lm-eval compiles each row's anew)."""
        if globals is not None or template_class is not None or not isinstance(source, str):
            return super().from_string(source, globals, template_class)
        if source not in self._compiled:
            if len(self._compiled) >= 256:
                self._compiled.clear()
            self._compiled[source] = super().from_string(source)
        return self._compiled[source]

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "+" and isinstance(left, str | list | tuple):
            size = len(left) + (len(right) if isinstance(right, str | list | tuple) else 0)
            budget_of(context).spend(check(size, "a sum"))
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        kwargs.pop("_loop_vars", None)  # what Jinja's own `Context.call` drops too
        kwargs.pop("_block_vars", None)
        if __obj is _range:
            return _range(*args, **kwargs)
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", type(__obj).__name__)
        if not isinstance(__obj, types.BuiltinMethodType) or name not in _methods(owner):
            raise TemplateRefused(f"it calls {name!r}, not a method a template may call")
        return _call_method(__context, owner, name, args, kwargs)


def _methods(owner: Any) -> frozenset[str]:
    if isinstance(owner, str):
        return STR_METHODS
    if isinstance(owner, list | tuple):
        return LIST_METHODS
    if isinstance(owner, dict):
        return DICT_METHODS
    return frozenset()


def _call_method(
    context: Context, owner: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """`owner.name(*args, **kwargs)`, charged: what it reads, what it builds (checked
    before for the methods whose result can outgrow what they read)."""
    budget = budget_of(context)
    read = weight(owner) + sum(weight(a) for a in (*args, *kwargs.values()))
    if isinstance(owner, str) and name in ("strip", "lstrip", "rstrip") and args:
        read = len(owner) * max(1, weight(args[0]))
    if isinstance(owner, list | tuple) and name in ("index", "count") and args:
        read = len(owner) * max(1, weight(args[0]))
    budget.spend(read)
    if isinstance(owner, str) and name == "replace":
        return replaced(context, owner, *args, **kwargs)
    if isinstance(owner, str) and name == "join":
        return joined(context, items_of(context, args[0]), owner)
    result = getattr(owner, name)(*args, **kwargs)
    if isinstance(result, list):
        budget.spend(ITEM_COST * len(result))
    return result


def problem(source: str) -> str | None:
    """Why `source` is a template dlm-git does not render (None: it is one it does)."""
    try:
        BoundedSandbox().from_string(source)
    except TemplateRefused as exc:
        return str(exc)
    except (TemplateError, ValueError, RecursionError, SyntaxError, MemoryError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        return f"it does not parse: {first}"
    return None
