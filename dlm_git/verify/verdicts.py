"""The verdicts this machine's `dlm-git verify COMMIT` reached: the auditor's own memory.

Invariants:
- Machine-local: one file per commit, `verdicts/<commit>.json`, in the work tree's state
  directory inside the git directory (`dlm_git.statedir`), so verifying writes nothing
  into the work tree; never committed and never read from a commit (what a commit says
  about itself is its `verify.json`, which `dlm-git log` shows apart).
- A file is named by its commit's full lower-case hex object id (`gitio` `is_oid`) and by
  nothing else: any other text is neither read nor written, so nothing a commit carries
  decides where dlm-git writes. The file names its commit again inside; one that does
  not is foreign.
- One entry per (commit, document): the last verdict reached, its level, when (UTC
  seconds) and the verifier that reached it (`dlm_git.selfid`: version, digest, commit).
  `remember` reads and rewrites its commit's file only, atomically; `known` reads the
  files of the commits it is asked about only. A file that is damaged, foreign, over
  `MAX_RECORD_BYTES` or no regular file (a link, a FIFO) is no memory, and is replaced by
  the next `remember` of its commit. An entry written by a dlm-git that recorded no
  verifier, or holding one of another shape, is kept with `verifier` None: unknown,
  never guessed.
- Bounded: at most MAX_COMMITS + SLACK files. A `remember` of a commit new to the store
  counts the directory's names (no file opened); past that bound, the files whose
  modification time is oldest go until MAX_COMMITS remain. The modification time is
  when the commit was last remembered (the rename of its write; a moved older entry's
  own `at`), and is read without opening any file, as `at` could not be.
- Older dlm-git kept one file, `verdicts.json`. `known` still reads it where it remains;
  the first `remember` moves its newest MAX_COMMITS commits into files of their own
  (each written whole, the newer entry of a document kept) and only then removes it, so
  a crash half-way loses nothing and the next `remember` moves again. One that is
  damaged or no regular file holds no memory and is removed. A commit whose file cannot
  be written (a directory in its place) is skipped, and a file that cannot be pruned
  stops no other: the move is made once, the bound kept.
- Files are written without fsync (a memory, not a record: a power loss may leave one
  empty, which reads as none), so moving a full older store takes about a second.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import MAX_RECORD_BYTES, atomic_write_bytes, read_regular
from dlm_git.gitio.process import is_oid
from dlm_git.hashing import canonical_json
from dlm_git.safeparse import load_json
from dlm_git.selfid import Identity, from_json
from dlm_git.statedir import state_path
from dlm_git.verify.report import DocReport

STORE = "verdicts"
"""The directory of the per-commit files, in the state directory."""
LEGACY = "verdicts.json"
"""The single file an older dlm-git kept every commit's verdicts in."""
MAX_COMMITS = 10_000
SLACK = 100
"""Files over MAX_COMMITS before `remember` reads their ages and prunes (once per SLACK
commits new to the store, at most)."""

Docs = dict[str, dict[str, Any]]
"""document -> {"verdict", "level", "at", "verifier"}."""


def known(root: Path, shas: Iterable[str]) -> dict[str, Docs]:
    """commit -> document -> {"verdict", "level", "at", "verifier"} for those of `shas`
    with a remembered verdict (`verifier` an identity's JSON, or None where unknown)."""
    asked = list(dict.fromkeys(shas))
    found = {sha: docs for sha in asked if (docs := _read(root, sha))}
    legacy = (_read_legacy(root) if asked else None) or {}
    for sha in asked:
        if sha in legacy:
            found[sha] = _merged(legacy[sha], found.get(sha, {}))
    return found


def remember(root: Path, sha: str, reports: Iterable[DocReport], verifier: Identity) -> None:
    """Record each report's verdict for `sha`, reached by `verifier` (best effort: a
    read-only disk is no error; a `sha` that is no full object id is not recorded)."""
    if not is_oid(sha):
        return
    with contextlib.suppress(OSError, DlmGitError):
        _move_legacy(root)  # one cut short is made again by the next remember
    with contextlib.suppress(OSError, DlmGitError):
        before = _read(root, sha)
        docs = dict(before or {})
        now = int(time.time())
        by = verifier.to_json()
        for r in reports:
            docs[r.doc] = {
                "verdict": str(r.verdict),
                "level": str(r.level),
                "at": now,
                "verifier": by,
            }
        _write(root, sha, docs)
        if before is None:  # a commit new to the store (or whose file was no memory)
            _prune(state_path(root, STORE))


