"""The one place dlm-git hashes anything.

Invariants:

* Every digest is SHA-256, written as 64 lowercase hex characters unless a function
  says it returns raw bytes.
* Every composite digest starts with its own domain-separation tag
  (``b"dlm-git/<kind>/v<N>\\x00"``) and length-prefixes each variable-length field
  (``lp(b) = u64le(len(b)) || b``), so values of one kind can never collide with values
  of another kind, and no two different field sequences share an encoding. Changing any
  encoding below means bumping its ``v<N>`` tag.
* JSON that gets hashed or committed is written by `canonical_json` only: sorted keys,
  two-space indent, UTF-8 without escaping, no NaN/Infinity, exactly one trailing newline.
* Floats that must round-trip exactly are recorded with `float_hex`.
* A tensor digest binds name, dtype, shape, byte length and bytes; the tensor root binds
  the number of tensors and their digests in name order (Unicode code point order, which
  equals UTF-8 byte order).
* The Merkle tree is RFC 6962's (leaf ``0x00``, node ``0x01``, split at the largest power
  of two below n, odd nodes are never duplicated); `merkle_root` additionally binds the
  leaf count.
* Safetensors files are parsed here, by hand, and validated strictly: the data buffer must
  be covered exactly by the tensors (no gaps, overlaps or trailing bytes). Nothing is ever
  unpickled.

This module is imported by git hooks, so it must stay light: standard library only
(no torch, numpy, transformers or safetensors).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from dlm_git.errors import DlmGitError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DTYPE_ITEMSIZE",
    "MAX_HEADER_SIZE",
    "SafetensorsDigest",
    "SafetensorsFormatError",
    "TensorDigest",
    "canonical_json",
    "canonical_json_sha256",
    "digest_safetensors",
    "digest_tensor_bytes",
    "float_from_hex",
    "float_hex",
    "inclusion_proof",
    "merkle_root",
    "merkle_tree_hash",
    "read_safetensors_header",
    "sha256_bytes",
    "sha256_file",
    "sha256_text",
    "tensor_root",
    "verify_inclusion",
]

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
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

_TENSOR_TAG = b"dlm-git/tensor/v1\x00"
_TENSOR_ROOT_TAG = b"dlm-git/tensor-root/v1\x00"
_MERKLE_TAG = b"dlm-git/merkle/v1\x00"
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_DIGEST_SIZE = 32


# --------------------------------------------------------------------------- plain digests


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_digest(data: bytes | memoryview) -> bytes:
    """Raw 32-byte SHA-256 of `data`."""
    return hashlib.sha256(data).digest()


def checksum_digest(data: bytes | memoryview) -> bytes:
    """Raw 32-byte BLAKE3 of `data`: the integrity check of machine-local cache files,
    which are read back on every run (about 3x faster than sha256 here). Everything
    recorded or compared across machines stays sha256."""
    from blake3 import blake3

    return blake3(data).digest()


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the UTF-8 encoding of `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of the file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# --------------------------------------------------------------------------- canonical JSON


def canonical_json(obj: object) -> bytes:
    """The one JSON encoding dlm-git hashes and writes.

    Sorted keys, indent 2, non-ASCII kept as UTF-8, exactly one trailing newline.
    NaN and infinities raise ValueError (they are not JSON).
    """
    text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"


def canonical_json_sha256(obj: object) -> str:
    """Hex SHA-256 of `canonical_json(obj)`."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


# --------------------------------------------------------------------------- exact floats


def float_hex(x: float) -> str:
    """Exact, round-trippable text of a float (`float.hex`).

    An int is accepted only when it converts to a float exactly.
    """
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"float_hex expects a float, got {type(x).__name__}")
    if isinstance(x, int):
        as_float = float(x)
        if int(as_float) != x:
            raise ValueError(f"int {x} is not exactly representable as a float")
        x = as_float
    return float.hex(x)


def float_from_hex(s: str) -> float:
    """Inverse of `float_hex`."""
    return float.fromhex(s)


# --------------------------------------------------------------------------- encoding helpers


def _u64(n: int) -> bytes:
    if n < 0 or n >= 1 << 64:
        raise ValueError(f"{n} does not fit in an unsigned 64-bit integer")
    return struct.pack("<Q", n)


def _lp(b: bytes) -> bytes:
    return _u64(len(b)) + b


def _raw_digest(hex_digest: str, what: str) -> bytes:
    try:
        raw = bytes.fromhex(hex_digest)
    except ValueError as exc:
        raise ValueError(f"{what}: {hex_digest!r} is not a hex digest") from exc
    if len(raw) != _DIGEST_SIZE:
        raise ValueError(f"{what}: {hex_digest!r} is not a 32-byte SHA-256 digest")
    return raw


