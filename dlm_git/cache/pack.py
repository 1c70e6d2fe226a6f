"""Per-document packs: the last run's rows of one document in a single checksummed file.

A warm run of a document reads its pack (one open, one read, one checksum) instead of one
entry file per row. The pack records what its rows were tokenized for (tokenizer sha256,
`sequence_len`), their ids in order, and the digest of the source files behind them
(`source_rows_digest`), so a run whose rows are exactly those is recognised by comparing
its few section row ids and one digest, without computing a key or even a row id per
source file; its token stream is then built from the pack's arrays as they are, with no
per-row work, and the token stream root is the one the pack keeps.

The pack is only an accelerator: it holds the same rows as the entry files, is rewritten
atomically when a run's rows differ from it, and is accounted for and evicted like an
entry (index key `pack-<dlm_id>`). A pack that fails its checksum is unused as a whole
(its rows come from their entry files) and rewritten.

    magic     8 bytes  b"DLMPACK3"
    rows      u32le    rows (distinct row ids, in the run's order)
    seqs      u32le    sequences over all rows
    width     u32le    bytes per stored token id: 2 or 4 (as in entry.py)
    seq_len   u32le    the sequence_len the rows were tokenized for
    tokens    u64le    token ids over all rows
    ids_len   u64le    bytes of the row id list
    tokenizer 32 bytes the tokenizer_sha256 the rows were tokenized with
    sources   32 bytes source_rows_digest of the source files behind the last rows
    root      32 bytes the token stream root of these rows in this order
    keys      rows x 32 bytes (hex ASCII; entry_key of each row id, tokenizer, seq_len)
    leaves    rows x 32 bytes (each row's token-stream leaf hash)
    counts    rows x u32le (sequences per row)
    table     seqs x (u32le length, u32le masked prefix length)
    ids       tokens ids, uint16le or int32le
    row ids   ids_len bytes: the row ids, ASCII, each followed by a newline
    checksum  32 bytes  BLAKE3 of everything above (as in entry.py)
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Collection, Iterator
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
    entry_key,
    id_width,
    verify_checksum,
)
from dlm_git.hashing import checksum_digest
from dlm_git.token_stream import RowTokens, TokenStream, token_stream_root

MAGIC = b"DLMPACK3"
_HEAD = struct.Struct("<IIIIQQ")
TOKENIZER_LEN = 32
SOURCES_LEN = 32
ROOT_LEN = 32


@dataclass(frozen=True)
class Pack:
    tokenizer_sha256: str
    sequence_len: int
    sources_digest: str
    row_ids: list[str]
    key_table: bytes
    """rows x 32 bytes: the rows' entry keys, hex ASCII (see `keys`)."""
    leaf_table: bytes
    """rows x 32 bytes: the rows' leaves (see `leaves`)."""
    counts: np.ndarray
    lengths: np.ndarray
    masked: np.ndarray
    ids: np.ndarray
    root: str
    """Token stream root of the rows in pack order (the checksum covers it)."""
    size: int
    """Bytes of the pack file."""

    def holds(
        self,
        tokenizer_sha256: str,
        sequence_len: int,
        section_row_ids: list[str],
        sources_digest: str,
        n_sources: int,
    ) -> bool:
        """Whether a run's rows are exactly the pack's, in order, tokenized the same way:
        the document's section rows (by id), then `n_sources` source file rows (by the
        digest of what their ids are made of)."""
        n = len(section_row_ids)
        return (
            len(self.row_ids) == n + n_sources
            and self.sources_digest == sources_digest
            and self.row_ids[:n] == section_row_ids
            and self.sequence_len == sequence_len
            and self.tokenizer_sha256 == tokenizer_sha256
        )

    @functools.cached_property
    def keys(self) -> list[str]:
        """Each row's entry key; split out only when rows are looked up or listed one by
        one (a run served by the whole pack names the pack, never its keys)."""
        text = self.key_table.decode("ascii", "replace")
        return [text[i : i + KEY_LEN] for i in range(0, len(text), KEY_LEN)]

    @functools.cached_property
    def leaves(self) -> list[bytes]:
        """Each row's token-stream leaf hash; split out only when rows are taken one by
        one (a run whose rows are all the pack's uses the stored root instead)."""
        table = self.leaf_table
        return [table[i : i + LEAF_LEN] for i in range(0, len(table), LEAF_LEN)]

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

    def stream(self) -> TokenStream:
        """The whole pack as a token stream (views into the pack)."""
        return TokenStream(self.row_ids, self.counts.tolist(), self.lengths, self.masked, self.ids)


