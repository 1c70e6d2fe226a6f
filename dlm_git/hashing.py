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
* A text input (a `.dlm`, a source file, a record dlm-git wrote) is hashed in its
  canonical form, `canonical_text`: every CRLF written as LF, nothing else changed. That is
  what git stores for a file it treats as text (`core.autocrlf`, `text`/`eol` attributes),
  so one commit hashes the same on an LF and on a CRLF checkout, in train, the hooks and
  verify alike. Bytes without a CRLF are their own canonical form: the digest of an LF
  file is the digest of its raw bytes, as before the rule. Records made before it hold the
  raw bytes' digest; `TextDigest.form_of` recognises both (`TextForm`).
* A tensor digest binds name, dtype, shape, byte length and bytes; the tensor root binds
  the number of tensors and their digests in name order (Unicode code point order, which
  equals UTF-8 byte order).
* A safetensors file is digested in one pass after its header was parsed and validated
  by `dlm_git.safetensors_header` (by hand; nothing is ever unpickled). The Merkle tree
  lives in `dlm_git.merkle`.

This module is imported by git hooks, so it must stay light: standard library only
(no torch, numpy, transformers or safetensors), and `dlm_git.safetensors_header` only
when a safetensors file is digested tensor by tensor (`verify`; the hooks never do: they
hash adapter files whole).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.fsutil import digest_regular, open_regular

if TYPE_CHECKING:  # the header reader is imported where a file is digested: hooks never do
    from dlm_git.safetensors_header import TensorSpec

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "SafetensorsDigest",
    "TensorDigest",
    "TextDigest",
    "TextForm",
    "canonical_json",
    "canonical_text",
    "canonical_json_sha256",
    "digest_safetensors",
    "digest_tensor_bytes",
    "digest_text",
    "float_from_hex",
    "float_hex",
    "sha256_bytes",
    "sha256_file",
    "sha256_text",
    "tensor_root",
]

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024


_TENSOR_TAG = b"dlm-git/tensor/v1\x00"
_TENSOR_ROOT_TAG = b"dlm-git/tensor-root/v1\x00"
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
    return digest_regular(path, "sha256")


# --------------------------------------------------------------------------- text inputs


def canonical_text(data: bytes) -> bytes:
    """The form a text input is hashed in: every CRLF written as LF (what git's text
    conversion stores), every other byte as it is. A lone CR is kept, as git keeps it;
    the parser's own normalising (BOM, lone CR) is a function of this form."""
    return data.replace(b"\r\n", b"\n")


class TextForm(StrEnum):
    """Which digest of a text input a record holds."""

    CANONICAL = "canonical"
    """Of `canonical_text`: what dlm-git records."""
    RAW = "raw"
    """Of the raw bytes: records made before the line-end rule. Differs from the
    canonical digest only for bytes that hold a CRLF."""


@dataclass(frozen=True)
class TextDigest:
    """sha256 and size of a text input's canonical form and of its raw bytes."""

    sha256: str
    size: int
    raw_sha256: str
    raw_size: int

    def form_of(self, sha256: object, size: object = None) -> TextForm | None:
        """Which form a recorded digest (and size, when one is recorded) is of; None: of
        neither, the input is not what the record says."""

        def same_size(n: int) -> bool:
            return size is None or (type(size) is int and size == n)

        if sha256 == self.sha256 and same_size(self.size):
            return TextForm.CANONICAL
        if sha256 == self.raw_sha256 and same_size(self.raw_size):
            return TextForm.RAW
        return None


def digest_text(data: bytes) -> TextDigest:
    """The digests of a text input (one sha256 pass when it holds no CRLF)."""
    canonical = canonical_text(data)
    digest = sha256_bytes(canonical)
    if len(canonical) == len(data):  # nothing replaced: the same bytes
        return TextDigest(digest, len(data), digest, len(data))
    return TextDigest(digest, len(canonical), sha256_bytes(data), len(data))


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


def parse_float_hex(value: object, longest: int) -> float | None:
    """The float a hex string from a record names; None for anything else: not a string,
    longer than `longest`, not float hex, or past any float (`0x1p+99999`: Python's
    `OverflowError`). The one reader of recorded float hex (hostile bytes)."""
    if not isinstance(value, str) or len(value) > longest:
        return None
    try:
        return float.fromhex(value)
    except (ValueError, OverflowError):
        return None


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


