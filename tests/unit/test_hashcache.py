"""The hooks' stat-keyed adapter hash cache."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import sha256_bytes
from dlm_git.hooks.hashcache import HashCache

# --------------------------------------------------------------------------- hash cache


def test_hash_cache_hits_without_reading_and_misses_on_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = hashlib.file_digest

    def counting(fh: Any, name: str) -> Any:
        calls.append(fh.name)
        return real(fh, name)

    monkeypatch.setattr(hashlib, "file_digest", counting)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc")
    cache = HashCache(tmp_path)
    assert cache.sha256(f) == sha256_bytes(b"abc")
    cache.save()
    assert (tmp_path / ".dlm-git" / "hash-cache.json").is_file()

    again = HashCache(tmp_path)
    assert again.sha256(f) == sha256_bytes(b"abc")
    assert len(calls) == 1 and not again.dirty  # hit: not read again

    f.write_bytes(b"abd")  # same size; mtime/ctime move
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert again.sha256(f) == sha256_bytes(b"abd")
    assert len(calls) == 2 and again.dirty


@pytest.mark.parametrize("content", ["{broken", "[1, 2]", '{"/x": [1, 2, 3, 4, 5]}'])
def test_damaged_hash_cache_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / ".dlm-git").mkdir()
    (tmp_path / ".dlm-git" / "hash-cache.json").write_text(content)
    f = tmp_path / "x"
    f.write_bytes(b"x")
    cache = HashCache(tmp_path)
    assert cache.sha256(f) == sha256_bytes(b"x")
    cache.save()
    data = json.loads((tmp_path / ".dlm-git" / "hash-cache.json").read_text())
    assert data[str(f.resolve())][4] == sha256_bytes(b"x")


def test_hash_cache_entry_with_wrong_shape_is_rehashed(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_bytes(b"x")
    st = f.stat()
    (tmp_path / ".dlm-git").mkdir()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    (tmp_path / ".dlm-git" / "hash-cache.json").write_text(
        json.dumps({str(f.resolve()): stamp})  # no digest
    )
    assert HashCache(tmp_path).sha256(f) == sha256_bytes(b"x")