class ServedKeys(Collection[str]):
    """The keys a run served by a whole pack used: the pack's own (`pack_key`) and each
    of its rows' entry keys, those decoded only if the index needs them (the pack is not
    fresh, or the cache is evicting), never on the common warm run."""

    def __init__(self, pack: Pack, pack_key: str) -> None:
        self.pack, self.pack_key = pack, pack_key

    def __iter__(self) -> Iterator[str]:
        yield from self.pack.keys
        yield self.pack_key

    def __len__(self) -> int:
        return len(self.pack.row_ids) + 1

    def __contains__(self, key: object) -> bool:
        return key == self.pack_key or key in self.pack.position


def is_other_pack_version(data: bytes | memoryview) -> bool:
    """A pack in another version's format (its magic is DLMPACK<n> with another n)."""
    return data[:7] == MAGIC[:7] and data[:8] != MAGIC


def encode_pack(
    rows: list[RowTokens], *, tokenizer_sha256: str, sequence_len: int, sources_digest: str
) -> bytes:
    """The pack of `rows` (distinct row ids, in run order), tokenized with this tokenizer
    for this `sequence_len`, the last of them made from the sources of this digest."""
    if rows:
        lengths = np.concatenate([r.lengths for r in rows])
        masked = np.concatenate([r.masked for r in rows])
        ids = np.concatenate([r.ids for r in rows])
    else:
        lengths = masked = np.zeros(0, dtype=np.uint32)
        ids = np.zeros(0, dtype=np.int32)
    width = id_width(ids)
    tokenizer, sources = bytes.fromhex(tokenizer_sha256), bytes.fromhex(sources_digest)
    if len(tokenizer) != TOKENIZER_LEN or len(sources) != SOURCES_LEN:
        raise ValueError("tokenizer_sha256 and sources_digest must be sha256 hex digests")
    row_ids = "".join(f"{r.row_id}\n" for r in rows).encode("ascii")
    head = (len(rows), len(lengths), width, sequence_len, len(ids), len(row_ids))
    body = b"".join(
        [
            MAGIC,
            _HEAD.pack(*head),
            tokenizer,
            sources,
            bytes.fromhex(token_stream_root([r.leaf for r in rows])),
            *(entry_key(r.row_id, tokenizer_sha256, sequence_len).encode("ascii") for r in rows),
            *(r.leaf for r in rows),
            np.asarray([len(r.lengths) for r in rows], dtype="<u4").tobytes(),
            encode_table(lengths, masked),
            encode_ids(ids, width),
            row_ids,
        ]
    )
    return body + checksum_digest(body)


def decode_pack(data: bytes | memoryview) -> Pack:
    """The pack's rows (arrays are views into `data`, read-only as `data` is: the file's
    bytes, or a read-only view of them from `store.read_large`); CorruptEntry if anything
    is off."""
    head = len(MAGIC) + _HEAD.size + TOKENIZER_LEN + SOURCES_LEN + ROOT_LEN
    if len(data) < head + CHECKSUM_LEN or data[: len(MAGIC)] != MAGIC:
        raise CorruptEntry("bad magic or truncated")
    n_rows, n_seqs, width, seq_len, n_tokens, ids_len = _HEAD.unpack_from(data, len(MAGIC))
    if width not in ID_DTYPES:
        raise CorruptEntry("bad header")
    sizes = [n_rows * KEY_LEN, n_rows * LEAF_LEN, n_rows * 4, n_seqs * TABLE_DTYPE.itemsize]
    if head + sum(sizes) + n_tokens * width + ids_len + CHECKSUM_LEN != len(data):
        raise CorruptEntry("length mismatch")
    verify_checksum(data)
    at = len(MAGIC) + _HEAD.size
    tokenizer = data[at : at + TOKENIZER_LEN].hex()
    at += TOKENIZER_LEN
    sources = data[at : at + SOURCES_LEN].hex()
    root = data[at + SOURCES_LEN : head].hex()
    at = head
    key_table = bytes(data[at : at + sizes[0]])
    at += sizes[0]
    leaf_table = bytes(data[at : at + sizes[1]])
    at += sizes[1]
    counts = np.frombuffer(data, dtype="<u4", count=n_rows, offset=at)
    at += sizes[2]
    table = np.frombuffer(data, dtype=TABLE_DTYPE, count=n_seqs, offset=at)
    at += sizes[3]
    ids = np.frombuffer(data, dtype=ID_DTYPES[width], count=n_tokens, offset=at)
    at += n_tokens * width
    row_ids = bytes(data[at : at + ids_len]).decode("ascii", "replace").split("\n")
    lengths, masked = table["length"], table["masked"]
    if (
        row_ids.pop() != ""
        or len(row_ids) != n_rows
        or int(counts.sum(dtype=np.int64)) != n_seqs
        or int(lengths.sum(dtype=np.int64)) != n_tokens
        or bool((masked > lengths).any())
    ):
        raise CorruptEntry("tables disagree")
    return Pack(
        tokenizer,
        seq_len,
        sources,
        row_ids,
        key_table,
        leaf_table,
        counts,
        lengths,
        masked,
        ids,
        root,
        len(data),
    )
