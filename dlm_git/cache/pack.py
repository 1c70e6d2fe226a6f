"""Per-document packs: the last run's rows of one document in a single checksummed file.

A warm run of a document reads its pack (one open, one read, one sha256) instead of one
entry file per row; when the pack holds exactly the run's rows in order, the token stream
is built from the pack's arrays as they are, with no per-row work, and the token stream
root is the one the pack keeps. The pack is only an accelerator: it holds the same rows
as the entry files, is rewritten atomically when a run's rows differ from it, and is
accounted for and evicted like an entry (index key `pack-<dlm_id>`). A pack that fails
its checksum is unused as a whole (its rows come from their entry files) and rewritten.

    magic     8 bytes  b"DLMPACK2"
    rows      u32le    rows (distinct keys, in the run's order)
    seqs      u32le    sequences over all rows
    width     u32le    bytes per stored token id: 2 or 4 (as in entry.py)
    zero      u32le
    tokens    u64le    token ids over all rows
    root      32 bytes the token stream root of these rows in this order
    keys      rows x 32 bytes (hex ASCII)
    leaves    rows x 32 bytes (each row's token-stream leaf hash)
    counts    rows x u32le (sequences per row)
    table     seqs x (u32le length, u32le masked prefix length)
    ids       tokens ids, uint16le or int32le
    checksum  32 bytes  sha256 of everything above
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

from dlm_git.cache.entry import (
    CHECKSUM_LEN,
    ID_DTYPES,
    KEY_LEN,
    LEAF_LEN,
    TABLE_DTYPE,
    CorruptEntry,
    encode_ids,
    encode_table,
    id_width,
    verify_checksum,
)
from dlm_git.hashing import sha256_digest
from dlm_git.train.stream import RowTokens, TokenStream, token_stream_root

MAGIC = b"DLMPACK2"
_HEAD = struct.Struct("<IIIIQ")
ROOT_LEN = 32


@dataclass(frozen=True)
class Pack:
    keys: list[str]
    leaves: list[bytes]
    counts: np.ndarray
    lengths: np.ndarray
    masked: np.ndarray
    ids: np.ndarray
    root: str
    """Token stream root of the rows in pack order (the checksum covers it)."""
    size: int
    """Bytes of the pack file."""

    @functools.cached_property
    def position(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.keys)}

    @functools.cached_property
    def _starts(self) -> tuple[np.ndarray, np.ndarray]:
        seq = np.zeros(len(self.counts) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=seq[1:])
        tok = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=tok[1:])
        return seq, tok

    def row(self, index: int, row_id: str) -> RowTokens:
        """Row `index` (its key must be the one of `row_id`), as views into the pack."""
        seq, tok = self._starts
        s0, s1 = int(seq[index]), int(seq[index + 1])
        t0, t1 = int(tok[s0]), int(tok[s1])
        return RowTokens(
            row_id,
            self.lengths[s0:s1],
            self.masked[s0:s1],
            self.ids[t0:t1],
            self.leaves[index],
        )

    def stream(self, row_ids: list[str]) -> TokenStream:
        """The whole pack as a token stream; `row_ids` are the ids behind `keys`, in order."""
        return TokenStream(row_ids, self.counts.tolist(), self.lengths, self.masked, self.ids)


def is_other_pack_version(data: bytes) -> bool:
    """A pack in another version's format (its magic is DLMPACK<n> with another n)."""
    return data[:7] == MAGIC[:7] and data[:8] != MAGIC


def encode_pack(entries: list[tuple[str, RowTokens]]) -> bytes:
    rows = [r for _, r in entries]
    if rows:
        lengths = np.concatenate([r.lengths for r in rows])
        masked = np.concatenate([r.masked for r in rows])
        ids = np.concatenate([r.ids for r in rows])
    else:
        lengths = masked = np.zeros(0, dtype=np.uint32)
        ids = np.zeros(0, dtype=np.int32)
    width = id_width(ids)
    body = b"".join(
        [
            MAGIC,
            _HEAD.pack(len(rows), len(lengths), width, 0, len(ids)),
            bytes.fromhex(token_stream_root([r.leaf for r in rows])),
            *(key.encode("ascii") for key, _ in entries),
            *(r.leaf for r in rows),
            np.asarray([len(r.lengths) for r in rows], dtype="<u4").tobytes(),
            encode_table(lengths, masked),
            encode_ids(ids, width),
        ]
    )
    return body + sha256_digest(body)


def decode_pack(data: bytes) -> Pack:
    """The pack's rows (arrays are views into `data`); CorruptEntry if anything is off."""
    head = len(MAGIC) + _HEAD.size + ROOT_LEN
    if len(data) < head + CHECKSUM_LEN or not data.startswith(MAGIC):
        raise CorruptEntry("bad magic or truncated")
    n_rows, n_seqs, width, zero, n_tokens = _HEAD.unpack_from(data, len(MAGIC))
    if width not in ID_DTYPES or zero != 0:
        raise CorruptEntry("bad header")
    sizes = [n_rows * KEY_LEN, n_rows * LEAF_LEN, n_rows * 4, n_seqs * TABLE_DTYPE.itemsize]
    if head + sum(sizes) + n_tokens * width + CHECKSUM_LEN != len(data):
        raise CorruptEntry("length mismatch")
    verify_checksum(data)
    root = data[head - ROOT_LEN : head].hex()
    at = head
    keys_blob = data[at : at + sizes[0]].decode("ascii", "replace")
    keys = [keys_blob[i : i + KEY_LEN] for i in range(0, len(keys_blob), KEY_LEN)]
    at += sizes[0]
    leaves = [data[at + i : at + i + LEAF_LEN] for i in range(0, sizes[1], LEAF_LEN)]
    at += sizes[1]
    counts = np.frombuffer(data, dtype="<u4", count=n_rows, offset=at)
    at += sizes[2]
    table = np.frombuffer(data, dtype=TABLE_DTYPE, count=n_seqs, offset=at)
    at += sizes[3]
    ids = np.frombuffer(data, dtype=ID_DTYPES[width], count=n_tokens, offset=at)
    lengths, masked = table["length"], table["masked"]
    if (
        int(counts.sum(dtype=np.int64)) != n_seqs
        or int(lengths.sum(dtype=np.int64)) != n_tokens
        or bool((masked > lengths).any())
    ):
        raise CorruptEntry("tables disagree")
    return Pack(keys, leaves, counts, lengths, masked, ids, root, len(data))
