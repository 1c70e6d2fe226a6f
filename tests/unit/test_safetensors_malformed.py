"""A safetensors file that is not well formed (header length, JSON, dtypes, shapes,
offsets, metadata) is refused by the header reader and the digest alike, with one
`SafetensorsFormatError` naming the file and what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlm_git.errors import DlmGitError
from dlm_git.hashing import digest_safetensors
from dlm_git.safetensors_header import SafetensorsFormatError, read_safetensors_header
from tests.support.tensorfiles import build_safetensors, write


def _entry(dtype: Any = "U8", shape: Any = None, offsets: Any = None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [4] if shape is None else shape, "data_offsets": offsets}


MALFORMED: list[tuple[str, bytes, str]] = [
    ("empty file", b"", "shorter than the 8-byte"),
    ("seven bytes", b"\x01" * 7, "shorter than the 8-byte"),
    ("header longer than file", build_safetensors(b"{}", length=50), "exceeds the file size"),
    ("header over limit", build_safetensors(b"{}", length=2**63), "exceeds the 100000000-byte"),
    ("header over limit small", build_safetensors(b"{}", length=100_000_001), "100000000-byte"),
    ("not utf-8", build_safetensors(b'{"\xff": 1}'), "not valid UTF-8"),
    ("not json", build_safetensors(b"{not json"), "not valid JSON"),
    ("json list", build_safetensors(b"[1, 2]"), "not an object"),
    ("json string", build_safetensors(b'"x"'), "not an object"),
    (
        "duplicate key",
        build_safetensors(
            b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},'
            b' "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}',
            b"xy",
        ),
        "duplicate key 'a'",
    ),
    ("entry not object", build_safetensors({"a": [1, 2]}), "not an object"),
    (
        "missing dtype",
        build_safetensors({"a": {"shape": [1], "data_offsets": [0, 1]}}, b"x"),
        "missing 'dtype'",
    ),
    (
        "missing shape",
        build_safetensors({"a": {"dtype": "U8", "data_offsets": [0, 1]}}, b"x"),
        "missing 'shape'",
    ),
    (
        "missing data_offsets",
        build_safetensors({"a": {"dtype": "U8", "shape": [1]}}, b"x"),
        "missing 'data_offsets'",
    ),
    ("dtype not str", build_safetensors({"a": _entry(5, None, [0, 4])}, b"abcd"), "dtype must"),
    ("unknown dtype", build_safetensors({"a": _entry("F128", None, [0, 4])}, b"abcd"), "unknown"),
    ("lowercase dtype", build_safetensors({"a": _entry("u8", None, [0, 4])}, b"abcd"), "unknown"),
    ("shape not list", build_safetensors({"a": _entry("U8", "4", [0, 4])}, b"abcd"), "shape must"),
    ("negative dim", build_safetensors({"a": _entry("U8", [-4], [0, 4])}, b"abcd"), "shape must"),
    ("float dim", build_safetensors({"a": _entry("U8", [4.0], [0, 4])}, b"abcd"), "shape must"),
    ("bool dim", build_safetensors({"a": _entry("U8", [True], [0, 1])}, b"a"), "shape must"),
    ("offsets one", build_safetensors({"a": _entry("U8", [4], [4])}, b"abcd"), "data_offsets must"),
    (
        "offsets three",
        build_safetensors({"a": _entry("U8", [4], [0, 4, 4])}, b"abcd"),
        "data_offsets must",
    ),
    (
        "offsets str",
        build_safetensors({"a": _entry("U8", [4], [0, "4"])}, b"abcd"),
        "data_offsets must",
    ),
    (
        "offsets negative",
        build_safetensors({"a": _entry("U8", [4], [-1, 3])}, b"abcd"),
        "data_offsets must",
    ),
    ("end before begin", build_safetensors({"a": _entry("U8", [0], [4, 0])}, b"abcd"), "before"),
    (
        "outside buffer",
        build_safetensors({"a": _entry("U8", [8], [0, 8])}, b"abcd"),
        "not within the data buffer",
    ),
    (
        "length mismatch",
        build_safetensors({"a": _entry("F32", [2], [0, 4])}, b"abcd"),
        "does not match shape",
    ),
    (
        "overlap",
        build_safetensors(
            {"a": _entry("U8", [3], [0, 3]), "b": _entry("U8", [2], [2, 4])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "same range twice",
        build_safetensors(
            {"a": _entry("U8", [4], [0, 4]), "b": _entry("U8", [4], [0, 4])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "empty tensor inside another",
        build_safetensors(
            {"a": _entry("U8", [4], [0, 4]), "b": _entry("U8", [0], [2, 2])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "gap at start",
        build_safetensors({"a": _entry("U8", [3], [1, 4])}, b"abcd"),
        "gap in the data buffer",
    ),
    (
        "gap in middle",
        build_safetensors(
            {"a": _entry("U8", [1], [0, 1]), "b": _entry("U8", [2], [2, 4])}, b"abcd"
        ),
        "gap in the data buffer",
    ),
    (
        "trailing bytes",
        build_safetensors({"a": _entry("U8", [3], [0, 3])}, b"abcd"),
        "trailing bytes",
    ),
    ("bytes but no tensors", build_safetensors(b"{}", b"zz"), "trailing bytes"),
    (
        "dim beyond u64",
        build_safetensors({"a": _entry("U8", [2**64, 0], [0, 0])}),
        "64-bit integers",
    ),
    (
        "lone surrogate name",
        build_safetensors(
            b'{"a\\ud800": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"x"
        ),
        "not valid Unicode",
    ),
    (
        "lone surrogate metadata",
        build_safetensors(b'{"__metadata__": {"k": "\\udfff"}}'),
        "not valid Unicode",
    ),
    (
        "metadata not str",
        build_safetensors({"__metadata__": {"epochs": 3}}),
        "__metadata__ must be",
    ),
    ("metadata list", build_safetensors({"__metadata__": ["a"]}), "__metadata__ must be"),
]


@pytest.mark.parametrize(("case", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_are_rejected(
    tmp_path: Path, case: str, content: bytes, message: str
) -> None:
    path = write(tmp_path / "bad.safetensors", content)
    for call in (read_safetensors_header, digest_safetensors):
        with pytest.raises(SafetensorsFormatError) as info:
            call(path)
        err = info.value
        assert isinstance(err, DlmGitError)
        assert err.exit_code == 1
        assert err.subject == str(path)
        assert message in err.message, (case, err.message)
        assert str(err).startswith(f"{path}: ")


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        digest_safetensors(tmp_path / "nope.safetensors")