def _read(root: Path, sha: str) -> Docs | None:
    """The checked entries of `sha`'s file; None where there is none, or it is no memory."""
    try:
        raw = read_regular(_path(root, sha), MAX_RECORD_BYTES, follow_symlinks=False)
        data = load_json(raw)
    except (OSError, ValueError, DlmGitError):
        return None
    if not (isinstance(data, dict) and data.get("commit") == sha):
        return None
    return _checked(data.get("documents"))


def _write(root: Path, sha: str, docs: Docs) -> None:
    # whole or not at all, and not made durable: a power loss may leave the file empty
    # or gone, which reads as no memory (a memory lost, never a record)
    data = canonical_json({"commit": sha, "documents": docs})
    atomic_write_bytes(_path(root, sha), data, sync_dir=False, sync=False)


def _path(root: Path, sha: str) -> Path:
    if not is_oid(sha):  # the one gate between a commit id and a file name
        raise ValueError(f"not an object id: {sha!r}")
    # the last component unchecked by `state_path`: a link there is read as no memory
    # (`follow_symlinks=False`) and replaced by the rename of a write, never followed
    return state_path(root, STORE) / f"{sha}.json"


def _prune(directory: Path) -> None:
    """Down to the MAX_COMMITS newest files once more than MAX_COMMITS + SLACK are there
    (counted from the names alone: a write in progress counts, and is never removed)."""
    if len(os.listdir(directory)) <= MAX_COMMITS + SLACK:
        return
    with os.scandir(directory) as listing:
        entries = [e for e in listing if _named(e.name) and not e.is_dir(follow_symlinks=False)]
    ages = sorted((e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in entries)
    for _, name in ages[: max(0, len(ages) - MAX_COMMITS)]:
        with contextlib.suppress(OSError):  # one that cannot go stops no other
            os.unlink(directory / name)


def _named(name: str) -> bool:
    """A per-commit file's name (what a temporary file of a write in progress is not)."""
    return name.endswith(".json") and is_oid(name[: -len(".json")])


def _read_legacy(root: Path) -> dict[str, Docs] | None:
    """An older dlm-git's store, checked; None where there is none or it cannot be read
    now, {} where it is damaged."""
    try:
        raw = read_regular(_legacy_path(root), MAX_RECORD_BYTES, follow_symlinks=False)
    except (ValueError, DlmGitError):
        return {}
    except OSError:
        return None
    try:
        data = load_json(raw)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        sha: docs for sha, docs in ((s, _checked(d)) for s, d in data.items() if is_oid(s)) if docs
    }


def _move_legacy(root: Path) -> None:
    """The older store's newest MAX_COMMITS commits into their own files, then it removed."""
    legacy = _read_legacy(root)
    if legacy is None:
        return
    newest = sorted(legacy, key=lambda c: max(e["at"] for e in legacy[c].values()))
    for sha in newest[-MAX_COMMITS:]:
        docs = _merged(legacy[sha], _read(root, sha) or {})
        try:
            _write(root, sha, docs)
        except (OSError, DlmGitError):  # one that cannot be written (a directory there)
            continue  # is a memory lost, not a move made again by every remember
        at = max(e["at"] for e in docs.values())
        with contextlib.suppress(OSError, OverflowError, ValueError):
            # its age, for pruning: when it was remembered
            os.utime(_path(root, sha), (at, at), follow_symlinks=False)
    with contextlib.suppress(OSError):  # e.g. a directory of that name: left alone
        os.unlink(_legacy_path(root))


def _legacy_path(root: Path) -> Path:
    return state_path(root) / LEGACY  # a link there: no memory (read), removed (unlink)


def _merged(older: Docs, newer: Docs) -> Docs:
    """Each document's later entry of the two (`newer`'s on a tie)."""
    out = dict(older)
    for doc, entry in newer.items():
        if doc not in out or entry["at"] >= out[doc]["at"]:
            out[doc] = entry
    return out


def _checked(docs: object) -> Docs | None:
    if not isinstance(docs, dict):
        return None
    return {doc: _entry(entry) for doc, entry in docs.items() if _entry_ok(entry)}


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A checked entry's fields, its verifier read back as hostile input."""
    verifier = from_json(entry.get("verifier"))
    return {
        "verdict": entry["verdict"],
        "level": entry["level"],
        "at": entry["at"],
        "verifier": None if verifier is None else verifier.to_json(),
    }


def _entry_ok(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("verdict"), str)
        and isinstance(entry.get("level"), str)
        and type(entry.get("at")) is int
    )
