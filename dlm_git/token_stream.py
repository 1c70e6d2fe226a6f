"""Token streams: a document's training sequences as flat arrays, and one row's tokens.

Invariants:
- A `TokenStream` holds every sequence of a document in document order: `ids` and
  `labels` are read-only int32 arrays, sequence i spans `starts[i]:starts[i+1]`, and
  `row_counts` says how many consecutive sequences each row made. `stream[i]` is a
  `Sequence` of views; nothing is copied or allocated per sequence until it is asked for.
- Labels are the ids with a masked prefix: the first `masked` positions of a sequence are
  IGNORE_INDEX (none for prose windows, the prompt for chat rows), the rest equal the ids.
  Every sequence the tokenizer makes has that shape; `RowTokens.from_sequences` refuses
  any other, which is what lets the token cache store ids and one mask length only.
- The token stream root is the Merkle root with one leaf per row, rows in document order:
  `row_id || 0x00 || payload` where `payload` is
  `u32le(count) || count x u32le(length) || all input_ids i32le || all labels i32le`
  over the row's sequences in order. A `RowTokens` carries its row's leaf hash, computed
  once when the row is tokenized (and kept, checksummed, by the cache).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import SupportsIndex

import numpy as np

from dlm_git.merkle import merkle_leaf_hash, merkle_root_from_leaf_hashes

IGNORE_INDEX = -100


@dataclass(frozen=True)
class Sequence:
    row_id: str
    input_ids: np.ndarray  # int32, 1-D
    labels: np.ndarray  # int32, 1-D, IGNORE_INDEX where masked


def row_payload(lengths: np.ndarray, ids: np.ndarray, labels: np.ndarray) -> bytes:
    """The canonical encoding of one row's sequences (see the module docstring)."""
    return (
        struct.pack("<I", len(lengths))
        + np.asarray(lengths, dtype="<u4").tobytes()
        + np.asarray(ids, dtype="<i4").tobytes()
        + np.asarray(labels, dtype="<i4").tobytes()
    )


def row_leaf_hash(row_id: str, payload: bytes | memoryview) -> bytes:
    return merkle_leaf_hash(row_id.encode("ascii"), b"\x00", payload)


def token_stream_root(leaf_hashes: list[bytes]) -> str:
    """Merkle root over per-row leaf hashes (`row_leaf_hash`), rows in document order."""
    return merkle_root_from_leaf_hashes(leaf_hashes)


def masked_prefix(seq: Sequence) -> int:
    """How many leading labels are IGNORE_INDEX; ValueError unless the rest equal the ids."""
    ids, labels = seq.input_ids, seq.labels
    if len(ids) != len(labels):
        raise ValueError(f"row {seq.row_id}: ids and labels differ in length")
    kept = np.flatnonzero(labels != IGNORE_INDEX)
    m = int(kept[0]) if len(kept) else len(labels)
    if not np.array_equal(labels[m:], ids[m:]):
        raise ValueError(f"row {seq.row_id}: labels are not the ids with a masked prefix")
    return m


@dataclass(frozen=True)
class RowTokens:
    """One row's sequences: lengths, masked prefix lengths, ids back to back, and the row's
    leaf hash. The arrays may be views into a cache file (ids possibly uint16)."""

    row_id: str
    lengths: np.ndarray  # uint32, one per sequence
    masked: np.ndarray  # uint32, one per sequence
    ids: np.ndarray  # non-negative integers, sum(lengths) of them
    leaf: bytes

    @classmethod
    def from_sequences(cls, row_id: str, sequences: list[Sequence]) -> RowTokens:
        lengths = np.asarray([len(s.input_ids) for s in sequences], dtype=np.uint32)
        masked = np.asarray([masked_prefix(s) for s in sequences], dtype=np.uint32)
        if sequences:
            ids = np.concatenate([s.input_ids for s in sequences]).astype(np.int32, copy=False)
            labels = np.concatenate([s.labels for s in sequences]).astype(np.int32, copy=False)
        else:
            ids = labels = np.zeros(0, dtype=np.int32)
        if len(ids) and int(ids.min()) < 0:
            raise ValueError(f"row {row_id}: negative token id")
        return cls(
            row_id, lengths, masked, ids, row_leaf_hash(row_id, row_payload(lengths, ids, labels))
        )

    def sequences(self) -> list[Sequence]:
        return list(TokenStream.from_rows([self]))


