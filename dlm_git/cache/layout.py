"""Where the token cache keeps its files, and what each file in it is.

Invariants:
- One place names the cache's files: an entry `entries/<first two hex chars of its
  key>/<key>.tok` (256 shards: 50K entries are ~200 per directory), a document's pack
  `packs/<dlm_id>.pack`, the index `cache.sqlite` and its lock `.lock`. A file being
  written has a tmp name ending `.tmp` (`dlm_git.fsutil.atomic_write_bytes`).
- The index names an entry by its key and a pack by `pack-<dlm_id>` (`index_key`);
  `path_of` maps such a name back to its file.
- `files()` is the one walk of the cache (the sweep and fsck use it): what the entry
  shards and the packs directory hold, sorted, each classified (`Kind`) by its name and
  place; a symbolic link where a shard should be is not descended.
- The cache directory is the user's `$DLM_GIT_CACHE_DIR`, else `token-cache` in the state
  directory all work trees of the repository share (`default_cache_dir`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from dlm_git.statedir import adopt_legacy, state_path

CACHE_NAME = "token-cache"
INDEX_NAME = "cache.sqlite"
LOCK_NAME = ".lock"
ENTRIES_DIR = "entries"
PACKS_DIR = "packs"
SUFFIX = ".tok"
PACK_SUFFIX = ".pack"
PACK_PREFIX = "pack-"
TMP_SUFFIX = ".tmp"


class Kind(StrEnum):
    ENTRY = "entry"
    PACK = "pack"
    TMP = "tmp"
    """Being written (or left by a writer that died)."""
    OTHER = "other"
    """Named like nothing the cache writes."""


@dataclass(frozen=True)
class CacheFile:
    """One directory entry of the cache (not necessarily a regular file)."""

    entry: os.DirEntry[str]
    kind: Kind
    key: str
    """The entry key, or the pack's dlm_id, its name gives ("" for tmp and other files)."""

    @property
    def path(self) -> Path:
        return Path(self.entry.path)

    @property
    def index_key(self) -> str | None:
        """Its name in the index (None for tmp and other files)."""
        if self.kind is Kind.ENTRY:
            return self.key
        return PACK_PREFIX + self.key if self.kind is Kind.PACK else None

    @property
    def misplaced(self) -> bool:
        """An entry outside its key's shard."""
        return self.kind is Kind.ENTRY and Path(self.entry.path).parent.name != self.key[:2]


class CacheLayout:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.entries_dir = self.root / ENTRIES_DIR
        self.packs_dir = self.root / PACKS_DIR
        self.index_path = self.root / INDEX_NAME
        self.lock_path = self.root / LOCK_NAME
        self._entries = str(self.entries_dir)

    def entry_path(self, key: str) -> str:
        return f"{self._entries}/{key[:2]}/{key}{SUFFIX}"

    def pack_path(self, dlm_id: str) -> Path:
        return self.packs_dir / f"{dlm_id}{PACK_SUFFIX}"

    def path_of(self, index_key: str) -> Path:
        if index_key.startswith(PACK_PREFIX):
            return self.pack_path(index_key.removeprefix(PACK_PREFIX))
        return Path(self.entry_path(index_key))

    def files(self) -> Iterator[CacheFile]:
        """Every directory entry in the entry shards, then in the packs directory."""
        for shard in _listing(self.entries_dir):
            if shard.is_dir(follow_symlinks=False):
                for entry in _listing(Path(shard.path)):
                    yield _classify(entry, SUFFIX, Kind.ENTRY)
        for entry in _listing(self.packs_dir):
            yield _classify(entry, PACK_SUFFIX, Kind.PACK)

    def ignore_in_git(self) -> None:
        """Keep the cache out of `git status` even where no .gitignore lists it."""
        marker = self.root / ".gitignore"
        if not marker.exists():
            with contextlib.suppress(OSError):
                marker.write_text("# dlm-git token cache: machine-local, never committed\n*\n")


def _listing(directory: Path) -> list[os.DirEntry[str]]:
    try:
        return sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []


def _classify(entry: os.DirEntry[str], suffix: str, kind: Kind) -> CacheFile:
    name = entry.name
    if name.endswith(TMP_SUFFIX):
        return CacheFile(entry, Kind.TMP, "")
    if name.endswith(suffix):
        return CacheFile(entry, kind, name.removesuffix(suffix))
    return CacheFile(entry, Kind.OTHER, "")


def default_cache_dir(repo_root: Path) -> Path:
    """`$DLM_GIT_CACHE_DIR` (the user's choice), else `token-cache` in the state directory
    all work trees of the repository share (`dlm_git.statedir`), where no commit can
    reach; a cache an older dlm-git kept in `<repo>/.dlm-git/` is moved there once."""
    env = os.environ.get("DLM_GIT_CACHE_DIR")
    if env:
        return Path(env)
    path = state_path(repo_root, CACHE_NAME, shared=True)
    adopt_legacy(repo_root, CACHE_NAME, path)
    return path
