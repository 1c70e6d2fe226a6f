"""The held-out split: the rows a document keeps out of training (`training.val_fraction`).

Invariants:
- A row's fate is a pure function of (seed, section id, the row's index within its
  section), the original `dlm` tool's rule: the first 8 bytes of
  `sha256(f"{seed}\\x00{section_id}\\x00{index}".encode())`, read as a big-endian unsigned
  integer, below `int(fraction * 2**64)` hold the row out. Adding, removing or moving
  another section never changes a row's fate.
- dlm-git has one row per section (each prose block, instruction pair and source file is
  its own section), so every row's index is 0: identical content has the same section id
  and so the same fate, and no held-out text is trained under another copy.
- Off (`fraction` None): nothing is held out, and nothing here runs.
- Splitting keeps order: the trained rows and the held-out rows are each in document
  order, and a token stream split by rows has each row's sequences exactly as tokenized.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

from dlm_git.token_stream import TokenStream
from dlm_git.train.rows import Row

ROW_INDEX = 0
"""A row's index within its section: dlm-git makes one row per section."""


def is_held_out(section_id: str, index: int, seed: int, fraction: float | None) -> bool:
    """Whether the row `index` of section `section_id` is held out under (seed, fraction)."""
    if not fraction:
        return False
    key = f"{seed}\x00{section_id}\x00{index}".encode()
    bucket = int.from_bytes(hashlib.sha256(key).digest()[:8], "big", signed=False)
    return bucket < int(fraction * (1 << 64))


def split_rows(
    rows: Iterable[Row], seed: int, fraction: float | None
) -> tuple[list[Row], list[Row]]:
    """(trained, held out), each in the order of `rows`."""
    trained: list[Row] = []
    held: list[Row] = []
    for row in rows:
        (held if is_held_out(row.section_id, ROW_INDEX, seed, fraction) else trained).append(row)
    return trained, held


def split_stream(
    stream: TokenStream, rows: Sequence[Row], seed: int, fraction: float
) -> tuple[TokenStream, TokenStream]:
    """The token stream of `rows` (one stream row per row, in order) split into (trained,
    held out); ValueError when the stream was not made from these rows."""
    if stream.row_ids != [r.row_id for r in rows]:
        raise ValueError("the token stream's rows are not the document's rows")
    held = np.asarray(
        [is_held_out(r.section_id, ROW_INDEX, seed, fraction) for r in rows], dtype=bool
    )
    return _take(stream, ~held), _take(stream, held)


def _take(stream: TokenStream, keep: np.ndarray) -> TokenStream:
    """The rows of `stream` where `keep` is true, their sequences unchanged."""
    counts = np.asarray(stream.counts, dtype=np.int64)
    seq_keep = np.repeat(keep, counts)
    lengths = stream.lengths
    tok_keep = np.repeat(seq_keep, lengths)
    return TokenStream(
        [r for r, k in zip(stream.row_ids, keep, strict=True) if k],
        [int(c) for c, k in zip(counts, keep, strict=True) if k],
        lengths[seq_keep],
        stream.masked[seq_keep],
        stream.ids[tok_keep],
    )
