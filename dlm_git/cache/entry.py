"""On-disk format of one cache entry: the tokenized sequences of one row.

    magic      8 bytes  b"DLMTOKC2"
    key       32 bytes  the entry key (hex ASCII), so a misplaced file is a miss
    payload             `row_payload` of dlm_git.train.tokenize:
                        u32le count, count x u32le lengths, input_ids i32le, labels i32le
    checksum  32 bytes  the row's token-stream Merkle leaf hash,
                        sha256(0x00 || row_id || 0x00 || payload)

Chosen for load speed: one `read()`, one sha256 over the payload (which doubles as the
row's leaf in the token stream root, so a hit needs no re-encoding or second hash), and
`numpy.frombuffer` views; no pickle, no JSON, no per-token Python objects. A truncated or
corrupted entry fails the length or checksum check and is a miss, never wrong tokens.
"""

from __future__ import annotations

import struct

import numpy as np

from dlm_git.train.tokenize import Sequence, row_leaf_hash, row_payload

MAGIC = b"DLMTOKC2"
KEY_LEN = 32
CHECKSUM_LEN = 32
_HEAD = len(MAGIC) + KEY_LEN


class CorruptEntry(Exception):
    """The entry's bytes do not decode; the caller treats it as a miss."""


def encode_entry(key: str, row_id: str, sequences: list[Sequence]) -> tuple[bytes, bytes]:
    """The entry's bytes and the row's leaf hash."""
    payload = row_payload(sequences)
    leaf = row_leaf_hash(row_id, payload)
    return MAGIC + key.encode("ascii") + payload + leaf, leaf


def decode_entry(data: bytes, key: str, row_id: str) -> tuple[list[Sequence], bytes]:
    """The row's sequences (read-only views into `data`) and its leaf hash."""
    if len(data) < _HEAD + 4 + CHECKSUM_LEN or not data.startswith(MAGIC):
        raise CorruptEntry("bad magic or truncated")
    if data[len(MAGIC) : _HEAD] != key.encode("ascii"):
        raise CorruptEntry("entry holds another key")
    view = memoryview(data)
    payload = view[_HEAD:-CHECKSUM_LEN]
    leaf = row_leaf_hash(row_id, payload)
    if leaf != data[-CHECKSUM_LEN:]:
        raise CorruptEntry("checksum mismatch")
    (count,) = struct.unpack_from("<I", data, _HEAD)
    if 4 + 4 * count > len(payload):
        raise CorruptEntry("length mismatch")
    lengths = struct.unpack_from(f"<{count}I", data, _HEAD + 4) if count else ()
    total = sum(lengths)
    ids_at = _HEAD + 4 + 4 * count
    if len(payload) != 4 + 4 * count + 8 * total:
        raise CorruptEntry("length mismatch")
    tokens = np.frombuffer(data, dtype="<i4", count=2 * total, offset=ids_at)
    out = []
    offset = 0
    for n in lengths:
        ids = tokens[offset : offset + n]
        out.append(Sequence(row_id, ids, tokens[total + offset : total + offset + n]))
        offset += n
    return out, leaf
