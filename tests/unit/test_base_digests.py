"""The stat-keyed record of base tensor digests: a hit only while the file is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.base import digests
from dlm_git.base.digests import RECORD_NAME, DigestRecord
from dlm_git.hashing import digest_safetensors


def write_weights(path: Path, fill: float) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.full((4, 4), fill), "b": torch.zeros(3)}, str(path))


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths `digest_safetensors` was called on (it still runs)."""
    calls: list[Path] = []

    def counting(path: Path) -> object:
        calls.append(path)
        return digest_safetensors(path)

    monkeypatch.setattr(digests, "digest_safetensors", counting)
    return calls


def test_an_unchanged_file_is_hashed_once_across_processes(tmp_path: Path, hashed: list) -> None:
    weights = tmp_path / "model.safetensors"
    write_weights(weights, 1.0)
    first = DigestRecord(tmp_path / "cache")
    expected = list(digest_safetensors(weights).tensors)
    assert first.tensors(weights) == expected
    first.save()
    again = DigestRecord(tmp_path / "cache")  # as a later process reads it
    assert again.tensors(weights) == expected
    assert len(hashed) == 1


def test_a_rewritten_file_of_the_same_size_is_hashed_again(tmp_path: Path, hashed: list) -> None:
    weights = tmp_path / "model.safetensors"
    write_weights(weights, 1.0)
    record = DigestRecord(tmp_path / "cache")
    before = record.tensors(weights)
    record.save()
    size = weights.stat().st_size
    write_weights(weights, 2.0)  # same shapes, same size, other bytes
    assert weights.stat().st_size == size
    after = DigestRecord(tmp_path / "cache").tensors(weights)
    assert after != before and after == list(digest_safetensors(weights).tensors)
    assert len(hashed) == 2


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[]", b'{"x": 1}', b"{}", None],
)
def test_a_damaged_record_is_ignored(tmp_path: Path, content: bytes | None) -> None:
    weights = tmp_path / "model.safetensors"
    write_weights(weights, 1.0)
    cache = tmp_path / "cache"
    cache.mkdir()
    real = str(weights.resolve())
    st = weights.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    import json

    # None: a well-formed entry for this very file whose digest is not a string
    malformed = json.dumps({real: [stamp, [["w", "F32", [4, 4], 64, 7]]]}).encode()
    forged = content if content is not None else malformed
    (cache / RECORD_NAME).write_bytes(forged)
    assert DigestRecord(cache).tensors(weights) == list(digest_safetensors(weights).tensors)
