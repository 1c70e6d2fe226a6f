"""Numbers in `dlm_git.validated` judged exactly as pydantic 2.14 (pydantic-core 2.50) judged
them in lax mode: for every input here, an `int`, `float` or `bool` field accepts the same
value of the same type, or refuses it with the same error type and message, as
`TypeAdapter(int|float|bool)`; and a record with bounded fields gives the same errors as a
pydantic model with the same fields and config.

The inputs: many thousands of strings drawn with a fixed seed from the pieces that matter
to pydantic-core's text rule (digits, `_`, `.`, `e`/`E`, signs, Unicode blanks and the
separators \\x1c-\\x1f that are none, `inf`/`nan`/`infinity` in several cases, leading zeros,
non-ASCII digits), digit runs around the 4300-digit bound with things before and after
them, an adversarial review's strings, and floats and ints around +-2**63 and 2**53."""

from __future__ import annotations

import math
import random
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticError

from dlm_git.validated import Bounds, Finite, Record, ValidationError

PIECES = [
    *"0123456789", "0", "0", "1", "00", "_", "_", "__", ".", ".", "e", "E", "+", "-", "-",
    " ", " ", "\t", "\n", "\x0b", "\xa0", "\u2003", "\u3000", "\x85", "\u2028", "\u180e",
    "\u200b", "\x1c", "\x1d", "\x1e", "\x1f", "inf", "nan", "infinity", "Inf", "NaN",
    "INFINITY", "iNf", "nAn", "x", "\u0663", "\uff18", "0x", "yes", "on", "t", "F",
]  # fmt: skip
"""What a number in text is made of, and its near misses."""

REVIEWED = [
    "1_0", " 1_0", "1_0 ", "\t1_0", "1_0\n", " 1.5 ", " 1e3", " 1_0.5", "1_0.5 ", " inf",
    "inf ", " nan", " 1", " -1_0", "\u00a01_0", " 0x1", " 1_0e1_0", "1_0e1_0", " 1.", " .5",
    " +.5e-1_0", "\t07_27", " 6_2.", " 96_36", "4_5 ", "1_761\t", "9E_8", "6_.", "3_e71",
    ".83_e3", "6E_6", "8_e+1", "2e_-2", "0_.", "9_.", "65_E8", "89_e8", "0__8", "00__8",
    "0-8", "00-8", "00-15", "+00-35", "0_0-17", "+0-_5", "+0-3_8", "0-7 ", "-0-8", "1__0",
    "10__0", "0_8", "0__0", "0_.0", "00.0", "0_0.00", "-00.0", "+-1", "-+1", "--1", "+",
    "-", "", "_", ".", "0.", "-0", "+0", "3.00", "3.0_0", "3_0.0", "1e3", "1E+03",
]  # fmt: skip
"""Strings an adversarial review found judged differently (and their neighbours)."""


def drawn(count: int, seed: int) -> list[str]:
    """`count` strings of 1 to 8 pieces, drawn with `seed`."""
    rng = random.Random(seed)
    return ["".join(rng.choices(PIECES, k=rng.randint(1, 8))) for _ in range(count)]


def long_runs() -> list[str]:
    """Digit runs of 4298 to 4302 digits, with a start and an end that each reading of
    pydantic-core treats differently."""
    rng = random.Random(7)
    starts = ["", "-", "+", " ", "0", "00", "-0", "1_", "0_"]
    ends = ["", ".0", ".00", ".5", "_1", " ", "e5", "x"]
    runs = []
    for digits in range(4298, 4303):
        run = str(rng.randint(1, 9)) + "".join(rng.choices("0123456789", k=digits - 1))
        runs += [start + run + end for start in starts for end in ends]
    return runs


def edges() -> list[Any]:
    """Floats and ints on either side of +-2**63 and +-2**53, and the text they print as."""
    values: list[Any] = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan]
    for bound in (2.0**63, 2.0**53, 2.0**64):
        for signed in (bound, -bound):
            values += [signed, math.nextafter(signed, 0), math.nextafter(signed, 2 * signed)]
            values += [int(signed) + step for step in (-1, 0, 1)]
    values += [10**400, -(10**400), True, False]
    return values + [repr(v) for v in values if not isinstance(v, bool)]


class Scalars(Record):
    i: int | None = None
    f: float | None = None
    b: bool | None = None


class Bounded(Record):
    n: Annotated[int, Bounds(ge=0)] = 1
    x: Annotated[float, Finite(), Bounds(gt=0)] = 1.0
    b: bool = False


class BoundedModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    n: Annotated[int, Field(ge=0)] = 1
    x: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    b: bool = False


ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "i": TypeAdapter(int),
    "f": TypeAdapter(float),
    "b": TypeAdapter(bool),
}


def shown(value: Any) -> str:
    """A value as compared: its type and repr (NaN equal to NaN, 1 unequal to 1.0)."""
    return f"{type(value).__name__} {value!r}"


def pydantic_scalar(field: str, value: Any) -> tuple[object, ...]:
    try:
        return ("ok", shown(ADAPTERS[field].validate_python(value)))
    except PydanticError as exc:
        return tuple((e["type"], e["msg"]) for e in exc.errors())


def new_scalar(field: str, value: Any) -> tuple[object, ...]:
    try:
        return ("ok", shown(getattr(Scalars(**{field: value}), field)))
    except ValidationError as exc:
        return tuple((p.kind, p.message) for p in exc.problems)


def differences(values: list[Any]) -> list[str]:
    """Each (field, value) that the new checks judge otherwise than pydantic."""
    found = []
    for value in values:
        for field in ("i", "f", "b"):
            expected, got = pydantic_scalar(field, value), new_scalar(field, value)
            if got != expected:
                found.append(f"{field} {value!r}: pydantic {expected} new {got}")
    return found


def assert_same(values: list[Any]) -> None:
    found = differences(values)
    assert not found, f"{len(found)} of {3 * len(values)} differ:\n" + "\n".join(found[:30])


def test_drawn_strings_are_read_as_pydantic_read_them() -> None:
    strings = drawn(30_000, seed=2026)
    assert len(set(strings)) > 20_000
    assert_same(strings)


def test_drawn_bytes_are_read_as_pydantic_read_them() -> None:
    assert_same([text.encode() for text in drawn(2_000, seed=37) + REVIEWED])


def test_reviewed_strings_are_read_as_pydantic_read_them() -> None:
    assert_same(REVIEWED)


def test_digit_runs_around_4300_are_read_as_pydantic_read_them() -> None:
    assert_same(long_runs())


def test_numbers_around_two_to_the_63_and_53_are_taken_as_pydantic_took_them() -> None:
    assert_same(edges())


def test_a_bounded_record_refuses_as_the_pydantic_model_did() -> None:
    """Every error of a record (loc, type, message, order) for a value put in all three
    fields at once, against the model the records replaced."""
    found = []
    for value in REVIEWED + drawn(3_000, seed=5) + edges():
        data = {"n": value, "x": value, "b": value}
        try:
            BoundedModel(**data)
            expected: object = "ok"
        except PydanticError as exc:
            expected = [(e["loc"], e["type"], e["msg"]) for e in exc.errors()]
        try:
            Bounded(**data)
            got: object = "ok"
        except ValidationError as exc:
            got = [(p.loc, p.kind, p.message) for p in exc.problems]
        if got != expected:
            found.append(f"{value!r}: pydantic {expected} new {got}")
    assert not found, f"{len(found)} differ:\n" + "\n".join(found[:30])
