"""On-disk format of one cache entry: the tokenized sequences of one row.

    magic      8 bytes  b"DLMTOKC1"
    key       32 bytes  the entry key (hex ASCII), so a misplaced file is a miss
    count      u32le    number of sequences
    lengths    count x u32le
    input_ids  sum(lengths) x i32le
    labels     sum(lengths) x i32le
    checksum  16 bytes  blake2b-128 of everything above

Chosen for load speed: one `read()`, one blake2b over a few KiB, and `numpy.frombuffer`
views; no pickle, no JSON, no per-token Python objects. A truncated or corrupted entry
fails the length or checksum check and is reported as a miss (never wrong tokens).
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from dlm_git.train.tokenize import Sequence

MAGIC = b"DLMTOKC1"
KEY_LEN = 32
CHECKSUM_LEN = 16
_HEAD = len(MAGIC) + KEY_LEN + 4


class CorruptEntry(Exception):
    """The entry's bytes do not decode; the caller treats it as a miss."""


def encode_entry(key: str, row_id: str, sequences: list[Sequence]) -> bytes:
    lengths = np.asarray([len(s.input_ids) for s in sequences], dtype="<u4")
    ids = (
        np.concatenate([s.input_ids for s in sequences]).astype("<i4")
        if sequences
        else np.zeros(0, dtype="<i4")
    )
    labels = (
        np.concatenate([s.labels for s in sequences]).astype("<i4")
        if sequences
        else np.zeros(0, dtype="<i4")
    )
    body = b"".join(
        (
            MAGIC,
            key.encode("ascii"),
            struct.pack("<I", len(sequences)),
            lengths.tobytes(),
            ids.tobytes(),
            labels.tobytes(),
        )
    )
    return body + hashlib.blake2b(body, digest_size=CHECKSUM_LEN).digest()


def decode_entry(data: bytes, key: str, row_id: str) -> list[Sequence]:
    if len(data) < _HEAD + CHECKSUM_LEN or data[: len(MAGIC)] != MAGIC:
        raise CorruptEntry("bad magic or truncated")
    body, checksum = data[:-CHECKSUM_LEN], data[-CHECKSUM_LEN:]
    if hashlib.blake2b(body, digest_size=CHECKSUM_LEN).digest() != checksum:
        raise CorruptEntry("checksum mismatch")
    if body[len(MAGIC) : len(MAGIC) + KEY_LEN] != key.encode("ascii"):
        raise CorruptEntry("entry holds another key")
    (count,) = struct.unpack_from("<I", body, len(MAGIC) + KEY_LEN)
    lengths = np.frombuffer(body, dtype="<u4", count=count, offset=_HEAD)
    total = int(lengths.sum())
    ids_at = _HEAD + 4 * count
    if len(body) != ids_at + 8 * total:
        raise CorruptEntry("length mismatch")
    ids = np.frombuffer(body, dtype="<i4", count=total, offset=ids_at)
    labels = np.frombuffer(body, dtype="<i4", count=total, offset=ids_at + 4 * total)
    out = []
    offset = 0
    for n in lengths.tolist():
        out.append(Sequence(row_id, ids[offset : offset + n], labels[offset : offset + n]))
        offset += n
    return out
