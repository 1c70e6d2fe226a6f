"""The byte-exact encodings records are hashed in (`dlm_git.hashing`): sha256 known answers,
canonical JSON (key order, one trailing newline, no NaN), and floats as exact hex."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from dlm_git.hashing import (
    canonical_json,
    canonical_json_sha256,
    float_from_hex,
    float_hex,
    sha256_bytes,
    sha256_file,
    sha256_text,
)
from tests.support.tensorfiles import write

# --------------------------------------------------------------------------- plain digests

ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_sha256_known_answer(tmp_path: Path) -> None:
    assert sha256_bytes(b"abc") == ABC_SHA256
    assert sha256_text("abc") == ABC_SHA256
    assert sha256_file(write(tmp_path / "abc", b"abc")) == ABC_SHA256
    assert sha256_bytes(b"") == hashlib.sha256(b"").hexdigest()


def test_sha256_text_is_utf8() -> None:
    assert sha256_text("größe ✓") == sha256_bytes("größe ✓".encode())


# --------------------------------------------------------------------------- canonical JSON


def test_canonical_json_exact_bytes() -> None:
    assert canonical_json({"b": 1, "a": [1, 2.5]}) == (
        b'{\n  "a": [\n    1,\n    2.5\n  ],\n  "b": 1\n}\n'
    )


def test_canonical_json_key_order_independent() -> None:
    a = {"z": 1, "a": {"y": 2, "b": 3}, "m": [3, 1]}
    b = {"m": [3, 1], "a": {"b": 3, "y": 2}, "z": 1}
    assert canonical_json(a) == canonical_json(b)
    assert canonical_json_sha256(a) == canonical_json_sha256(b)
    assert canonical_json_sha256(a) == hashlib.sha256(canonical_json(a)).hexdigest()


def test_canonical_json_single_trailing_newline() -> None:
    objs: list[object] = [{}, [], "x", {"a": "line\n"}]
    for obj in objs:
        out = canonical_json(obj)
        assert out.endswith(b"\n")
        assert not out.endswith(b"\n\n")


def test_canonical_json_keeps_non_ascii() -> None:
    out = canonical_json({"name": "Größe ✓ 日本"})
    assert "Größe ✓ 日本".encode() in out
    assert b"\\u" not in out
    assert json.loads(out.decode("utf-8")) == {"name": "Größe ✓ 日本"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_json_rejects_nan_and_inf(bad: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": bad})
    with pytest.raises(ValueError):
        canonical_json_sha256([bad])


# --------------------------------------------------------------------------- floats


@pytest.mark.parametrize(
    "x", [0.1, -0.0, 1e-310, 3.141592653589793, 2.0**-1074, 1.7976931348623157e308]
)
def test_float_hex_round_trips_exactly(x: float) -> None:
    s = float_hex(x)
    assert s == float.hex(x)
    back = float_from_hex(s)
    assert back == x
    assert math.copysign(1.0, back) == math.copysign(1.0, x)


def test_float_hex_distinguishes_nearby_floats() -> None:
    assert float_hex(0.1) != float_hex(math.nextafter(0.1, 1.0))
    assert float_hex(0.1) == "0x1.999999999999ap-4"


def test_float_hex_ints_and_bad_input() -> None:
    assert float_hex(3) == float.hex(3.0)
    with pytest.raises(ValueError):
        float_hex(2**53 + 1)
    with pytest.raises(TypeError):
        float_hex(True)
    with pytest.raises(TypeError):
        float_hex("0.1")  # type: ignore[arg-type]
