"""Bounded YAML and JSON parsing: hostile nesting is an error, never a crash.

Invariants:
- libyaml's composer (`CSafeLoader`) recurses in C once per nesting level and overflows
  the stack (a segfault) at some tens of thousands of `[`; PyYAML's pure-Python composer
  and `json.loads` raise `RecursionError`. Nothing dlm-git reads nests deeper than a
  handful of levels, so YAML text is measured with libyaml's event parser (iterative,
  stopped at the first level past `MAX_DEPTH`) before any loader builds it, and JSON's
  `RecursionError` becomes a `ValueError`.
- The measurement is skipped when the text cannot nest that deep: every collection
  starts at one of `[`, `{`, `-`, `?`, `:`, so fewer of those than `MAX_DEPTH` bound it.
- Errors are the parsers' own types (`yaml.YAMLError`, `ValueError`), so every caller's
  existing handling of unparseable input covers them. Imports nothing heavy (the hooks).
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

MAX_DEPTH = 64
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when available
_PARSER: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)  # not in yaml's namespace
_OPENERS = "[{-?:"


class TooDeep(yaml.MarkedYAMLError):  # type: ignore[misc]
    """YAML nested deeper than `MAX_DEPTH` levels."""


def check_yaml_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise `TooDeep` (a `yaml.YAMLError`, with the line of the first level too deep)
    when `text` nests collections deeper than `limit`; a YAML syntax error found on the
    way is raised as itself."""
    if sum(text.count(c) for c in _OPENERS) <= limit:
        return
    parser = _PARSER(text) if _PARSER is not None else yaml.SafeLoader(text)
    depth = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > limit:
                    raise TooDeep(
                        problem=f"nested deeper than {limit} levels",
                        problem_mark=event.start_mark,
                    )
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    finally:
        parser.dispose()


def load_yaml(text: str, loader: Any = LOADER) -> Any:
    """`yaml.load(text, Loader=loader)` (a safe loader) after `check_yaml_depth`."""
    check_yaml_depth(text)
    return yaml.load(text, Loader=loader)  # noqa: S506 (callers pass safe loaders only)


def load_json(data: str | bytes, *, finite: bool = False) -> Any:
    """`json.loads`, with nesting too deep for the parser a `ValueError`. `finite`: NaN,
    Infinity and numbers that overflow to infinity are a `ValueError` too (not JSON, and
    nothing that holds them can be written back out as JSON)."""
    extra: dict[str, Any] = {"parse_constant": _not_json, "parse_float": _finite} if finite else {}
    try:
        return json.loads(data, **extra)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _not_json(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a float")
    return value
