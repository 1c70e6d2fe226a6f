"""`verify --fetch`: bring exactly the DVC objects a check needs from the remote into the
cache, instead of telling the user to run `dvc fetch`.

Invariants:
- Only the objects a commit's `dvc.lock` names for a document's directory outs
  (`adapter/`, and `segments/` for the segments level) are fetched: every md5 is checked
  by `dlm_git.dvcfiles` before DVC sees it, the `.dir` listing is fetched first and read
  by the same strict parser, then only its entries that the cache lacks.
- The remote is the auditor's: the default remote of the work tree's own DVC config;
  nothing in the commit chooses where to fetch from.
- A fetch that fails is a note, never an error: the checks then report the absence
  (`CANNOT_VERIFY`, or `FAILED` for a malformed record, which is never fetched from).
  Fetched bytes are trusted no more than cached ones: every check re-hashes them.
- DVC is imported here only, and only with `--fetch`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dlm_git import revdoc
from dlm_git.dvcfiles import (
    DvcRecordError,
    cache_object,
    check_md5,
    dir_listing,
    find_out,
    parse_dvc_lock,
)


def fetch_outs(root: Path, dvc_lock: bytes | None, doc_rel: str, names: Iterable[str]) -> list[str]:
    """Fetch the objects of `<doc>/<name>` for each name; returns notes (what was fetched,
    what could not be)."""
    if dvc_lock is None:
        return []
    try:
        lock = parse_dvc_lock(dvc_lock)
    except DvcRecordError:
        return []  # dvc.binding reports it; nothing it names is fetched
    notes: list[str] = []
    repo: Any = None
    for name in names:
        out_path = revdoc.prefix_of(doc_rel) + name
        try:
            out = find_out(lock, out_path)
            if out is None:
                continue
            missing = _missing(root, out.md5)
            if missing is None:
                continue  # all there
            repo = repo or _open(root)
            if repo is None:
                return [f"--fetch: {root} has no DVC repository to fetch with"]
            _pull(repo, missing)
            rest = _missing(root, out.md5)  # the listing came: now its files
            if rest and out.md5 not in rest:
                _pull(repo, rest)
            # judged by the cache, not by DVC's report (which counts absent objects as done)
            notes.append(
                f"--fetch: {out_path} fetched from the DVC remote"
                if _missing(root, out.md5) is None
                else f"--fetch: {out_path} ({out.md5}) is not on the DVC remote"
            )
        except DvcRecordError:
            continue  # a malformed record: dvc.binding reports it, nothing is fetched
        except Exception as exc:  # noqa: BLE001 - the remote's failures are DVC's many types
            notes.append(f"--fetch: {out_path}: {type(exc).__name__}: {str(exc)[:120]}")
    return notes


def pull_objects(root: Path, md5s: Iterable[str]) -> str | None:
    """Fetch exactly the objects `md5s` (each checked first: `DvcRecordError`) from the
    work tree's default DVC remote into the cache (for a `.dir` md5, at least its
    listing). None when DVC ran; else why it could not (no DVC repository, no default
    remote, the remote's error). What arrived is judged by re-hashing it, not here."""
    wanted = [check_md5(m, "DVC cache") for m in dict.fromkeys(md5s)]
    if not wanted:
        return None
    try:
        from dvc.config import NoRemoteError
    except ModuleNotFoundError:
        return "DVC is not installed (pip install 'dlm-git[train]')"
    try:
        repo = _open(root)
        if repo is None:
            return f"{root} has no DVC repository to fetch with"
        try:
            _pull(repo, wanted)
        finally:
            repo.close()
    except NoRemoteError:
        return "no default DVC remote is configured (`dvc remote add -d`)"
    except Exception as exc:  # noqa: BLE001 - the remote's failures are DVC's many types
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


def _missing(root: Path, dir_md5: str) -> list[str] | None:
    """The md5s of a directory out that the cache lacks (the `.dir` object itself when its
    listing is absent), or None when everything is cached."""
    listing = dir_listing(root, dir_md5)
    if listing is None:
        return [dir_md5]
    missing = [m for m in dict.fromkeys(listing.values()) if not cache_object(root, m).is_file()]
    return missing or None


def _open(root: Path) -> Any:
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        return Repo(str(root))
    except NotDvcRepoError:
        return None


def _pull(repo: Any, md5s: list[str]) -> None:
    from dvc_data.hashfile.hash_info import HashInfo

    repo.cloud.pull({HashInfo("md5", m) for m in md5s})
