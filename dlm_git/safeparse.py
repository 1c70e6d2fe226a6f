"""The one door for bytes dlm-git did not write: every JSON and YAML parse of dlm-git goes
through here (`tests/unit/test_one_door.py`), bounded so hostile nesting is an error,
never a crash; `dig` reads nested values of what was parsed without trusting its shape.

Invariants:
- libyaml's composer (`CSafeLoader`) recurses in C once per nesting level and overflows
  the stack (a segfault) at some tens of thousands of `[`; PyYAML's pure-Python composer
  and `json.loads` raise `RecursionError`. Nothing dlm-git reads nests deeper than a
  handful of levels, so YAML text is measured with libyaml's event parser (iterative,
  stopped at the first level past `MAX_DEPTH`) before any loader builds it, and JSON's
  `RecursionError` becomes a `ValueError`.
- The same event pass counts the nodes the text expands to through its aliases (an
  alias counts every node of what it names): past `MAX_NODES` it is `TooLarge`, so a
  few hundred bytes of nested anchors can never make a comparison or a repr of the
  result walk billions of nodes; an alias inside the collection it names (`&a [*a]`, a
  structure that contains itself) is `TooLarge` too: no walk of it would end.
- The pass is skipped when the text can neither nest that deep nor hold an alias: every
  collection starts at one of `[`, `{`, `-`, `?`, `:` (fewer of those than `MAX_DEPTH`
  bound it), and an alias is written `*`.
- A JSON string or key holding a lone surrogate (`"\\ud800"`: legal JSON, but no Unicode
  text) is a `NotText` (a `ValueError`): it can be neither hashed as canonical JSON,
  written back out as UTF-8 nor printed, so every reader refuses it where it parses it.
  Only text with a `\\u` escape of a surrogate (or, in a `str`, a raw one) can hold one:
  only such text is walked. Read with `text_only=False`, by name only: dlm-git's own
  parent-child protocol and stat records, whose paths carry non-UTF-8 file names as
  `surrogateescape` does, and a base's own JSON files, read as transformers reads them
  (hashed as bytes, shown through `repr`).
- YAML is only ever built by a safe loader (plain data, no tags that run code); with
  `unique_keys` a mapping holding a key twice is an error (last-wins would silently drop
  the first value).
- Compiled Python bytecode (a `.pyc`'s body) is read here too (`load_bytecode`), only
  for `self-verify --installed` comparing an installed package's caches with the code
  compiled from its verified sources: the interpreter's own import reads those files with
  the same `marshal.loads`, so this exposes nothing import would not; the caller bounds
  the size, and every error `marshal` raises is a `ValueError`.
- Errors are the parsers' own types (`yaml.YAMLError`, `ValueError`, of which
  `DuplicateKey` is one), so every caller's existing handling of unparseable input covers
  them. `dig` never raises. Imports nothing of dlm-git and nothing heavy (the hooks).
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from typing import Any, Protocol, TypeVar, overload

import yaml

T = TypeVar("T")

MAX_DEPTH = 64
MAX_NODES = 1_000_000
"""Nodes a YAML text may expand to through its aliases: a loader shares an aliased
object, but any walk of the result (a comparison, a repr) visits every expansion."""
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when available
_PARSER: Any = getattr(getattr(yaml, "cyaml", None), "CParser", None)  # not in yaml's namespace
_OPENERS = "[{-?:"


class Unbounded(yaml.MarkedYAMLError):  # type: ignore[misc]
    """YAML past a bound every reader refuses (`TooDeep`, `TooLarge`)."""


class TooDeep(Unbounded):
    """YAML nested deeper than `MAX_DEPTH` levels."""


class TooLarge(Unbounded):
    """YAML whose aliases expand it past `MAX_NODES` nodes (a "billion laughs" text)."""


def check_yaml_bounds(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise `TooDeep` (a `yaml.YAMLError`, with the line of the first level too deep)
    when `text` nests collections deeper than `limit`, and `TooLarge` when its aliases
    expand it past `MAX_NODES` nodes; a YAML syntax error found on the way is raised as
    itself."""
    if sum(text.count(c) for c in _OPENERS) <= limit and "*" not in text:
        return
    parser = _PARSER(text) if _PARSER is not None else yaml.SafeLoader(text)
    try:
        _walk_events(parser, limit)
    finally:
        parser.dispose()


def _walk_events(parser: Any, limit: int) -> None:
    """The event pass of `check_yaml_bounds`: each open collection's expanded node count
    (an alias counts the nodes of what it names), and its anchor."""
    open_: list[list[Any]] = [[None, 0]]  # [anchor, nodes] per open collection
    sizes: dict[str, int] = {}
    while parser.check_event():
        event = parser.get_event()
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(open_) > limit:
                raise TooDeep(
                    problem=f"nested deeper than {limit} levels", problem_mark=event.start_mark
                )
            open_.append([event.anchor, 1])
            continue
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, nodes = open_.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, nodes = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            if any(event.anchor == inside for inside, _ in open_):
                raise TooLarge(
                    problem="an alias names a collection it is inside of (endless)",
                    problem_mark=event.start_mark,
                )
            anchor, nodes = None, sizes.get(event.anchor, 1)
        else:
            continue
        if anchor is not None:
            sizes[anchor] = nodes
        open_[-1][1] += nodes
        if open_[-1][1] > MAX_NODES:
            raise TooLarge(
                problem=f"aliases expand it past {MAX_NODES} nodes", problem_mark=event.start_mark
            )


