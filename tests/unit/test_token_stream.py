"""TokenStream and RowTokens: the columnar form of a document's sequences.

What the token cache and training rely on: a stream built from rows, from a pack's arrays
or from explicit labels gives the same sequences (int32 ids, labels with the masked
prefix), the same per-row leaves and root as the canonical payload, and nothing a caller
holds can be changed through it.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from dlm_git.token_stream import (
    IGNORE_INDEX,
    RowTokens,
    Sequence,
    TokenStream,
    token_stream_root,
)


def seq(row_id: str, ids: list[int], masked: int = 0) -> Sequence:
    arr = np.asarray(ids, dtype=np.int32)
    labels = arr.copy()
    labels[:masked] = IGNORE_INDEX
    return Sequence(row_id, arr, labels)


def leaf_by_hand(row_id: str, sequences: list[Sequence]) -> bytes:
    """sha256(0x00 || row_id || 0x00 || u32 count || u32 lengths || i32 ids || i32 labels)."""
    payload = len(sequences).to_bytes(4, "little")
    payload += b"".join(len(s.input_ids).to_bytes(4, "little") for s in sequences)
    for part in ("input_ids", "labels"):
        for s in sequences:
            payload += b"".join(int(t).to_bytes(4, "little", signed=True) for t in getattr(s, part))
    return hashlib.sha256(b"\x00" + row_id.encode() + b"\x00" + payload).digest()


ROWS = {
    "a": [seq("a", [1, 2, 3, 4]), seq("a", [5, 6])],
    "b": [seq("b", [7, 8, 9], masked=2)],
    "c": [],  # a row that made no sequence
    "d": [seq("d", [70_000, 3], masked=2)],  # fully masked, an id beyond uint16
}


def test_rows_give_the_sequences_and_leaves_they_were_made_from() -> None:
    rows = [RowTokens.from_sequences(r, s) for r, s in ROWS.items()]
    for row, (row_id, sequences) in zip(rows, ROWS.items(), strict=True):
        assert row.leaf == leaf_by_hand(row_id, sequences)
    stream = TokenStream.from_rows(rows)
    want = [s for group in ROWS.values() for s in group]
    assert len(stream) == len(want) == 4
    assert stream.tokens == sum(len(s.input_ids) for s in want)
    assert stream.row_counts == [("a", 2), ("b", 1), ("c", 0), ("d", 1)]
    for got, exp in zip(stream, want, strict=True):
        assert got.row_id == exp.row_id
        assert got.input_ids.dtype == got.labels.dtype == np.int32
        np.testing.assert_array_equal(got.input_ids, exp.input_ids)
        np.testing.assert_array_equal(got.labels, exp.labels)
    assert stream.leaves() == [r.leaf for r in rows]
    np.testing.assert_array_equal(stream[-1].labels, [IGNORE_INDEX, IGNORE_INDEX])
    with pytest.raises(IndexError):
        stream[4]
    # explicit labels (a tokens/ directory) give the same stream
    again = TokenStream.from_labels(
        stream.row_ids, stream.counts, stream.lengths, stream.ids, stream.labels
    )
    assert again.leaves() == stream.leaves()
    assert token_stream_root(again.leaves()) == token_stream_root([r.leaf for r in rows])


def test_stream_arrays_are_read_only_and_never_the_callers() -> None:
    ids = np.asarray([1, 2, 3], dtype=np.int32)
    stream = TokenStream(["r"], [1], np.asarray([3]), np.asarray([1]), ids)
    assert ids.flags.writeable  # the caller's array is left as it was
    item = stream[0]
    item.input_ids[0] = 99  # a sequence is the caller's own copy
    assert stream[0].input_ids[0] == 1
    np.testing.assert_array_equal(stream.labels, [IGNORE_INDEX, 2, 3])


@pytest.mark.parametrize(
    "labels",
    [
        [1, IGNORE_INDEX, 3],  # a masked position after a kept one
        [1, 2, 4],  # a label that is not the id
        [IGNORE_INDEX, 2, 5],
    ],
)
def test_labels_other_than_a_masked_prefix_are_refused(labels: list[int]) -> None:
    ids = np.asarray([1, 2, 3], dtype=np.int32)
    bad = np.asarray(labels, dtype=np.int32)
    with pytest.raises(ValueError, match="masked prefix"):
        RowTokens.from_sequences("r", [Sequence("r", ids, bad)])
    with pytest.raises(ValueError, match="masked prefix"):
        TokenStream.from_labels(["r"], [1], np.asarray([3]), ids, bad)


def test_inconsistent_shapes_are_refused() -> None:
    ids = np.asarray([1, 2, 3], dtype=np.int32)
    with pytest.raises(ValueError):
        TokenStream(["r"], [2], np.asarray([3]), np.asarray([0]), ids)  # counts vs sequences
    with pytest.raises(ValueError):
        TokenStream(["r"], [1], np.asarray([4]), np.asarray([0]), ids)  # lengths vs ids
    with pytest.raises(ValueError):
        TokenStream(["r"], [1], np.asarray([3]), np.asarray([4]), ids)  # mask past the end