class TokenStream:
    """Every sequence of a document, in flat read-only arrays (see the module docstring).

    The ids are kept as they came (int32 from the tokenizer or a `tokens/` directory,
    possibly uint16 views into a cache pack), with one masked prefix length per sequence;
    `stream[i]` converts just that sequence to int32 ids and labels. So a warm run builds
    no full-size array at all, and training pays per sequence it reads."""

    def __init__(
        self,
        row_ids: list[str],
        counts: list[int],
        lengths: np.ndarray,
        masked: np.ndarray,
        ids: np.ndarray,
    ) -> None:
        lengths = np.asarray(lengths, dtype=np.int64)
        masked = np.asarray(masked, dtype=np.int64)
        if len(row_ids) != len(counts) or sum(counts) != len(lengths):
            raise ValueError("row counts and sequences disagree")
        if int(lengths.sum()) != len(ids) or len(masked) != len(lengths):
            raise ValueError("token arrays and lengths disagree")
        if bool((masked > lengths).any()) or bool((masked < 0).any()):
            raise ValueError("a masked prefix is longer than its sequence")
        self.row_ids = row_ids
        self.counts = counts
        self.starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self.masked = masked
        self._ids = np.asarray(ids).view()  # a view: read-only here, the caller's untouched
        self._ids.setflags(write=False)
        self._seq_row = np.repeat(np.arange(len(row_ids)), counts)

    @classmethod
    def from_rows(cls, rows: list[RowTokens]) -> TokenStream:
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return cls([], [], empty, empty, empty.astype(np.int32))
        return cls(
            [r.row_id for r in rows],
            [len(r.lengths) for r in rows],
            np.concatenate([r.lengths for r in rows]),
            np.concatenate([r.masked for r in rows]),
            np.concatenate([r.ids for r in rows]),
        )

    @classmethod
    def from_labels(
        cls,
        row_ids: list[str],
        counts: list[int],
        lengths: np.ndarray,
        ids: np.ndarray,
        labels: np.ndarray,
    ) -> TokenStream:
        """From explicit labels; ValueError unless each sequence's are its ids with a masked
        prefix."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != len(ids) or len(ids) != len(labels):
            raise ValueError("token arrays and lengths disagree")
        seq_of = np.repeat(np.arange(len(lengths)), lengths)
        is_masked = labels == IGNORE_INDEX
        masked = np.bincount(seq_of, weights=is_masked, minlength=len(lengths)).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        position = np.arange(len(ids)) - starts[seq_of] if len(ids) else seq_of
        if not np.array_equal(is_masked, position < masked[seq_of]) or not np.array_equal(
            labels[~is_masked], ids[~is_masked]
        ):
            raise ValueError("labels are not the ids with a masked prefix")
        return cls(row_ids, counts, lengths, masked, ids)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, index: SupportsIndex) -> Sequence:
        i = operator.index(index)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sequence index out of range")
        start, end = int(self.starts[i]), int(self.starts[i + 1])
        ids = self._ids[start:end].astype(np.int32)
        labels = ids.copy()
        labels[: int(self.masked[i])] = IGNORE_INDEX
        row_id = self.row_ids[int(self._seq_row[i])]
        return Sequence(row_id, ids, labels)

    def __iter__(self) -> Iterator[Sequence]:
        for i in range(len(self)):
            yield self[i]

    @property
    def tokens(self) -> int:
        return len(self._ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    @property
    def ids(self) -> np.ndarray:
        """All input ids, int32 (a new array)."""
        return self._ids.astype(np.int32)

    @property
    def labels(self) -> np.ndarray:
        """All labels, int32 (a new array)."""
        labels = self.ids
        for i in np.flatnonzero(self.masked):
            labels[self.starts[i] : self.starts[i] + self.masked[i]] = IGNORE_INDEX
        return labels

    @property
    def row_counts(self) -> list[tuple[str, int]]:
        return list(zip(self.row_ids, self.counts, strict=True))

    def leaves(self) -> list[bytes]:
        """Each row's leaf hash, recomputed from the arrays."""
        ids, labels = self.ids, self.labels
        out = []
        seq = 0
        for row_id, count in zip(self.row_ids, self.counts, strict=True):
            start, end = int(self.starts[seq]), int(self.starts[seq + count])
            lengths = np.diff(self.starts[seq : seq + count + 1])
            out.append(
                row_leaf_hash(row_id, row_payload(lengths, ids[start:end], labels[start:end]))
            )
            seq += count
        return out
