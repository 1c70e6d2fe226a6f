"""The filters a task template may use (`templaterules.FILTERS`), each charged to the
render's budget (`eval.sandbox`): Jinja's own, run after their operands are checked,
or bounded re-implementations of those whose result can outgrow their operands.

Invariant: no filter here builds a text or list over `budget.MAX_TEXT` characters or
items (checked before it is built), and each charges what it reads and builds; every
filter takes the render's context, so none is run at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import filters as jfilters
from jinja2 import pass_context
from jinja2.runtime import Context

from dlm_git.eval import templatebudget as budget
from dlm_git.eval.templaterules import FILTERS


def _charged(fn: Callable[..., Any], *, as_text: bool = False) -> Callable[..., Any]:
    """`fn` with its first operand's size charged (and made text first: `as_text`)."""

    @pass_context
    def bounded(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        cost = budget.weight(value) + sum(budget.weight(a) for a in args)
        budget.budget_of(context).spend(cost)
        return fn(budget.text(value) if as_text else value, *args, **kwargs)

    return bounded


@pass_context
def _join(context: Context, value: Any, d: str = "", attribute: Any = None) -> str:
    items = budget.items_of(context, value)
    if attribute is not None:
        get = jfilters.make_attrgetter(context.environment, attribute)
        items = [get(item) for item in items]
    return budget.joined(context, [budget.text(i) for i in items], budget.text(d))


@pass_context
def _replace(context: Context, s: Any, old: Any, new: Any, count: Any = None) -> str:
    text = budget.text
    return budget.replaced(context, text(s), text(old), text(new), -1 if count is None else count)


@pass_context
def _trim(context: Context, value: Any, chars: Any = None) -> str:
    s = budget.text(value)
    strip = None if chars is None else budget.text(chars)
    budget.budget_of(context).spend(len(s) * max(1, len(strip or "")))
    return s.strip(strip)


@pass_context
def _list(context: Context, value: Any) -> list[Any]:
    if isinstance(value, str):
        budget.budget_of(context).spend(len(value))
    return budget.items_of(context, value)


@pass_context
def _string(context: Context, value: Any) -> str:
    out = budget.text(value)
    budget.budget_of(context).spend(len(out))
    return out


@pass_context
def _map(context: Context, value: Any, attribute: Any) -> Any:
    return jfilters.sync_do_map(context, value, attribute=attribute)


@pass_context
def _first(context: Context, value: Any) -> Any:
    for item in value:
        return item
    return context.environment.undefined("No first item, sequence was empty.")


@pass_context
def _last(context: Context, value: Any) -> Any:
    for item in reversed(value):
        return item
    return context.environment.undefined("No last item, sequence was empty.")


@pass_context
def _length(context: Context, value: Any) -> int:
    return len(value)


def bounded_filters() -> dict[str, Callable[..., Any]]:
    """Every allowed filter, by name."""
    text_filters: dict[str, Callable[..., Any]] = {
        "lower": jfilters.do_lower,
        "upper": jfilters.do_upper,
        "capitalize": jfilters.do_capitalize,
        "title": jfilters.do_title,
    }
    plain: dict[str, Callable[..., Any]] = {
        "int": jfilters.do_int,
        "float": jfilters.do_float,
        "default": jfilters.do_default,
        "d": jfilters.do_default,
    }
    found: dict[str, Callable[..., Any]] = {
        **{name: _charged(fn, as_text=True) for name, fn in text_filters.items()},
        **{name: _charged(fn) for name, fn in plain.items()},
        "trim": _trim,
        "first": _first,
        "last": _last,
        "join": _join,
        "replace": _replace,
        "list": _list,
        "string": _string,
        "map": _map,
        "length": _length,
        "count": _length,
    }
    assert set(found) == FILTERS, sorted(set(found) ^ FILTERS)
    return found
