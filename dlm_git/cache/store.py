"""The token cache store: sharded entry files plus one SQLite index.

Invariants:
- An entry is addressed by `key(row_id, tokenizer_sha256, sequence_len)`; any of the
  three changing gives another key, so a stale entry can never be returned.
- Entry files live in `entries/<first two hex chars>/<key>.tok` (256 shards: 50K entries
  are ~200 per directory). They are written with a unique tmp name, fsync and
  `os.replace`, so readers never see a partial entry; a reader needs no lock.
- The SQLite index (`cache.sqlite`) records each entry's size and last access, so
  eviction and `cache show` never walk the directory tree. Index updates, eviction,
  prune and clear happen under one file lock, so concurrent processes cannot corrupt it.
  It is written with `synchronous=OFF` (no fsync per run): the index only describes the
  entry files, so an OS crash can at worst lose or damage it, and a damaged index is
  replaced by an empty one whose entries are listed again as runs use them.
- Bounded: after a run, least-recently-used entries are evicted until the cache fits
  `max_bytes`; entries used by that run are never evicted by it.
- Cache failures are never fatal and never change results: a missing, truncated or
  corrupted entry is a miss and gets rewritten.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, open_regular
from dlm_git.statedir import adopt_legacy, state_path

if TYPE_CHECKING:  # entries decode to numpy arrays: imported where entries are read, so
    # `cache show|prune|clear` and `dlm-git show` work on a core install (no numpy)
    from dlm_git.cache.pack import Pack
    from dlm_git.token_stream import RowTokens

T = TypeVar("T")
CACHE_NAME = "token-cache"
INDEX_NAME = "cache.sqlite"
PACKS_DIR = "packs"
PACK_PREFIX = "pack-"
ACCESS_GRANULARITY_NS = 3600 * 10**9
LOCK_NAME = ".lock"
ENTRIES_DIR = "entries"
SUFFIX = ".tok"
TMP_SUFFIX = ".tmp"
SWEEP_GRACE_SECONDS = 600
SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    last_access_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_lru ON entries (last_access_ns);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dlm_id TEXT NOT NULL,
    finished_ns INTEGER NOT NULL,
    total_rows INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    misses INTEGER NOT NULL,
    corrupt INTEGER NOT NULL,
    tokenize_seconds REAL NOT NULL,
    cache_bytes INTEGER NOT NULL,
    evicted INTEGER NOT NULL
);
"""


def _configure(conn: sqlite3.Connection) -> None:
    """Every connection that writes the index: a rollback journal truncated after each
    transaction (a WAL index costs a checkpoint and two files' creation and removal on
    every close, and a warm run is one short transaction), no fsync (see above)."""
    conn.execute("PRAGMA journal_mode=TRUNCATE")
    conn.execute("PRAGMA synchronous=OFF")


def _ignore_in_git(root: Path) -> None:
    """Keep the cache out of `git status` even in a repo whose .gitignore doesn't list it."""
    marker = root / ".gitignore"
    if not marker.exists():
        with contextlib.suppress(OSError):
            marker.write_text("# dlm-git token cache: machine-local, never committed\n*\n")


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


@dataclass(frozen=True)
class CacheStats:
    entries: int
    bytes: int


@dataclass(frozen=True)
class RunMetrics:
    dlm_id: str
    total_rows: int
    hits: int
    misses: int
    corrupt: int
    tokenize_seconds: float
    cache_bytes: int
    evicted: int
    finished_ns: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.total_rows if self.total_rows else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "total_rows": self.total_rows,
            "hits": self.hits,
            "misses": self.misses,
            "corrupt": self.corrupt,
            "hit_rate": round(self.hit_rate, 4),
            "tokenize_seconds": round(self.tokenize_seconds, 4),
            "cache_bytes": self.cache_bytes,
            "evicted": self.evicted,
        }


class TokenCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.entries_dir = self.root / ENTRIES_DIR
        self._entries = str(self.entries_dir)
        self.corrupt = 0

    # --- entries (no lock needed) ---------------------------------------------------------

    def path_of(self, key: str) -> Path:
        if key.startswith(PACK_PREFIX):
            return self.pack_path(key.removeprefix(PACK_PREFIX))
        return Path(self._path(key))

    def _path(self, key: str) -> str:
        return f"{self._entries}/{key[:2]}/{key}{SUFFIX}"

    def get(self, key: str, row_id: str) -> RowTokens | None:
        """The row's tokens from its entry file; None on a miss (absent or corrupt)."""
        from dlm_git.cache.entry import decode_entry

        return self._load(self._path(key), lambda data: decode_entry(data, key, row_id))

    # --- per-document packs (see pack.py) ------------------------------------------------

    def pack_path(self, dlm_id: str) -> Path:
        return self.root / PACKS_DIR / f"{dlm_id}.pack"

    def read_pack(self, dlm_id: str) -> Pack | None:
        """The document's pack; None if there is none, it is corrupt (counted), or it is
        another version's (written by another dlm-git: not corrupt, just rewritten)."""
        from dlm_git.cache.pack import decode_pack, is_other_pack_version

        def decode(data: bytes) -> Pack | None:
            return None if is_other_pack_version(data) else decode_pack(data)

        return self._load(self.pack_path(dlm_id), decode)

    def _load(self, path: str | Path, decode: Callable[[bytes], T | None]) -> T | None:
        """`decode` of the file's bytes; None if it cannot be read or is corrupt (counted)."""
        from dlm_git.cache.entry import CorruptEntry

        try:
            with open_regular(path, follow_symlinks=False) as fh:
                data = fh.read() or b""
        except (OSError, NotRegularFile):  # absent, unreadable, or a FIFO or link: a miss
            return None
        try:
            return decode(data)
        except CorruptEntry:
            self.corrupt += 1
            return None

    def write_pack(self, dlm_id: str, data: bytes) -> int:
        """Write the document's pack (`encode_pack`) atomically; returns its size (0 if the
        write failed)."""
        try:
            atomic_write_bytes(self.pack_path(dlm_id), data)
        except OSError:
            return 0
        return len(data)

    def put(self, key: str, data: bytes) -> int:
        """Write an encoded entry atomically; returns its size (0 if the write failed)."""
        try:
            atomic_write_bytes(self.path_of(key), data, sync_dir=False)
        except OSError:
            return 0
        return len(data)

    # --- index (under the file lock) -----------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the index under the file lock. An index that turns out to be
        damaged (not a database, a malformed page) is removed before the error propagates,
        so the next transaction starts a new one (see `_in_index`)."""
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        _ignore_in_git(self.root)
        with FileLock(str(self.root / LOCK_NAME), timeout=120):
            try:
                conn = self._open_index()
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError):
                    raise
                # Not a database: start a new index. Entry files it listed become orphans,
                # listed again when used or swept by prune/clear.
                self._remove_index()
                conn = self._open_index()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if not isinstance(exc, sqlite3.OperationalError):
                    conn.close()
                    self._remove_index()
                raise
            finally:
                conn.close()

    def _remove_index(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):  # -wal, -shm: an index of an older version
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.root / INDEX_NAME}{suffix}")

    def _in_index(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one `locked` transaction, run again once on a new index if the index
        was damaged: a cache failure is never fatal."""
        try:
            with self.locked() as conn:
                return work(conn)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
        with self.locked() as conn:
            return work(conn)

    def _open_index(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.root / INDEX_NAME, timeout=60, isolation_level=None)
        try:
            _configure(conn)
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _read_conn(self) -> sqlite3.Connection | None:
        if not (self.root / INDEX_NAME).is_file():
            return None
        conn = sqlite3.connect(f"file:{self.root / INDEX_NAME}?mode=ro", uri=True, timeout=60)
        return conn

    def record_run(
        self,
        used: Collection[str],
        written: dict[str, int],
        max_bytes: int,
        metrics: dict[str, object],
        *,
        served_by: str | None = None,
    ) -> RunMetrics:
        """Refresh last access of used entries, add written ones, evict LRU, log the run.

        Last access is kept to within ACCESS_GRANULARITY_NS: an entry touched less than half
        of it ago needs no write, which keeps a warm run's index update small. `served_by`
        names the pack that served every used key: its entries are refreshed whenever it
        is, so while the pack itself is fresh they are too and are not looked up at all.
        """
        now = time.time_ns()
        fresh = now - ACCESS_GRANULARITY_NS // 2
        if served_by is not None and not written:
            logged = self._record_served_run(served_by, fresh, max_bytes, metrics, now)
            if logged is not None:
                return logged
        written_keys = set(written)
        used_keys = [k for k in dict.fromkeys(used) if k not in written_keys]

        def work(conn: sqlite3.Connection) -> RunMetrics:
            stale = dict(written)
            keys = used_keys
            if served_by is not None and self._is_fresh(conn, served_by, fresh):
                keys = []
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                known = {
                    k: (size, access)
                    for k, size, access in conn.execute(
                        f"SELECT key, size, last_access_ns FROM entries WHERE key IN ({marks})",
                        chunk,
                    )
                }
                for k in chunk:
                    if k in known:
                        if known[k][1] < fresh:
                            stale[k] = known[k][0]
                        continue
                    # Used but not listed (the index was rebuilt): list the file if it is
                    # there. A hit served from a pack whose entry file is gone (evicted,
                    # pruned) is not re-listed: the index never counts bytes not on disk.
                    with contextlib.suppress(OSError):
                        stale[k] = os.stat(self.path_of(k)).st_size
            conn.executemany(
                "INSERT INTO entries(key, size, last_access_ns) VALUES (?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET size=excluded.size, "
                "last_access_ns=excluded.last_access_ns",
                [(k, size, now) for k, size in stale.items() if size > 0],
            )
            evicted = self._evict(conn, max_bytes, protected=set(used) | written_keys)
            return self._log_run(conn, metrics, now, self._total(conn), evicted)

        return self._in_index(work)

    def _record_served_run(
        self,
        served_by: str,
        fresh: int,
        max_bytes: int,
        metrics: dict[str, object],
        now: int,
    ) -> RunMetrics | None:
        """Log a run served by a fresh pack that wrote nothing, in one SQLite transaction
        without the file lock: such a run has no index row or file to change and nothing to
        evict, and SQLite serializes the transaction with every other writer. None (and
        nothing written) if the run needs more: the pack is stale, the cache is over
        `max_bytes`, or the index is missing or unusable."""
        if not (self.root / INDEX_NAME).is_file():
            return None
        try:
            conn = sqlite3.connect(self.root / INDEX_NAME, timeout=60, isolation_level=None)
        except sqlite3.Error:
            return None
        try:
            _configure(conn)
            conn.execute("BEGIN IMMEDIATE")
            total = self._total(conn)
            if total <= max_bytes and self._is_fresh(conn, served_by, fresh):
                run = self._log_run(conn, metrics, now, total, evicted=0)
                conn.execute("COMMIT")
                return run
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            return None
        finally:
            conn.close()
        return None

    @staticmethod
    def _is_fresh(conn: sqlite3.Connection, key: str, fresh: int) -> bool:
        query = "SELECT last_access_ns FROM entries WHERE key = ?"
        row = conn.execute(query, (key,)).fetchone()
        return row is not None and row[0] >= fresh

    @staticmethod
    def _total(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0])

    def _log_run(
        self,
        conn: sqlite3.Connection,
        metrics: dict[str, object],
        now: int,
        cache_bytes: int,
        evicted: int,
    ) -> RunMetrics:
        run = RunMetrics(
            dlm_id=str(metrics["dlm_id"]),
            total_rows=int(metrics["total_rows"]),  # type: ignore[call-overload]
            hits=int(metrics["hits"]),  # type: ignore[call-overload]
            misses=int(metrics["misses"]),  # type: ignore[call-overload]
            corrupt=self.corrupt,
            tokenize_seconds=float(metrics["tokenize_seconds"]),  # type: ignore[arg-type]
            cache_bytes=cache_bytes,
            evicted=evicted,
            finished_ns=now,
        )
        conn.execute(
            "INSERT INTO runs(dlm_id, finished_ns, total_rows, hits, misses, corrupt, "
            "tokenize_seconds, cache_bytes, evicted) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                run.dlm_id,
                run.finished_ns,
                run.total_rows,
                run.hits,
                run.misses,
                run.corrupt,
                run.tokenize_seconds,
                run.cache_bytes,
                run.evicted,
            ),
        )
        return run

    def _evict(self, conn: sqlite3.Connection, max_bytes: int, protected: set[str]) -> int:
        total = self._total(conn)
        if total <= max_bytes:
            return 0
        victims = []
        for key, size in conn.execute("SELECT key, size FROM entries ORDER BY last_access_ns, key"):
            if total <= max_bytes:
                break
            if key in protected:
                continue
            victims.append(key)
            total -= size
        self._delete(conn, victims)
        return len(victims)

    def _delete(self, conn: sqlite3.Connection, keys: Iterable[str]) -> None:
        keys = list(keys)
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path_of(key))
        conn.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k in keys])

    def stats(self) -> CacheStats:
        conn = self._read_conn()
        if conn is None:
            return CacheStats(0, 0)
        try:
            n, size = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries"
            ).fetchone()
        except sqlite3.DatabaseError:
            return CacheStats(0, 0)
        finally:
            conn.close()
        return CacheStats(int(n), int(size))

    def last_run(self, dlm_id: str) -> RunMetrics | None:
        conn = self._read_conn()
        if conn is None:
            return None
        try:
            row = conn.execute(
                "SELECT dlm_id, total_rows, hits, misses, corrupt, tokenize_seconds, cache_bytes,"
                " evicted, finished_ns FROM runs WHERE dlm_id = ? ORDER BY id DESC LIMIT 1",
                (dlm_id,),
            ).fetchone()
        except sqlite3.DatabaseError:
            return None
        finally:
            conn.close()
        return RunMetrics(*row) if row else None

    def prune(self, older_than_seconds: float) -> tuple[int, int]:
        """Drop entries not used for `older_than_seconds`; sweep orphans. (entries, files)."""
        cutoff = time.time_ns() - int(older_than_seconds * 1e9)

        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            query = "SELECT key FROM entries WHERE last_access_ns < ?"
            keys = [k for (k,) in conn.execute(query, (cutoff,))]
            self._delete(conn, keys)
            return len(keys), self._sweep(conn, everything=False)

        return self._in_index(work)

    def clear(self) -> tuple[int, int]:
        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            keys = [k for (k,) in conn.execute("SELECT key FROM entries")]
            self._delete(conn, keys)
            return len(keys), self._sweep(conn, everything=True)

        return self._in_index(work)

    def _sweep(self, conn: sqlite3.Connection, everything: bool) -> int:
        """Remove tmp files and files the index doesn't know (entries and packs): those past
        the grace period, or with `everything` (clear) any but a tmp file being written."""
        known = {k for (k,) in conn.execute("SELECT key FROM entries")}
        cutoff = time.time() - SWEEP_GRACE_SECONDS
        candidates: list[tuple[Path, str]] = []
        packs = self.root / PACKS_DIR
        if packs.is_dir():
            candidates += [(p, PACK_PREFIX + p.name.removesuffix(".pack")) for p in packs.iterdir()]
        if self.entries_dir.is_dir():
            for shard in self.entries_dir.iterdir():
                if shard.is_dir():
                    candidates += [(p, p.name.removesuffix(SUFFIX)) for p in shard.iterdir()]
        removed = 0
        for path, key in sorted(candidates):
            if not path.is_file():
                continue  # a stray directory is not ours to remove
            is_tmp = path.name.endswith(TMP_SUFFIX)
            if not is_tmp and key in known:
                continue
            try:
                old = path.stat().st_mtime < cutoff
            except FileNotFoundError:
                continue
            if old or (everything and not is_tmp):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
        return removed
