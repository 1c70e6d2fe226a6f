"""Frozen records validated from plain data (YAML, JSON, keywords): what the document, lock
and manifest schemas are built on, in place of pydantic.

Invariants:
- A value is judged exactly as pydantic v2 (2.14) judged it in lax mode with the schemas'
  configs (frozen, unknown keys forbidden, no validation of defaults): the same values
  accepted, the same normal forms (`"16"` -> 16, `3.0` -> 3, `"2e-4"` -> 0.0002, a list
  -> a tuple, `"yes"` -> True), the same errors with pydantic's locations, types and
  messages, in its order (each field in declaration order, then unknown keys in input
  order). tests/golden/models holds what pydantic gave, tests/unit/test_models_golden.py
  replays it. One function per kind of value (`_int`, `_float`, `_str`, ...); numbers in
  text are read by `parse_int` / `parse_float`, which the command line uses too
  (tests/unit/test_validated_numbers.py: against pydantic itself). One exception: a value
  of kind `Any` nested deeper than `MAX_ANY_DEPTH` is refused (pydantic took it, and its
  dump then failed).
- Defining a record costs a walk over its class dict: its annotations (strings, under
  `from __future__ import annotations`) are evaluated into checks on its first
  validation, once per class.
- A union of two kinds takes the first that accepts: pydantic's smart mode chose the same
  for the unions here (`Literal["auto"] | tuple[str, ...]`), where no input fits both.
"""

from __future__ import annotations

import math
import re
import sys
import types
import typing
from collections import deque
from collections.abc import Callable, Iterator, KeysView, ValuesView
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, NoReturn, Self, TypeVar, Union

from dlm_git.bounds import MAX_ANY_DEPTH as MAX_ANY_DEPTH
from dlm_git.bounds import nested_deeper

# --- numbers in text (the one rule, shared with `dlm_git.clidecl`) --------------------------
#
# pydantic-core 2.50's rule (pydantic-core/src/input/shared.rs: `str_as_int`, `clean_int_str`,
# `strip_leading_zeros`, `strip_underscores`, `str_as_float`): the text is read as it is, and
# if that fails, once more cleaned. Blanks are those of Rust's `str::trim` (`BLANKS`).

BLANKS = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""The blanks pydantic strips around a number (Unicode White_Space): not the separators
\\x1c-\\x1f, which `str.strip` and `float` would also take for blanks."""
INT_MAX_DIGITS = 4300
"""The most digits an integer in text may have (jiter's bound, CPython's default
`sys.get_int_max_str_digits`)."""
_JSON_INT = re.compile(rf"-?(?:0|[1-9][0-9]{{0,{INT_MAX_DIGITS - 1}}})")
"""An integer as jiter reads one (`NumberInt::try_from`): what either reading must be."""
_TOO_LONG = re.compile(rf"-?[1-9][0-9]{{{INT_MAX_DIGITS}}}")
"""Text whose first reading jiter stops as out of range, whatever follows the digits."""
_RUST_FLOAT = re.compile(
    r"[+-]?(?:(?i:inf|infinity|nan)|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
"""Rust's `f64::from_str` syntax: ASCII digits, no blanks, no `_` (one way to match each
text, so a long run of digits costs linear time)."""
INT_PARSING = "Input should be a valid integer, unable to parse string as an integer"
INT_PARSING_SIZE = "Unable to parse input string as an integer, exceeded maximum size"
FLOAT_PARSING = "Input should be a valid number, unable to parse string as a number"
BOOL_PARSING = "Input should be a valid boolean, unable to interpret input"


class NumberError(ValueError):
    """Text that is not a number of the kind asked; `kind` is pydantic's error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def parse_int(text: str) -> int:
    """An integer as pydantic read one from text: the text as jiter's integer (more than
    `INT_MAX_DIGITS` digits: `int_parsing_size`), else `_cleaned_int` of it as one;
    `NumberError` otherwise."""
    if _TOO_LONG.match(text):
        raise NumberError("int_parsing_size", INT_PARSING_SIZE)
    for reading in (text, _cleaned_int(text)):
        if reading is not None and _JSON_INT.fullmatch(reading):
            return int(reading)
    raise NumberError("int_parsing", INT_PARSING)


