"""The hooks' stat-keyed adapter hash cache: a hit reads nothing, any stat change is a
miss, a file still within the timestamp tick it was hashed in is never trusted (the race
`dlm_git.statcache` guards), and a damaged cache is ignored and rewritten."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import sha256_bytes
from dlm_git.hooks.hashcache import FORMAT, HashCache
from dlm_git.statcache import RACY_NS

CACHE = Path(".dlm-git") / "hash-cache.json"  # outside git: the state dir is <root>/.dlm-git


def past_racy_window() -> None:
    """Files written just now are racily clean (hashed again next time); wait them out."""
    time.sleep(RACY_NS / 1e9 + 0.2)


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file last changed more than the racy window ago (never written by the tests)."""
    f = tmp_path_factory.mktemp("aged") / "adapter.bin"
    f.write_bytes(b"x")
    past_racy_window()
    return f


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files hashed from now on (every hash goes through file_digest)."""
    calls: list[str] = []
    real = hashlib.file_digest

    def counting(fh: Any, name: str) -> Any:
        calls.append(fh.name)
        return real(fh, name)

    monkeypatch.setattr(hashlib, "file_digest", counting)
    return calls


def test_hash_cache_hits_without_reading_and_misses_on_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc")
    past_racy_window()
    calls = count_reads(monkeypatch)
    cache = HashCache(tmp_path)
    assert cache.sha256(f) == sha256_bytes(b"abc")
    cache.save()
    assert (tmp_path / CACHE).is_file()

    again = HashCache(tmp_path)
    assert again.sha256(f) == sha256_bytes(b"abc")
    assert len(calls) == 1  # hit: not read again

    f.write_bytes(b"abd")  # same size; mtime/ctime move
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert again.sha256(f) == sha256_bytes(b"abd")
    assert len(calls) == 2


def test_a_file_hashed_within_its_timestamp_tick_is_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written just now, the file could be rewritten within the same tick after it was
    hashed, its stat unchanged: the cache never answers for it."""
    f = tmp_path / "adapter_model.safetensors"
    f.write_bytes(b"A" * 64)
    calls = count_reads(monkeypatch)
    first = HashCache(tmp_path)
    assert first.sha256(f) == sha256_bytes(b"A" * 64)
    first.save()
    second = HashCache(tmp_path)
    assert second.sha256(f) == sha256_bytes(b"A" * 64)
    assert len(calls) == 2  # read again: its stat cannot tell a same-tick rewrite


def test_a_record_written_within_the_files_tick_never_answers_for_it(tmp_path: Path) -> None:
    """The record says the file held other bytes at its very stat: written in the same
    tick as the file's last change (as a same-tick rewrite after hashing leaves it), it is
    not trusted, and the stale digest is never returned."""
    f = tmp_path / "adapter_model.safetensors"
    f.write_bytes(b"B" * 64)
    st = f.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    stale = {str(f.resolve()): [*stamp, "sha256:" + sha256_bytes(b"A" * 64)]}
    (tmp_path / CACHE).parent.mkdir()
    (tmp_path / CACHE).write_text(json.dumps({"format": FORMAT, "entries": stale}))
    assert HashCache(tmp_path).sha256(f) == sha256_bytes(b"B" * 64)


@pytest.mark.parametrize(
    "content",
    [
        "{broken",
        "[1, 2]",
        '{"/x": [1, 2, 3, 4, 5]}',
        json.dumps({"format": FORMAT, "entries": {"/x": [1, 2, 3, 4, "5", "sha256:x"]}}),
    ],
)
def test_damaged_hash_cache_is_ignored(tmp_path: Path, aged: Path, content: str) -> None:
    (tmp_path / CACHE).parent.mkdir()
    (tmp_path / CACHE).write_text(content)
    cache = HashCache(tmp_path)
    assert cache.sha256(aged) == sha256_bytes(b"x")
    cache.save()
    data = json.loads((tmp_path / CACHE).read_text())
    assert data["format"] == FORMAT
    assert data["entries"][str(aged.resolve())][-1] == "sha256:" + sha256_bytes(b"x")


def test_hash_cache_entry_with_wrong_shape_is_rehashed(tmp_path: Path, aged: Path) -> None:
    st = aged.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    (tmp_path / CACHE).parent.mkdir()
    (tmp_path / CACHE).write_text(
        json.dumps({"format": FORMAT, "entries": {str(aged.resolve()): stamp}})  # no digest
    )
    assert HashCache(tmp_path).sha256(aged) == sha256_bytes(b"x")
