"""The token cache's SQLite index: each entry file's and pack's size and last access, and
the log of runs.

Invariants:
- The index (`cache.sqlite`) records each entry's size and last access, so eviction and
  `cache show` never walk the directory tree. Index updates, eviction, prune and clear
  happen under one file lock (`locked`), so concurrent processes cannot corrupt it; a
  warm run served by a fresh pack only logs itself, in one SQLite transaction.
- It is written with `synchronous=OFF` (no fsync per run): the index only describes the
  entry files, so an OS crash can at worst lose or damage it, and a damaged index is
  replaced by an empty one whose entries are listed again as runs use them. Its failures
  are never fatal (`run` retries once on a new index).
- The index never counts bytes not on disk: a used key it does not list is listed only if
  its file is there.
- Bounded: after a run, least-recently-used entries are evicted until the cache fits
  `max_bytes`; entries used by that run are never evicted by it.
- The sweep (prune, clear) removes only files of the cache's own walk
  (`CacheLayout.files`): tmp files and files the index does not know, past a grace
  period, or with clear any but a tmp file being written; never a directory.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from dlm_git.cache.layout import CacheLayout, Kind

T = TypeVar("T")
ACCESS_GRANULARITY_NS = 3600 * 10**9
SWEEP_GRACE_SECONDS = 600
CHUNK = 500
"""Keys per `IN (...)` query (under SQLite's bound on host parameters)."""
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
UPSERT = (
    "INSERT INTO entries(key, size, last_access_ns) VALUES (?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET size=excluded.size, last_access_ns=excluded.last_access_ns"
)


def _configure(conn: sqlite3.Connection) -> None:
    """Every connection that writes the index: a rollback journal truncated after each
    transaction (a WAL index costs a checkpoint and two files' creation and removal on
    every close, and a warm run is one short transaction), no fsync (see above)."""
    conn.execute("PRAGMA journal_mode=TRUNCATE")
    conn.execute("PRAGMA synchronous=OFF")


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


@dataclass(frozen=True)
class _Run:
    """A run to log: its metrics (`dlm_id`, `total_rows`, `hits`, `misses`,
    `tokenize_seconds`), corrupt files it met, and when it finished."""

    metrics: dict[str, object]
    corrupt: int
    now: int


class Index:
    def __init__(self, layout: CacheLayout) -> None:
        self.layout = layout
        self.path = layout.index_path

    # --- transactions ----------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the index under the file lock. An index that turns out to be
        damaged (not a database, a malformed page) is removed before the error propagates,
        so the next transaction starts a new one (see `run`)."""
        from filelock import FileLock

        self.layout.root.mkdir(parents=True, exist_ok=True)
        self.layout.ignore_in_git()
        with FileLock(str(self.layout.lock_path), timeout=120):
            conn = self._open_or_replace()
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
                    self._remove()
                raise
            finally:
                conn.close()

    def _open_or_replace(self) -> sqlite3.Connection:
        try:
            return self._open()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
        # Not a database: start a new index. Entry files it listed become orphans, listed
        # again when used or swept by prune/clear.
        self._remove()
        return self._open()

    def _remove(self) -> None:
        for suffix in ("", "-journal", "-wal", "-shm"):  # -wal, -shm: an older version's
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
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

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            _configure(conn)
            conn.executescript(SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _read_conn(self) -> sqlite3.Connection | None:
        if not self.path.is_file():
            return None
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60)

    # --- a run -----------------------------------------------------------------------------

    def record_run(
        self,
        used: Collection[str],
        written: dict[str, int],
        max_bytes: int,
        metrics: dict[str, object],
        *,
        corrupt: int = 0,
        served_by: str | None = None,
    ) -> RunMetrics:
        """Refresh last access of used entries, add written ones, evict LRU, log the run.

        Last access is kept to within ACCESS_GRANULARITY_NS: an entry touched less than half
        of it ago needs no write, which keeps a warm run's index update small. `served_by`
        names the pack that served every used key: its entries are refreshed whenever it
        is, so while the pack itself is fresh they are too and are not looked up at all.
        """
        run = _Run(metrics, corrupt, time.time_ns())
        fresh = run.now - ACCESS_GRANULARITY_NS // 2
        if served_by is not None and not written:
            logged = self._record_served_run(served_by, fresh, max_bytes, run)
            if logged is not None:
                return logged
        written_keys = set(written)
        used_keys = [k for k in dict.fromkeys(used) if k not in written_keys]

        def work(conn: sqlite3.Connection) -> RunMetrics:
            keys = used_keys
            if served_by is not None and self._is_fresh(conn, served_by, fresh):
                keys = []
            stale = {**written, **self._stale(conn, keys, fresh)}
            rows = [(k, size, run.now) for k, size in stale.items() if size > 0]
            conn.executemany(UPSERT, rows)
            evicted = self._evict(conn, max_bytes, protected=set(used) | written_keys)
            return self._log_run(conn, run, self._total(conn), evicted)

        return self.run(work)

    def _stale(self, conn: sqlite3.Connection, keys: list[str], fresh: int) -> dict[str, int]:
        """Size of each of `keys` whose last access is older than `fresh` or that the index
        does not list (the index was rebuilt) while its file is there. A hit served from a
        pack whose entry file is gone (evicted, pruned) is not re-listed."""
        stale: dict[str, int] = {}
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, size, last_access_ns FROM entries WHERE key IN ({marks})"
            known = {k: (size, access) for k, size, access in conn.execute(query, chunk)}
            for k in chunk:
                if k in known:
                    if known[k][1] < fresh:
                        stale[k] = known[k][0]
                    continue
                with contextlib.suppress(OSError):
                    stale[k] = os.stat(self.layout.path_of(k)).st_size
        return stale

    def _record_served_run(
        self, served_by: str, fresh: int, max_bytes: int, run: _Run
    ) -> RunMetrics | None:
        """Log a run served by a fresh pack that wrote nothing, in one SQLite transaction
        without the file lock: such a run has no index row or file to change and nothing to
        evict, and SQLite serializes the transaction with every other writer. None (and
        nothing written) if the run needs more: the pack is stale, the cache is over
        `max_bytes`, or the index is missing or unusable."""
        if not self.path.is_file():
            return None
        try:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        except sqlite3.Error:
            return None
        try:
            _configure(conn)
            conn.execute("BEGIN IMMEDIATE")
            total = self._total(conn)
            if total <= max_bytes and self._is_fresh(conn, served_by, fresh):
                logged = self._log_run(conn, run, total, evicted=0)
                conn.execute("COMMIT")
                return logged
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

    @staticmethod
    def _log_run(conn: sqlite3.Connection, run: _Run, cache_bytes: int, evicted: int) -> RunMetrics:
        m = run.metrics
        logged = RunMetrics(
            dlm_id=str(m["dlm_id"]),
            total_rows=int(m["total_rows"]),  # type: ignore[call-overload]
            hits=int(m["hits"]),  # type: ignore[call-overload]
            misses=int(m["misses"]),  # type: ignore[call-overload]
            corrupt=run.corrupt,
            tokenize_seconds=float(m["tokenize_seconds"]),  # type: ignore[arg-type]
            cache_bytes=cache_bytes,
            evicted=evicted,
            finished_ns=run.now,
        )
        conn.execute(
            "INSERT INTO runs(dlm_id, finished_ns, total_rows, hits, misses, corrupt, "
            "tokenize_seconds, cache_bytes, evicted) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                logged.dlm_id,
                logged.finished_ns,
                logged.total_rows,
                logged.hits,
                logged.misses,
                logged.corrupt,
                logged.tokenize_seconds,
                logged.cache_bytes,
                logged.evicted,
            ),
        )
        return logged

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
        self.delete(conn, victims)
        return len(victims)

    def delete(self, conn: sqlite3.Connection, keys: Iterable[str]) -> None:
        """Remove `keys`' files and rows (in a `locked` transaction)."""
        keys = list(keys)
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.layout.path_of(key))
        conn.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k in keys])

    # --- inspect, prune, clear -------------------------------------------------------------

    def stats(self) -> CacheStats:
        conn = self._read_conn()
        if conn is None:
            return CacheStats(0, 0)
        try:
            query = "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries"
            n, size = conn.execute(query).fetchone()
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
            self.delete(conn, keys)
            return len(keys), self._sweep(conn, everything=False)

        return self.run(work)

    def clear(self) -> tuple[int, int]:
        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            keys = [k for (k,) in conn.execute("SELECT key FROM entries")]
            self.delete(conn, keys)
            return len(keys), self._sweep(conn, everything=True)

        return self.run(work)

    def _sweep(self, conn: sqlite3.Connection, everything: bool) -> int:
        """Remove tmp files and files the index doesn't know (entries and packs): those past
        the grace period, or with `everything` (clear) any but a tmp file being written."""
        known = {k for (k,) in conn.execute("SELECT key FROM entries")}
        cutoff = time.time() - SWEEP_GRACE_SECONDS
        removed = 0
        for file in self.layout.files():
            is_tmp = file.kind is Kind.TMP
            if not file.entry.is_file() or (not is_tmp and file.index_key in known):
                continue  # a stray directory is not ours to remove
            try:
                old = file.entry.stat().st_mtime < cutoff
            except FileNotFoundError:
                continue
            if old or (everything and not is_tmp):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(file.path)
                    removed += 1
        return removed