def _cleaned_int(text: str) -> str | None:
    """`clean_int_str`: blanks, a `+`, leading zeros (`_` among them), a fraction of zeros
    and `_` between digits taken away, the `-` kept; None where nothing was taken away or
    the text cannot be an integer (`+-`, `--`, `-+`, a leading `.` or `_` ...)."""
    s = text.strip(BLANKS)
    if s.startswith("+"):
        if s.startswith("+-"):
            return None
        s = s[1:]
    sign = ""
    if s.startswith("-"):
        if s[1:2] in ("-", "+"):
            return None
        sign, s = "-", s[1:]
    rest = _without_leading_zeros(s)
    if rest is None:
        return None
    whole, dot, fraction = rest.partition(".")
    if dot and fraction and fraction.strip("0") == "":
        rest = whole
    joined = _without_underscores(rest)
    if joined is not None:
        return sign + joined
    return None if len(rest) == len(text) else sign + rest


def _without_leading_zeros(s: str) -> str | None:
    """`strip_leading_zeros`: `0_00` -> `0`, `00.0` -> `0.0`, `007` -> `7`, `0-8` -> `-8`;
    text starting with `1`-`9` or `-` as it is; None for any other start."""
    if s[:1] and s[0] in "123456789-":
        return s
    if not s.startswith("0"):
        return None
    for i, c in enumerate(s):
        if c in "123456789-":
            return s[i:]
        if c == ".":
            return s[i - 1 :]
        if c not in "0_":
            return None
    return s[-1]


def _without_underscores(s: str) -> str | None:
    """`strip_underscores`: `s` without its `_`, where it has some, none at either end and
    never two together; None otherwise."""
    if "_" not in s or "__" in s or s.startswith("_") or s.endswith("_"):
        return None
    return s.replace("_", "")


def parse_float(text: str) -> float:
    """A number as pydantic read one from text: Rust's float syntax (`2e-4`, `6.`, `.5`,
    `inf`, `NaN`) with blanks around it, else the text (blanks not taken away) with
    `_` between characters taken away (`1_000.5`, `9E_8`); `NumberError` otherwise."""
    for reading in (text.strip(BLANKS), _without_underscores(text)):
        if reading is not None and _RUST_FLOAT.fullmatch(reading):
            return float(reading)
    raise NumberError("float_parsing", FLOAT_PARSING)


# --- problems ------------------------------------------------------------------------------

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One reason a value was refused: where (keys and indexes from the record's top),
    pydantic's error type for it (`kind`: "missing", "extra_forbidden", "int_parsing",
    ...) and its message."""

    loc: Loc
    kind: str
    message: str


MISSING = "missing"
EXTRA = "extra_forbidden"


class ValidationError(ValueError):
    """A record refused: every problem found, in pydantic's order."""

    def __init__(self, title: str, problems: list[Problem]) -> None:
        self.title, self.problems = title, tuple(problems)
        count = len(problems)
        super().__init__(f"{count} validation error{'s' if count > 1 else ''} for {title}")


