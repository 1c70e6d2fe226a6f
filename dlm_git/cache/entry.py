"""On-disk format of one cache entry: the tokens of one row.

    magic      8 bytes  b"DLMTOKC4"
    key       32 bytes  the entry key (hex ASCII), so a misplaced file is a miss
    row_id    u16le length + ASCII, so an entry is never served for another row
    leaf      32 bytes  the row's token-stream leaf hash (dlm_git.token_stream)
    count     u32le     sequences in the row
    width     u32le     bytes per stored token id: 2 (all ids < 65536) or 4
    table     count x (u32le length, u32le masked prefix length)
    ids       sum(lengths) ids, uint16le or int32le
    checksum  32 bytes  BLAKE3 of everything above

Chosen for load speed and size: one `read()`, one BLAKE3 checksum, `numpy.frombuffer` views; no
pickle, no JSON, no per-token Python objects. Labels are not stored (they are the ids with
a masked prefix) and ids of small vocabularies take two bytes, so an entry is a quarter of
the int32 ids+labels it stands for. The leaf is kept, not recomputed: the checksum covers
it together with the ids it was computed from. A truncated or corrupted entry fails the
length or checksum check and is a miss, never wrong tokens.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from dlm_git.hashing import checksum_digest, sha256_text
from dlm_git.token_stream import RowTokens

KEY_VERSION = "dlm-git/token-cache/v4"
MAGIC = b"DLMTOKC4"
KEY_LEN = 32
LEAF_LEN = 32
CHECKSUM_LEN = 32
_COUNTS = struct.Struct("<II")
TABLE_DTYPE = np.dtype([("length", "<u4"), ("masked", "<u4")])
ID_DTYPES: dict[int, np.dtype[Any]] = {2: np.dtype("<u2"), 4: np.dtype("<i4")}


class CorruptEntry(Exception):
    """The bytes do not decode; the caller treats it as a miss."""


def entry_key(row_id: str, tokenizer_sha256: str, sequence_len: int) -> str:
    """The entry's address. The version names the entry format: entries of another
    format have other keys, so they are never read as corrupt, only aged out."""
    return sha256_text(f"{KEY_VERSION}\n{row_id}\n{tokenizer_sha256}\n{sequence_len}")[:32]


def id_width(ids: np.ndarray) -> int:
    return 2 if len(ids) == 0 or int(ids.max()) < 65536 else 4


def encode_table(lengths: np.ndarray, masked: np.ndarray) -> bytes:
    table = np.empty(len(lengths), dtype=TABLE_DTYPE)
    table["length"] = lengths
    table["masked"] = masked
    return table.tobytes()


def encode_ids(ids: np.ndarray, width: int) -> bytes:
    return bytes(np.asarray(ids).astype(ID_DTYPES[width], copy=False).tobytes())


def verify_checksum(data: bytes | memoryview) -> memoryview:
    """The body of `data` (everything before the trailing checksum) if the checksum holds."""
    if len(data) < CHECKSUM_LEN:
        raise CorruptEntry("truncated")
    view = memoryview(data)
    body = view[:-CHECKSUM_LEN]
    if checksum_digest(body) != data[-CHECKSUM_LEN:]:
        raise CorruptEntry("checksum mismatch")
    return body


def encode_entry(key: str, row: RowTokens) -> bytes:
    width = id_width(row.ids)
    rid = row.row_id.encode("ascii")
    body = b"".join(
        [
            MAGIC,
            key.encode("ascii"),
            struct.pack("<H", len(rid)),
            rid,
            row.leaf,
            _COUNTS.pack(len(row.lengths), width),
            encode_table(row.lengths, row.masked),
            encode_ids(row.ids, width),
        ]
    )
    return body + checksum_digest(body)


def is_other_entry_version(data: bytes) -> bool:
    """An entry in another version's format (magic DLMTOKC<n> with another n): not
    corrupt, only never read (its key is another version's, see `entry_key`)."""
    return data[:7] == MAGIC[:7] and data[:8] != MAGIC


def check_entry(data: bytes, key: str) -> None:
    """Raise `CorruptEntry` unless `data` is a whole entry stored under `key`: everything
    `decode_entry` checks, for the row id the entry itself holds (fsck has no row ids)."""
    at = len(MAGIC) + KEY_LEN
    if len(data) < at + 2:
        raise CorruptEntry("bad magic or truncated")
    (n,) = struct.unpack_from("<H", data, at)
    try:
        row_id = data[at + 2 : at + 2 + n].decode("ascii")
    except UnicodeDecodeError:
        raise CorruptEntry("row id is not ASCII") from None
    decode_entry(data, key, row_id)


def decode_entry(data: bytes, key: str, row_id: str) -> RowTokens:
    """The row's tokens (views into `data`); CorruptEntry if anything is off."""
    rid = row_id.encode("ascii")
    head = len(MAGIC) + KEY_LEN + 2 + len(rid) + LEAF_LEN + _COUNTS.size
    if len(data) < head + CHECKSUM_LEN or not data.startswith(MAGIC):
        raise CorruptEntry("bad magic or truncated")
    verify_checksum(data)
    at = len(MAGIC)
    if data[at : at + KEY_LEN] != key.encode("ascii"):
        raise CorruptEntry("entry holds another key")
    at += KEY_LEN
    (n,) = struct.unpack_from("<H", data, at)
    if data[at + 2 : at + 2 + n] != rid:
        raise CorruptEntry("entry holds another row")
    at += 2 + n
    leaf = data[at : at + LEAF_LEN]
    count, width = _COUNTS.unpack_from(data, at + LEAF_LEN)
    at = head
    if width not in ID_DTYPES or at + count * TABLE_DTYPE.itemsize > len(data) - CHECKSUM_LEN:
        raise CorruptEntry("bad table")
    table = np.frombuffer(data, dtype=TABLE_DTYPE, count=count, offset=at)
    at += count * TABLE_DTYPE.itemsize
    lengths, masked = table["length"], table["masked"]
    total = int(lengths.sum(dtype=np.int64))
    if at + total * width != len(data) - CHECKSUM_LEN or bool((masked > lengths).any()):
        raise CorruptEntry("length mismatch")
    ids = np.frombuffer(data, dtype=ID_DTYPES[width], count=total, offset=at)
    return RowTokens(row_id, lengths, masked, ids, leaf)
