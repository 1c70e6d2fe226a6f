"""A template render's bounds (`eval.sandbox`): the errors, the budget one render
spends, and the sized primitives every filter and hook builds values through.

Invariant: a value built here is at most `MAX_TEXT` characters or items, checked
before it is built, and what it reads and builds is charged to the render's `Budget`
(at most `MAX_WORK` per render; loop steps at most `MAX_STEPS`). The counts depend on
the template and the row only, so a render is refused identically on every machine.
"""

from __future__ import annotations

import weakref
from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.runtime import Context, Undefined

MAX_TEXT = 1 << 20
MAX_STEPS = 1 << 20
MAX_WORK = 1 << 24
ITEM_COST = 8


class TemplateRefused(SecurityError):
    """A template outside what dlm-git renders (the static rules)."""


class OverBudget(SecurityError):
    """A render that would pass one of the bounds."""


class Budget:
    """What one render has spent: loop steps and sized work."""

    def __init__(self) -> None:
        self.steps = 0
        self.work = 0

    def step(self, cost: int) -> None:
        self.steps += cost
        if self.steps > MAX_STEPS:
            raise OverBudget(f"its loops run over {MAX_STEPS} steps (iterations x body size)")

    def spend(self, cost: int) -> None:
        self.work += cost
        if self.work > MAX_WORK:
            raise OverBudget(f"it reads and builds over {MAX_WORK} characters in one render")


_BUDGETS: weakref.WeakKeyDictionary[Context, Budget] = weakref.WeakKeyDictionary()


def budget_of(context: Context) -> Budget:
    """The budget of the render `context` belongs to (one context per render)."""
    found = _BUDGETS.get(context)
    if found is None:
        found = _BUDGETS[context] = Budget()
    return found


def check(size: int, what: str) -> int:
    if size > MAX_TEXT:
        raise OverBudget(f"{what} would be {size} characters or items long (over {MAX_TEXT})")
    return size


_SCALARS = (bool, int, float, type(None))


def weight(value: Any) -> int:
    """The size of `value` counted deep (a character, an item: 1), refused past
    `MAX_TEXT` (the walk stops there); a value that is not data is refused."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (*_SCALARS, Undefined)):
            total += 1
        elif isinstance(item, range):
            total += 2 + len(item)
        elif isinstance(item, dict | list | tuple | KeysView | ValuesView | ItemsView):
            total += 2 + len(item)  # its items counted before they are walked
            check(total, "a value")
            stack.extend(item.items() if isinstance(item, dict) else item)
        else:
            raise TemplateRefused(f"it uses a {type(item).__name__} as data")
        check(total, "a value")
    return total


def text(value: Any) -> str:
    """`str(value)` for data, bounded (a template's output, `~`, `string`, `join`)."""
    if isinstance(value, str):
        check(len(value), "a text")
        return value
    if isinstance(value, Undefined):
        return str(value)  # StrictUndefined: the missing column's error
    if isinstance(value, _SCALARS):
        return str(value)
    weight(value)
    out = str(value)
    check(len(out), "a text")
    return out


def items_of(context: Context, value: Any) -> list[Any]:
    """The items of `value`, at most `MAX_TEXT` of them (pulled one by one)."""
    if isinstance(value, Undefined):
        iter(value)  # raises the missing column's error
    out: list[Any] = []
    for item in value:
        out.append(item)
        check(len(out), "a list")
    budget_of(context).spend(ITEM_COST * len(out))
    return out


def joined(context: Context, parts: list[str], sep: str = "") -> str:
    size = sum(len(p) for p in parts) + max(0, len(parts) - 1) * len(sep)
    budget_of(context).spend(check(size, "a joined text"))
    return sep.join(parts)


def replaced(context: Context, s: str, old: str, new: str, count: int = -1) -> str:
    """`s.replace(old, new, count)`, its length known before it is built."""
    hits = len(s) + 1 if old == "" else s.count(old)
    if count >= 0:
        hits = min(hits, count)
    size = len(s) + hits * (len(new) - len(old))
    budget_of(context).spend(len(s) + check(size, "a replaced text"))
    return s.replace(old, new, count)