class _Loader(LOADER):  # type: ignore[misc]
    """The safe loader (libyaml's parser when available: several times faster), where a
    scalar it cannot build is a `ConstructorError` at the scalar's mark, never the bare
    exception PyYAML lets through (`2024-02-30` a `ValueError`, `!!bool maybe` a
    `KeyError`, a long sexagesimal an `OverflowError`), and an integer with more decimal
    digits than Python turns into text (`sys.get_int_max_str_digits`: 4300, in any base
    it is written in) is refused, since every message, dump or record that shows it would
    fail."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, KeyError, OverflowError, TypeError, IndexError) as exc:
            kind = str(node.tag).rsplit(":", 1)[-1]
            reason = str(exc).split(":")[0].split(";")[0].strip("'\" ")
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {kind} ({reason})", node.start_mark
            ) from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        limit = sys.get_int_max_str_digits()
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:  # as decimal text: past the limit, or no integer at all
            if not limit or sum(c.isdigit() for c in str(node.value)) <= limit:
                raise
            value = _ten_to(limit)
        if limit and abs(value) >= _ten_to(limit):
            raise yaml.constructor.ConstructorError(
                None, None, f"integer of more than {limit} digits", node.start_mark
            )
        return value


@functools.cache
def _ten_to(digits: int) -> int:
    power: int = 10**digits
    return power


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


class _UniqueKeyLoader(_Loader):
    """The safe loader, refusing a mapping with the same key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def load_yaml(text: str, *, unique_keys: bool = False) -> Any:
    """The YAML document `text` as plain data (a safe loader), after `check_yaml_bounds`.
    `unique_keys`: a mapping with a key twice is a `yaml.YAMLError` (with its mark)."""
    check_yaml_bounds(text)
    loader = _UniqueKeyLoader if unique_keys else _Loader
    return yaml.load(text, Loader=loader)  # noqa: S506 (safe loaders only)


def compose_yaml(text: str) -> yaml.Node | None:
    """The node tree of the YAML document `text` (marks for locating a key), after
    `check_yaml_bounds`."""
    check_yaml_bounds(text)
    node: yaml.Node | None = yaml.compose(text, Loader=LOADER)
    return node


class RoundTrip(Protocol):
    """A YAML reader that keeps comments and layout (ruamel's `YAML()`)."""

    def load(self, stream: str) -> Any: ...


def load_yaml_with(reader: RoundTrip, text: str) -> Any:
    """`reader.load(text)` after `check_yaml_bounds`: for a file dlm-git edits in place
    (ruamel's round trip), bounded as every other YAML read is."""
    check_yaml_bounds(text)
    return reader.load(text)


class DuplicateKey(ValueError):
    """A JSON object holds the same key twice (`load_json(..., unique_keys=True)`)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


class NotText(ValueError):
    """A JSON string or key holding a lone UTF-16 surrogate."""


def load_json(
    data: str | bytes, *, finite: bool = False, unique_keys: bool = False, text_only: bool = True
) -> Any:
    """`json.loads`, with nesting too deep for the parser a `ValueError`. `finite`: NaN,
    Infinity and numbers that overflow to infinity are a `ValueError` too (not JSON, and
    nothing that holds them can be written back out as JSON). `unique_keys`: an object
    with a key twice is a `DuplicateKey` (a `ValueError`). `text_only=False`: strings
    may hold lone surrogates (`NotText` otherwise): only for dlm-git's own parent-child
    protocol, whose paths carry undecodable file-name bytes as `surrogateescape` does."""
    extra: dict[str, Any] = {"parse_constant": _not_json, "parse_float": _finite} if finite else {}
    if unique_keys:
        extra["object_pairs_hook"] = _unique
    try:
        value = json.loads(data, **extra)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if text_only and _may_hold_a_surrogate(data):
        _refuse_lone_surrogates(value)
    return value


def _may_hold_a_surrogate(data: str | bytes) -> bool:
    if isinstance(data, str):
        return _SURROGATE_ESCAPE.search(data) is not None
    return _SURROGATE_ESCAPE_B.search(data) is not None


_SURROGATE_ESCAPE = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE_ESCAPE_B = re.compile(rb"\\u[dD][89a-fA-F]")
"""A `\\u` escape of a UTF-16 surrogate: the only way JSON bytes hold one (text decoded
with `surrogateescape` can hold one raw, which the text pattern finds too)."""


def _refuse_lone_surrogates(value: Any) -> None:
    """`ValueError` where a string or key of `value` holds a surrogate no pair completed
    (iterative: as deep as the parser allowed)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _SURROGATE.search(item):
            raise NotText(f"a string holds a lone UTF-16 surrogate: {ascii(item)[:40]}")


_SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate left in a decoded string: one no pair completed (JSON's decoder joins a
pair into its code point), which UTF-8 cannot encode."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def load_bytecode(data: bytes) -> object:
    """The object `marshal` reads from a `.pyc`'s body (see the module invariants);
    `ValueError` for what does not load."""
    import marshal

    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:
        raise ValueError(f"not loadable bytecode: {exc}") from None


@overload
def dig(obj: object, *keys: str | int) -> object: ...
@overload
def dig(obj: object, *keys: str | int, kind: type[T]) -> T | None: ...
def dig(obj: object, *keys: str | int, kind: type[Any] = object) -> Any:
    """`obj[k1][k2]...` where every level is a dict (a `str` key) or a list (an `int`
    index, negative counting from the end), else None; with `kind`, None too unless the
    value found is one (`bool` is not an `int` here). Never raises: for parsed hostile
    data, whatever its shape."""
    for key in keys:
        if isinstance(key, str) and isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(key, int) and not isinstance(key, bool) and isinstance(obj, list):
            if not -len(obj) <= key < len(obj):
                return None
            obj = obj[key]
        else:
            return None
    if isinstance(obj, bool) and kind is int:
        return None
    return obj if isinstance(obj, kind) else None


def _not_json(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a float")
    return value
