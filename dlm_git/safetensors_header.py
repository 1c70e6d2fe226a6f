"""Safetensors headers, parsed by hand and validated strictly: the data buffer must be
covered exactly by the tensors (no gaps, overlaps or trailing bytes), dtypes and shapes
must agree with byte lengths, names are real Unicode, keys are unique. Nothing is ever
unpickled, and no library reads the file.

Invariant: standard library and `safeparse` (the one door for JSON) only: the git hooks
and hash-level verify import it.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import open_regular
from dlm_git.safeparse import DuplicateKey, NotText, load_json

MAX_HEADER_SIZE = 100_000_000

DTYPE_ITEMSIZE: dict[str, int] = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}


class SafetensorsFormatError(DlmGitError):
    """A file is not a well-formed safetensors file (subject: the file's path)."""


@dataclass(frozen=True)
class TensorSpec:
    """One validated tensor entry: its bytes are [begin, end) of the data buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_header_bytes(raw: bytes, subject: str) -> dict[str, Any]:
    def fail(message: str) -> SafetensorsFormatError:
        return SafetensorsFormatError(subject, message)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"header is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = load_json(text, unique_keys=True)
    except DuplicateKey as exc:
        raise fail(f"header JSON has duplicate key {exc.key!r}") from None
    except NotText as exc:  # a tensor name or metadata string that is no text
        raise fail(f"header is not valid Unicode ({exc})") from None
    except ValueError as exc:
        raise fail(f"header is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise fail(f"header JSON is a {type(obj).__name__}, not an object")
    return obj


def _validate_header(
    header: dict[str, Any], buffer_len: int, subject: str
) -> tuple[dict[str, str], list[TensorSpec]]:
    """Check every entry, in the header's order, then the exact coverage of the data
    buffer. Returns the metadata and the tensors in offset order."""
    metadata: dict[str, str] = {}
    specs: list[TensorSpec] = []
    for name, entry in header.items():
        if name != "__metadata__":
            specs.append(_tensor_spec(name, entry, buffer_len, subject))
        elif entry is not None:
            metadata = _metadata(entry, subject)
    specs.sort(key=lambda s: (s.begin, s.end, s.name))
    _check_coverage(specs, buffer_len, subject)
    return metadata, specs


def _metadata(entry: object, subject: str) -> dict[str, str]:
    """The `__metadata__` entry: an object mapping Unicode strings to Unicode strings."""
    if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
        raise SafetensorsFormatError(
            subject, "__metadata__ must be an object mapping strings to strings"
        )
    return dict(entry)


def _tensor_spec(name: str, entry: object, buffer_len: int, subject: str) -> TensorSpec:
    """One tensor's entry: well-typed fields, offsets inside the data buffer, and a byte
    length that matches its dtype and shape."""
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise SafetensorsFormatError(
            subject, f"{where}: entry is a {type(entry).__name__}, not an object"
        )
    dtype, shape, begin, end = _entry_fields(entry, subject, where)
    if end > buffer_len:
        raise SafetensorsFormatError(
            subject,
            f"{where}: data_offsets [{begin}, {end}] are not within the data buffer "
            f"of {buffer_len} bytes",
        )
    expected = math.prod(shape) * DTYPE_ITEMSIZE[dtype]
    if end - begin != expected:
        raise SafetensorsFormatError(
            subject,
            f"{where}: byte length {end - begin} does not match shape {shape} of "
            f"{dtype} ({expected} bytes)",
        )
    return TensorSpec(name, dtype, tuple(shape), begin, end)


def _entry_fields(
    entry: dict[str, Any], subject: str, where: str
) -> tuple[str, list[int], int, int]:
    """dtype, shape, begin and end of a tensor entry, each present and well-typed, with
    begin <= end."""

    def fail(message: str) -> SafetensorsFormatError:
        return SafetensorsFormatError(subject, f"{where}: {message}")

    for key in ("dtype", "shape", "data_offsets"):
        if key not in entry:
            raise fail(f"entry is missing {key!r}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str):
        raise fail(f"dtype must be a string, got {dtype!r}")
    if dtype not in DTYPE_ITEMSIZE:
        raise fail(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_int(d) and 0 <= d < 1 << 64 for d in shape):
        raise fail(f"shape must be a list of non-negative 64-bit integers, got {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) and o >= 0 for o in offsets)
    ):
        raise fail(f"data_offsets must be a list of two non-negative integers, got {offsets!r}")
    begin, end = offsets
    if end < begin:
        raise fail(f"data_offsets end {end} is before begin {begin}")
    return dtype, shape, begin, end


def _check_coverage(specs: list[TensorSpec], buffer_len: int, subject: str) -> None:
    """The tensors, in offset order, cover the data buffer exactly: no overlap, no gap,
    no trailing bytes."""
    covered = 0
    prev: TensorSpec | None = None
    for spec in specs:
        if spec.begin < covered:
            assert prev is not None
            raise SafetensorsFormatError(
                subject,
                f"tensor {spec.name!r} data_offsets [{spec.begin}, {spec.end}] overlap "
                f"tensor {prev.name!r} [{prev.begin}, {prev.end}]",
            )
        if spec.begin > covered:
            raise SafetensorsFormatError(
                subject,
                f"gap in the data buffer: bytes [{covered}, {spec.begin}) belong to no tensor",
            )
        covered = spec.end
        prev = spec
    if covered != buffer_len:
        raise SafetensorsFormatError(
            subject,
            f"trailing bytes in the data buffer: bytes [{covered}, {buffer_len}) "
            "belong to no tensor",
        )


def _read_exact(fh: BinaryIO, n: int, subject: str, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise SafetensorsFormatError(
            subject, f"file ended while reading the {what} (file changed while reading?)"
        )
    return data


def open_header(
    fh: BinaryIO, subject: str
) -> tuple[int, bytes, dict[str, Any], dict[str, str], list[TensorSpec]]:
    """Read and validate the header from the start of `fh`.

    Returns (file size, header prefix bytes incl. the length field, header, metadata,
    tensors in offset order).
    """
    size = os.fstat(fh.fileno()).st_size
    if size < 8:
        raise SafetensorsFormatError(
            subject, f"file is {size} bytes, shorter than the 8-byte header length field"
        )
    length_field = _read_exact(fh, 8, subject, "header length")
    (header_len,) = struct.unpack("<Q", length_field)
    if header_len > MAX_HEADER_SIZE:
        raise SafetensorsFormatError(
            subject, f"header length {header_len} exceeds the {MAX_HEADER_SIZE}-byte limit"
        )
    if 8 + header_len > size:
        raise SafetensorsFormatError(
            subject, f"header length {header_len} exceeds the file size of {size} bytes"
        )
    raw = _read_exact(fh, header_len, subject, "header")
    header = _parse_header_bytes(raw, subject)
    data_start = 8 + header_len
    metadata, specs = _validate_header(header, size - data_start, subject)
    return size, length_field + raw, header, metadata, specs


def read_safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """Parsed and validated header of a safetensors file, and the data buffer's offset.

    Raises SafetensorsFormatError for anything malformed (see `digest_safetensors`).
    """
    with open_regular(path) as fh:
        _, prefix, header, _, _ = open_header(fh, str(path))
    return header, len(prefix)