class _Refused(Exception):
    """Inside validation: the problems of one value, located from that value."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems


def _refuse(kind: str, message: str) -> NoReturn:
    raise _Refused([Problem((), kind, message)])


def _under(key: str | int, problems: list[Problem]) -> list[Problem]:
    return [Problem((key, *p.loc), p.kind, p.message) for p in problems]


# --- what an annotation may carry besides its type -------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """`gt`/`ge`/`lt`/`le` on a number (pydantic's `Field(gt=...)`)."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def check(self, value: Any) -> Any:
        if self.gt is not None and not value > self.gt:
            _refuse("greater_than", f"Input should be greater than {self.gt}")
        if self.ge is not None and not value >= self.ge:
            _refuse("greater_than_equal", f"Input should be greater than or equal to {self.ge}")
        if self.lt is not None and not value < self.lt:
            _refuse("less_than", f"Input should be less than {self.lt}")
        if self.le is not None and not value <= self.le:
            _refuse("less_than_equal", f"Input should be less than or equal to {self.le}")
        return value


@dataclass(frozen=True)
class MinLength:
    """The fewest characters a string may have (pydantic's `Field(min_length=...)`)."""

    least: int

    def check(self, value: str) -> str:
        if len(value) < self.least:
            plural = "" if self.least == 1 else "s"
            _refuse(
                "string_too_short",
                f"String should have at least {self.least} character{plural}",
            )
        return value


@dataclass(frozen=True)
class Finite:
    """No infinity or NaN in a number (pydantic's `allow_inf_nan=False`)."""

    def check(self, value: float) -> float:
        if not math.isfinite(value):
            _refuse("finite_number", "Input should be a finite number")
        return value


@dataclass(frozen=True)
class Before:
    """A function the raw value goes through first; its `ValueError` refuses the value
    (pydantic's `BeforeValidator`, its message after "Value error, ")."""

    function: Callable[[Any], Any]


@dataclass(frozen=True)
class After:
    """A function the checked value goes through last (pydantic's `field_validator`)."""

    function: Callable[[Any], Any]


# --- the kinds of values ----------------------------------------------------------------------

T = TypeVar("T")
Check = Callable[[Any], Any]
_I64 = range(-(2**63), 2**63)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_SEQUENCES = (list, tuple, set, frozenset, deque, KeysView, ValuesView, Iterator)


def _text_of(value: bytes, kind: str, message: str) -> str:
    """Bytes read as text (pydantic took UTF-8 bytes for text); refused as `kind` if not."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        _refuse(kind, message)


def _in_i64(whole: float) -> bool:
    """A whole float that pydantic turned into an int (`float_as_int`): strictly between
    the float values of i64's bounds, so neither -2**63 nor 2**63."""
    return -(2.0**63) < whole < 2.0**63


def _int(value: Any) -> int:
    """An int; a bool as 0/1; a float without a fraction; text by `parse_int`."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            _refuse("finite_number", "Input should be a finite number")
        if not value.is_integer():
            _refuse(
                "int_from_float",
                "Input should be a valid integer, got a number with a fractional part",
            )
        if not _in_i64(value):
            _refuse("int_parsing_size", INT_PARSING_SIZE)
        return int(value)
    if isinstance(value, bytes | str):
        return _from_text(value, parse_int, "int_parsing", INT_PARSING)
    _refuse("int_type", "Input should be a valid integer")


def _float(value: Any) -> float:
    """A float; an int (a bool too) that a float holds; text by `parse_float`."""
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            pass
    elif isinstance(value, bytes | str):
        return _from_text(value, parse_float, "float_parsing", FLOAT_PARSING)
    _refuse("float_type", "Input should be a valid number")


def _from_text(value: bytes | str, parse: Callable[[str], T], kind: str, message: str) -> T:
    """A number in text (UTF-8 bytes too) read by `parse`; refused as `kind` where the
    bytes are no text, as `parse`'s `NumberError` says otherwise."""
    text = _text_of(value, kind, message) if isinstance(value, bytes) else value
    try:
        return parse(text)
    except NumberError as exc:
        _refuse(exc.kind, exc.message)


def _str(value: Any) -> str:
    """Text, or UTF-8 bytes; never a number."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return _text_of(
            bytes(value),
            "string_unicode",
            "Input should be a valid string, unable to parse raw data as a unicode string",
        )
    _refuse("string_type", "Input should be a valid string")


def _bool(value: Any) -> bool:
    """A bool; 0 and 1 (int or float); "yes"/"no", "on"/"off", "t"/"f" ... in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer() and _in_i64(value):
        value = int(value)
    elif isinstance(value, bytes):
        value = _text_of(value, "bool_parsing", BOOL_PARSING)
    if isinstance(value, int) and value in _I64:
        if value in (0, 1):
            return value == 1
        _refuse("bool_parsing", BOOL_PARSING)
    if isinstance(value, str):
        if value.lower() in _TRUE or value.lower() in _FALSE:
            return value.lower() in _TRUE
        _refuse("bool_parsing", BOOL_PARSING)
    _refuse("bool_type", "Input should be a valid boolean")


def _any(value: Any) -> Any:
    """Any value, at most `MAX_ANY_DEPTH` lists/dicts deep (`bounds.nested_deeper`)."""
    if nested_deeper(value):
        _refuse("too_deep", f"Input should be nested at most {MAX_ANY_DEPTH} levels deep")
    return value


SCALARS: dict[Any, Check] = {int: _int, float: _float, str: _str, bool: _bool, Any: _any}


def _literal(choices: tuple[Any, ...]) -> Check:
    shown = [repr(c) for c in choices]
    expected = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
    message = f"Input should be {expected}"
    ints = any(type(c) is int for c in choices)

    def check(value: Any) -> Any:
        """One of `choices`; where one is an int, a bool or a float may stand for it."""
        key = value
        if ints and isinstance(value, float) and value.is_integer():
            key = int(value)
        elif ints and isinstance(value, int):
            key = int(value)
            if key not in _I64:
                _refuse("int_parsing_size", INT_PARSING_SIZE)
        for choice in choices:
            if type(choice) is type(key) and choice == key:
                return choice
        _refuse("literal_error", message)

    return check


def _items(of: Check, kind: type[Any], name: str) -> Check:
    def check(value: Any) -> Any:
        if not isinstance(value, _SEQUENCES) or isinstance(value, str | bytes | bytearray):
            _refuse(f"{name}_type", f"Input should be a valid {name}")
        out, problems = [], []
        for index, item in enumerate(value):
            try:
                out.append(of(item))
            except _Refused as exc:
                problems += _under(index, exc.problems)
        if problems:
            raise _Refused(problems)
        return kind(out)

    return check


def _mapping(of: Check) -> Check:
    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            _refuse("dict_type", "Input should be a valid dictionary")
        out, problems = {}, []
        for key, item in value.items():
            try:
                name = _str(key)
            except _Refused as exc:
                problems += _under(key, _under("[key]", exc.problems))
                name = key
            try:
                out[name] = of(item)
            except _Refused as exc:
                problems += _under(key, exc.problems)
        if problems:
            raise _Refused(problems)
        return out

    return check


def _nullable(of: Check) -> Check:
    def check(value: Any) -> Any:
        return None if value is None else of(value)

    return check


def _union(arms: list[tuple[str, Check]]) -> Check:
    def check(value: Any) -> Any:
        problems: list[Problem] = []
        for label, arm in arms:
            try:
                return arm(value)
            except _Refused as exc:
                problems += _under(label, exc.problems)
        raise _Refused(problems)

    return check


def _record(kind: type[Record]) -> Check:
    def check(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if not isinstance(value, dict):
            _refuse(
                "model_type", f"Input should be a valid dictionary or instance of {kind.__name__}"
            )
        return kind._from_fields(kind._checked(value))

    return check


def _annotated(inner: Check, extras: tuple[Any, ...]) -> Check:
    check = inner
    for extra in extras:
        check = _with(check, extra)
    return check


def _with(inner: Check, extra: Any) -> Check:
    if isinstance(extra, Before):

        def before(value: Any) -> Any:
            return inner(_valued(extra.function, value))

        return before
    if isinstance(extra, After):

        def after(value: Any) -> Any:
            return _valued(extra.function, inner(value))

        return after

    def constrained(value: Any) -> Any:
        return extra.check(inner(value))

    return constrained


def _valued(function: Callable[[Any], Any], value: Any) -> Any:
    try:
        return function(value)
    except ValueError as exc:
        _refuse("value_error", f"Value error, {exc}")


def label(tp: Any) -> str:
    """pydantic's name for a kind in a union's error locations (`tuple[str, ...]`)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return f"literal[{','.join(repr(a) for a in args)}]"
    if origin is tuple:
        return f"tuple[{label(args[0])}, ...]"
    if origin in (list, dict):
        return f"{origin.__name__}[{','.join(label(a) for a in args)}]"
    if origin is Annotated:
        return label(args[0])
    return tp.__name__ if isinstance(tp, type) else str(tp)


def compile_check(tp: Any) -> Check:
    """The check of an annotation (a type, `Annotated[...]`, `X | None`, containers)."""
    if tp in SCALARS:
        return SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, Record):
        return _record(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return _annotated(compile_check(args[0]), tp.__metadata__)
    if origin is Literal:
        return _literal(args)
    if origin in (Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        one = (
            compile_check(arms[0])
            if len(arms) == 1
            else _union([(label(a), compile_check(a)) for a in arms])
        )
        return _nullable(one) if len(arms) < len(args) else one
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _items(compile_check(args[0]), tuple, "tuple")
    if origin is list:
        return _items(compile_check(args[0]), list, "list")
    if origin is dict and args[0] is str:
        return _mapping(compile_check(args[1]))
    raise TypeError(f"no check for {tp!r}")


# --- records --------------------------------------------------------------------------------

_NO_DEFAULT: Any = object()


@typing.dataclass_transform(kw_only_default=True, frozen_default=True)
class Record:
    """A frozen record: keyword construction validates (`ValidationError`), unknown keys
    are refused, defaults are taken as written. Equal when of one class with equal
    fields; hashable when its fields are."""

    model_fields: ClassVar[dict[str, Any]] = {}
    """Each field's name and its default (`_NO_DEFAULT`: required), in declaration order."""
    _checks: ClassVar[dict[str, Check] | None] = None
    _floats: ClassVar[frozenset[str]] = frozenset()
    """The fields of kind `float`: their JSON form is a float even where the value is an
    int (a default written `16`), as pydantic serialized them."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.model_fields)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if not str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                fields[name] = cls.__dict__.get(name, _NO_DEFAULT)
        cls.model_fields = fields
        cls._checks = None

    def __init__(self, **data: Any) -> None:
        try:
            checked = type(self)._checked(data)
        except _Refused as exc:
            raise ValidationError(type(self).__name__, exc.problems) from None
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    # --- validation

    @classmethod
    def _compiled(cls) -> dict[str, Check]:
        if cls._checks is None:
            annotations = cls._annotations()
            cls._floats = frozenset(n for n, tp in annotations.items() if _is_float(tp))
            cls._checks = {name: compile_check(tp) for name, tp in annotations.items()}
        return cls._checks

    @classmethod
    def _annotations(cls) -> dict[str, Any]:
        """Each field's annotation, evaluated in its class's module (the names a schema
        module imports or defines: `Annotated`, `Int`, its other records)."""
        found: dict[str, Any] = {}
        for klass in reversed(cls.__mro__[: cls.__mro__.index(Record)]):
            names = vars(sys.modules[klass.__module__])
            for name, annotation in klass.__dict__.get("__annotations__", {}).items():
                if name in cls.model_fields:
                    text = isinstance(annotation, str)
                    found[name] = eval(annotation, names) if text else annotation  # noqa: S307
        return found

    @classmethod
    def _checked(cls, data: dict[Any, Any]) -> dict[str, Any]:
        """Each field's value from `data` (checked, or its default); `_Refused` with
        every problem found otherwise."""
        values, problems = {}, []
        checks = cls._compiled() if data else {}  # all defaults: nothing to compile
        for name, default in cls.model_fields.items():
            if name in data:
                try:
                    values[name] = checks[name](data[name])
                except _Refused as exc:
                    problems += _under(name, exc.problems)
            elif default is not _NO_DEFAULT:
                values[name] = default
            else:
                problems.append(Problem((name,), MISSING, "Field required"))
        for key in data:
            if not isinstance(key, str):
                problems.append(Problem((key,), "invalid_key", "Keys should be strings"))
            elif key not in cls.model_fields:
                problems.append(Problem((key,), EXTRA, "Extra inputs are not permitted"))
        if problems:
            raise _Refused(problems)
        return values

    @classmethod
    def _from_fields(cls, values: dict[str, Any]) -> Self:
        record = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(record, name, value)
        return record

    @classmethod
    def model_validate(cls, obj: Any) -> Self:
        """`obj` (a mapping of field values, or a record of this class) as a record."""
        try:
            checked: Self = _record(cls)(obj)
        except _Refused as exc:
            raise ValidationError(cls.__name__, exc.problems) from None
        return checked

    # --- reading

    def _fields(self) -> Iterator[tuple[str, Any]]:
        return ((name, self.__dict__[name]) for name in type(self).model_fields)

    def model_dump(
        self, *, mode: str = "python", exclude: set[str] | None = None
    ) -> dict[str, Any]:
        """The fields as plain data: records as dicts; `mode="json"`: as JSON values
        (tuples as lists, NaN and infinities as None)."""
        json = mode == "json"
        floats = type(self)._floats if json and self._compiled() else frozenset()
        data = {
            name: _dumped(float(value) if name in floats and value is not None else value, json)
            for name, value in self._fields()
            if not exclude or name not in exclude
        }
        return self._serialized(data)

    def _serialized(self, data: dict[str, Any]) -> dict[str, Any]:
        """The dump a subclass writes (pydantic's `model_serializer`); as is here."""
        return data

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Self:
        """A copy with `update`'s fields replaced, not validated (pydantic's `model_copy`)."""
        return self._from_fields({**dict(self._fields()), **(update or {})})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), tuple(v for _, v in self._fields())))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self._fields())
        return f"{type(self).__name__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name!r}")


def _is_float(tp: Any) -> bool:
    """`tp` is `float`, maybe `Annotated` or `| None`."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return _is_float(args[0])
    if origin in (Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return len(kinds) == 1 and _is_float(kinds[0])
    return tp is float


def _dumped(value: Any, json: bool) -> Any:
    if isinstance(value, Record):
        return value.model_dump(mode="json" if json else "python")
    if isinstance(value, dict):
        return {k: _dumped(v, json) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_dumped(v, json) for v in value]
        return items if json or isinstance(value, list) else tuple(items)
    if json and isinstance(value, float) and not math.isfinite(value):
        return None
    return value