class _TensorFeed:
    """The per-tensor digests, fed the data buffer in order. The tensors (offset order)
    cover it exactly (`open_header` checked that), so each byte goes to exactly one."""

    __slots__ = ("_current", "_done", "_idx", "_remaining", "_specs")

    def __init__(self, specs: Sequence[TensorSpec]) -> None:
        self._specs = specs
        self._idx = 0  # index into specs of the tensor being filled
        self._current: Any = None  # hashlib object of the tensor being filled
        self._remaining = 0  # bytes still owed to `_current`
        self._done: list[TensorDigest] = []
        self._start_next()

    def _start_next(self) -> None:
        """Open the next tensor; zero-length ones are complete as soon as they start."""
        while self._idx < len(self._specs):
            spec = self._specs[self._idx]
            nbytes = spec.end - spec.begin
            h = hashlib.sha256(_tensor_preamble(spec.name, spec.dtype, spec.shape, nbytes))
            if nbytes:
                self._current, self._remaining = h, nbytes
                return
            self._done.append(TensorDigest(spec.name, spec.dtype, spec.shape, 0, h.hexdigest()))
            self._idx += 1
        self._current, self._remaining = None, 0

    def _finish_current(self) -> None:
        spec = self._specs[self._idx]
        nbytes = spec.end - spec.begin
        digest = self._current.hexdigest()
        self._done.append(TensorDigest(spec.name, spec.dtype, spec.shape, nbytes, digest))
        self._idx += 1
        self._start_next()

    def update(self, chunk: memoryview) -> None:
        """Feed the next `chunk` of the data buffer."""
        pos, n = 0, len(chunk)
        while pos < n:
            take = min(self._remaining, n - pos)
            self._current.update(chunk[pos : pos + take])
            self._remaining -= take
            pos += take
            if self._remaining == 0:
                self._finish_current()

    def tensors(self) -> tuple[TensorDigest, ...]:
        """Every tensor's digest, in name order (once the whole buffer was fed)."""
        if len(self._done) != len(self._specs):  # pragma: no cover - guarded by open_header
            raise AssertionError("tensor coverage bookkeeping is broken")
        return tuple(sorted(self._done, key=lambda t: t.name))


def _fill(fh: io.FileIO, view: memoryview, want: int) -> int:
    """Read up to `want` bytes into `view`; fewer only where the file ends."""
    got = 0
    while got < want:
        n = fh.readinto(view[got:want])
        if not n:
            break
        got += n
    return got


def _hash_data(
    fh: io.FileIO, data_len: int, chunk_size: int, file_hash: Any, feed: _TensorFeed, subject: str
) -> None:
    """Feed the next `data_len` bytes of `fh` to `file_hash` and to `feed`: the whole-file
    hash of chunk i on a worker thread while this thread feeds chunk i to the tensors and
    then reads chunk i+1 into the other buffer. Data of one chunk has nothing to overlap:
    both are fed on this thread, and no thread is started."""
    bufsize = min(chunk_size, data_len)
    if bufsize <= 0:
        return
    from dlm_git.safetensors_header import SafetensorsFormatError

    views = (memoryview(bytearray(bufsize)), memoryview(bytearray(bufsize)))
    left = data_len
    which = 0
    n = _fill(fh, views[0], min(bufsize, left))
    if n == left:  # one chunk, all of it read
        file_hash.update(views[0][:n])
        feed.update(views[0][:n])
        return
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
                feed.update(chunk)
                left -= n
                n = _fill(fh, views[1 - which], min(bufsize, left)) if left else 0
            finally:
                future.result()
            which = 1 - which


def digest_safetensors(path: Path, *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> SafetensorsDigest:
    """Whole-file SHA-256 plus per-tensor digests, in one sequential pass.

    The whole-file hash of chunk i runs on a worker thread while this thread feeds the
    same chunk to the tensor digests and then reads chunk i+1 into a second buffer
    (hashlib releases the GIL on large buffers). Raises SafetensorsFormatError for a
    malformed file, or one that changes size while it is read.
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    from dlm_git.safetensors_header import SafetensorsFormatError, open_header

    subject = str(path)
    with open_regular(path) as fh:
        size, prefix, _, metadata, specs = open_header(fh, subject)
        file_hash = hashlib.sha256(prefix)
        feed = _TensorFeed(specs)
        _hash_data(fh, size - len(prefix), chunk_size, file_hash, feed, subject)
        if fh.read(1):
            raise SafetensorsFormatError(subject, "file grew while reading")
    tensors = feed.tensors()
    return SafetensorsDigest(
        file_sha256=file_hash.hexdigest(),
        size=size,
        tensor_root=tensor_root(tensors),
        tensors=tensors,
        metadata=metadata,
    )
