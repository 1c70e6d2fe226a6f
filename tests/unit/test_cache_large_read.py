"""A pack of `LARGE_READ` bytes or more is read into memory of its own
(`store.read_large`): its bytes exactly the file's, read-only, served as a pack like any
other, and a flipped byte in it is a corrupt pack (a miss, counted), never wrong tokens."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dlm_git.cache.entry import entry_key
from dlm_git.cache.pack import decode_pack, encode_pack
from dlm_git.cache.store import LARGE_READ, TokenCache, read_large
from dlm_git.fsutil import open_regular
from dlm_git.token_stream import RowTokens, Sequence

TOK = "0123456789abcdef" * 4
SRC = "fedcba9876543210" * 4
DLM_ID = "01M800GRBP0GEV3WAMXAHDD42B"


@pytest.mark.parametrize("size", [0, 1, LARGE_READ - 1, LARGE_READ, LARGE_READ + 4097])
def test_read_large_gives_the_file_bytes(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    data = os.urandom(size)
    path.write_bytes(data)
    with open_regular(path) as fh:
        got = read_large(fh)
    assert bytes(got) == data
    if size >= LARGE_READ:
        assert isinstance(got, memoryview) and got.readonly
        with pytest.raises(TypeError):
            got[0] = 0


def big_rows() -> list[RowTokens]:
    """Two rows whose pack is over `LARGE_READ` bytes (uint16 ids: 2 bytes each)."""
    rng = np.random.default_rng(28)
    rows = []
    for row_id, n in (("r1", 1_500_000), ("r2", 700_001)):
        ids = rng.integers(0, 60000, size=n, dtype=np.int32)
        windows = [ids[i : i + 4096] for i in range(0, n, 4096)]
        rows.append(RowTokens.from_sequences(row_id, [Sequence(row_id, w, w) for w in windows]))
    return rows


def test_a_large_pack_is_served_read_only_and_a_flipped_byte_is_a_miss(tmp_path: Path) -> None:
    rows = big_rows()
    data = encode_pack(rows, tokenizer_sha256=TOK, sequence_len=4096, sources_digest=SRC)
    assert len(data) >= LARGE_READ
    cache = TokenCache(tmp_path / "c")
    assert cache.write_pack(DLM_ID, data) == len(data)
    pack = cache.read_pack(DLM_ID)
    assert pack is not None and cache.corrupt == 0
    want = decode_pack(data)
    assert pack.root == want.root and pack.row_ids == ["r1", "r2"] and pack.size == len(data)
    assert pack.keys == [entry_key(r, TOK, 4096) for r in ("r1", "r2")]
    for name in ("counts", "lengths", "masked", "ids"):
        got = getattr(pack, name)
        np.testing.assert_array_equal(got, getattr(want, name))
        assert not got.flags.writeable, name
    stream = pack.stream()
    np.testing.assert_array_equal(stream[0].input_ids, rows[0].ids[:4096])
    path = cache.layout.pack_path(DLM_ID)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(flipped))
    assert cache.read_pack(DLM_ID) is None and cache.corrupt == 1