# --------------------------------------------------------------------------- tensor digests


@dataclass(frozen=True)
class TensorDigest:
    """Digest of one tensor: binds name, dtype, shape, byte length and bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    digest: str

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "nbytes": self.nbytes,
            "digest": self.digest,
        }


@dataclass(frozen=True)
class SafetensorsDigest:
    """Everything `digest_safetensors` learns about a file in its single pass."""

    file_sha256: str
    size: int
    tensor_root: str
    tensors: tuple[TensorDigest, ...]
    metadata: dict[str, str]

    def to_json(self) -> dict[str, object]:
        return {
            "file_sha256": self.file_sha256,
            "size": self.size,
            "tensor_root": self.tensor_root,
            "tensors": [t.to_json() for t in self.tensors],
            "metadata": dict(self.metadata),
        }


def _tensor_preamble(name: str, dtype: str, shape: Sequence[int], nbytes: int) -> bytes:
    parts = [
        _TENSOR_TAG,
        _lp(name.encode("utf-8")),
        _lp(dtype.encode("ascii")),
        _u64(len(shape)),
    ]
    parts.extend(_u64(dim) for dim in shape)
    parts.append(_u64(nbytes))
    return b"".join(parts)


def digest_tensor_bytes(name: str, dtype: str, shape: Sequence[int], data: bytes) -> TensorDigest:
    """Digest of one tensor given in memory (same scheme as `digest_safetensors`).

    Does not check that `data` matches dtype and shape; the file reader does.
    """
    h = hashlib.sha256(_tensor_preamble(name, dtype, shape, len(data)))
    h.update(data)
    return TensorDigest(name, dtype, tuple(shape), len(data), h.hexdigest())


def tensor_root(digests: Sequence[TensorDigest]) -> str:
    """Hex root over tensor digests: tag || u64le(count) || raw digests in name order.

    Duplicate names raise ValueError.
    """
    ordered = sorted(digests, key=lambda d: d.name)
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if prev.name == cur.name:
            raise ValueError(f"duplicate tensor name {cur.name!r}")
    h = hashlib.sha256(_TENSOR_ROOT_TAG)
    h.update(_u64(len(ordered)))
    for d in ordered:
        h.update(_raw_digest(d.digest, f"tensor {d.name!r}"))
    return h.hexdigest()


# --------------------------------------------------------------------------- safetensors


class SafetensorsFormatError(DlmGitError):
    """A file is not a well-formed safetensors file (subject: the file's path)."""


@dataclass(frozen=True)
class _TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_unicode(text: str) -> bool:
    """False for strings JSON escapes can produce but UTF-8 cannot encode (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _parse_header_bytes(raw: bytes, subject: str) -> dict[str, Any]:
    def fail(message: str) -> SafetensorsFormatError:
        return SafetensorsFormatError(subject, message)

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"header is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        raise fail(f"header JSON has duplicate key {exc.key!r}") from None
    except (ValueError, RecursionError) as exc:
        raise fail(f"header is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise fail(f"header JSON is a {type(obj).__name__}, not an object")
    return obj


def _validate_header(
    header: dict[str, Any], buffer_len: int, subject: str
) -> tuple[dict[str, str], list[_TensorSpec]]:
    """Check every entry and the exact coverage of the data buffer.

    Returns the metadata and the tensors in offset order.
    """

    def fail(message: str) -> SafetensorsFormatError:
        return SafetensorsFormatError(subject, message)

    metadata: dict[str, str] = {}
    specs: list[_TensorSpec] = []
    for name, entry in header.items():
        if name == "__metadata__":
            if entry is None:
                continue
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise fail("__metadata__ must be an object mapping strings to strings")
            for text in (*entry.keys(), *entry.values()):
                if not _is_unicode(text):
                    raise fail(f"__metadata__ string {text!r} is not valid Unicode")
            metadata = dict(entry)
            continue
        where = f"tensor {name!r}"
        if not _is_unicode(name):
            raise fail(f"{where}: name is not valid Unicode (lone surrogate escape)")
        if not isinstance(entry, dict):
            raise fail(f"{where}: entry is a {type(entry).__name__}, not an object")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in entry:
                raise fail(f"{where}: entry is missing {key!r}")
        dtype = entry["dtype"]
        shape = entry["shape"]
        offsets = entry["data_offsets"]
        if not isinstance(dtype, str):
            raise fail(f"{where}: dtype must be a string, got {dtype!r}")
        if dtype not in DTYPE_ITEMSIZE:
            raise fail(f"{where}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(_is_int(d) and 0 <= d < 1 << 64 for d in shape):
            raise fail(
                f"{where}: shape must be a list of non-negative 64-bit integers, got {shape!r}"
            )
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(_is_int(o) and o >= 0 for o in offsets)
        ):
            raise fail(
                f"{where}: data_offsets must be a list of two non-negative integers, "
                f"got {offsets!r}"
            )
        begin, end = offsets
        if end < begin:
            raise fail(f"{where}: data_offsets end {end} is before begin {begin}")
        if end > buffer_len:
            raise fail(
                f"{where}: data_offsets [{begin}, {end}] are not within the data buffer "
                f"of {buffer_len} bytes"
            )
        expected = math.prod(shape) * DTYPE_ITEMSIZE[dtype]
        if end - begin != expected:
            raise fail(
                f"{where}: byte length {end - begin} does not match shape {shape} of "
                f"{dtype} ({expected} bytes)"
            )
        specs.append(_TensorSpec(name, dtype, tuple(shape), begin, end))

    specs.sort(key=lambda s: (s.begin, s.end, s.name))
    covered = 0
    prev: _TensorSpec | None = None
    for spec in specs:
        if spec.begin < covered:
            assert prev is not None
            raise fail(
                f"tensor {spec.name!r} data_offsets [{spec.begin}, {spec.end}] overlap "
                f"tensor {prev.name!r} [{prev.begin}, {prev.end}]"
            )
        if spec.begin > covered:
            raise fail(
                f"gap in the data buffer: bytes [{covered}, {spec.begin}) belong to no tensor"
            )
        covered = spec.end
        prev = spec
    if covered != buffer_len:
        raise fail(
            f"trailing bytes in the data buffer: bytes [{covered}, {buffer_len}) "
            "belong to no tensor"
        )
    return metadata, specs


def _read_exact(fh: BinaryIO, n: int, subject: str, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise SafetensorsFormatError(
            subject, f"file ended while reading the {what} (file changed while reading?)"
        )
    return data


def _open_header(
    fh: BinaryIO, subject: str
) -> tuple[int, bytes, dict[str, Any], dict[str, str], list[_TensorSpec]]:
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
    with open(path, "rb") as fh:
        _, prefix, header, _, _ = _open_header(fh, str(path))
    return header, len(prefix)


def digest_safetensors(path: Path, *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> SafetensorsDigest:
    """Whole-file SHA-256 plus per-tensor digests, in one sequential pass.

    The whole-file hash of chunk i runs on a worker thread while this thread feeds the
    same chunk to the tensor digests and then reads chunk i+1 into a second buffer
    (hashlib releases the GIL on large buffers). Raises SafetensorsFormatError for a
    malformed file, or one that changes size while it is read.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    subject = str(path)
    with open(path, "rb", buffering=0) as fh:
        size, prefix, _, metadata, specs = _open_header(fh, subject)
        file_hash = hashlib.sha256(prefix)
        data_len = size - len(prefix)

        results: list[TensorDigest] = []
        # tensors in offset order; zero-length ones are complete as soon as they start
        idx = 0
        current: Any = None  # hashlib object of the tensor being filled
        remaining = 0  # bytes still owed to `current`

        def start_next() -> None:
            nonlocal idx, current, remaining
            while idx < len(specs):
                spec = specs[idx]
                nbytes = spec.end - spec.begin
                h = hashlib.sha256(_tensor_preamble(spec.name, spec.dtype, spec.shape, nbytes))
                if nbytes == 0:
                    results.append(
                        TensorDigest(spec.name, spec.dtype, spec.shape, 0, h.hexdigest())
                    )
                    idx += 1
                    continue
                current, remaining = h, nbytes
                return
            current, remaining = None, 0

        def finish_current() -> None:
            nonlocal idx
            spec = specs[idx]
            results.append(
                TensorDigest(
                    spec.name, spec.dtype, spec.shape, spec.end - spec.begin, current.hexdigest()
                )
            )
            idx += 1
            start_next()

        def fill(view: memoryview, want: int) -> int:
            got = 0
            while got < want:
                n = fh.readinto(view[got:want])
                if not n:
                    break
                got += n
            return got

        start_next()
        bufsize = min(chunk_size, data_len)
        if bufsize > 0:
            bufs = (bytearray(bufsize), bytearray(bufsize))
            views = (memoryview(bufs[0]), memoryview(bufs[1]))
            left = data_len
            which = 0
            n = fill(views[0], min(bufsize, left))
            from concurrent.futures import ThreadPoolExecutor  # lazy: hooks import this module

            with ThreadPoolExecutor(max_workers=1) as pool:
                while left > 0:
                    if n != min(bufsize, left):
                        raise SafetensorsFormatError(
                            subject, "file ended early while reading (file changed while reading?)"
                        )
                    chunk = views[which][:n]
                    future = pool.submit(file_hash.update, chunk)
                    try:
                        pos = 0
                        while pos < n:
                            take = min(remaining, n - pos)
                            current.update(chunk[pos : pos + take])
                            remaining -= take
                            pos += take
                            if remaining == 0:
                                finish_current()
                        left -= n
                        other = 1 - which
                        n = fill(views[other], min(bufsize, left)) if left else 0
                    finally:
                        future.result()
                    which = 1 - which
        if fh.read(1):
            raise SafetensorsFormatError(subject, "file grew while reading")
    if len(results) != len(specs):  # pragma: no cover - guarded by _validate_header
        raise AssertionError("tensor coverage bookkeeping is broken")
    tensors = tuple(sorted(results, key=lambda t: t.name))
    return SafetensorsDigest(
        file_sha256=file_hash.hexdigest(),
        size=size,
        tensor_root=tensor_root(tensors),
        tensors=tensors,
        metadata=metadata,
    )


# --------------------------------------------------------------------------- Merkle tree


def _leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(_LEAF_PREFIX + leaf).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def merkle_leaf_hash(*parts: bytes | memoryview) -> bytes:
    """RFC 6962 leaf hash sha256(0x00 || leaf) of the leaf given as consecutive parts."""
    h = hashlib.sha256(_LEAF_PREFIX)
    for part in parts:
        h.update(part)
    return h.digest()


def _levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    return _levels_from_hashes([_leaf_hash(leaf) for leaf in leaves])


def _levels_from_hashes(level: list[bytes]) -> list[list[bytes]]:
    """All levels of the RFC 6962 tree, leaf hashes first, root level last.

    Pairing adjacent nodes and carrying a last odd node up unchanged builds exactly the
    tree RFC 6962 defines by splitting at the largest power of two below n.
    """
    levels = [level]
    while len(level) > 1:
        nxt = [_node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        levels.append(nxt)
        level = nxt
    return levels


def merkle_tree_hash(leaves: Sequence[bytes]) -> bytes:
    """Plain RFC 6962 Merkle Tree Hash (raw 32 bytes); the empty tree is SHA-256 of b""."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    return _levels(leaves)[-1][0]


def _bind(count: int, mth: bytes) -> str:
    return hashlib.sha256(_MERKLE_TAG + _u64(count) + mth).hexdigest()


def merkle_root(leaves: Sequence[bytes]) -> str:
    """Hex root that binds the leaf count: sha256(tag || u64le(n) || MTH(leaves))."""
    return _bind(len(leaves), merkle_tree_hash(leaves))


def merkle_root_from_leaf_hashes(leaf_hashes: Sequence[bytes]) -> str:
    """`merkle_root` for leaves whose RFC 6962 leaf hashes are already known."""
    if not leaf_hashes:
        return _bind(0, hashlib.sha256(b"").digest())
    return _bind(len(leaf_hashes), _levels_from_hashes(list(leaf_hashes))[-1][0])


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[str]:
    """RFC 6962 audit path (hex, leaf level first) for leaf `index`."""
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf index {index} out of range for {len(leaves)} leaves")
    proof: list[str] = []
    m = index
    for level in _levels(leaves)[:-1]:
        sibling = m ^ 1
        if sibling < len(level):
            proof.append(level[sibling].hex())
        m //= 2
    return proof


def verify_inclusion(leaf: bytes, index: int, count: int, proof: Sequence[str], root: str) -> bool:
    """Whether `proof` shows `leaf` at `index` in a tree of `count` leaves with bound `root`.

    Recomputes the RFC 6962 tree hash from the path (RFC 9162 section 2.1.3.2), then binds
    `count` as `merkle_root` does. Malformed input gives False, never an exception.
    """
    if not (0 <= index < count < 1 << 64):
        return False
    try:
        path = [bytes.fromhex(p) for p in proof]
        expected = bytes.fromhex(root)
    except (ValueError, TypeError):
        return False
    if any(len(p) != _DIGEST_SIZE for p in path) or len(expected) != _DIGEST_SIZE:
        return False
    fn, sn = index, count - 1
    r = _leaf_hash(leaf)
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        return False
    return bytes.fromhex(_bind(count, r)) == expected
