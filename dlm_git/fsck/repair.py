"""`dlm-git fsck --repair`: move what is corrupted aside, never delete it.

Invariants:
- Each corrupted file is renamed (copied then unlinked across file systems) into a new
  `quarantine/<UTC time>[-n]/` in the work tree's state directory inside the git
  directory (`dlm_git.statedir`: no commit can link it elsewhere), under its path relative
  to its cache, with `quarantine.json` saying what came from where and why. An earlier
  quarantine is never written to again.
- `--repair` changes a DVC cache only where the auditor chose it (`check_repairable`):
  inside the repository, or named by their own `.dvc/config.local`. One outside the
  repository that the committed `.dvc/config` names (or a `.dvc/cache` link reaches) is
  refused, before anything is read or written, unless `--allow-outside-cache` confirms it.
- A repair's outcome (`Outcome`) is judged from the state of the same path after the
  re-check, never from detail text. A token-cache file needs no re-fetch (a missing
  entry is a miss, rewritten by the next run).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from pathlib import Path

from dlm_git.cache.layout import default_cache_dir
from dlm_git.dvcfiles import CONFIG_FILES, cache_dir, cache_location
from dlm_git.errors import DlmGitError
from dlm_git.fsck.report import Area, Finding, Outcome, Repair, State, display_path
from dlm_git.fsutil import atomic_write_bytes, fsync_dir
from dlm_git.statedir import make_state_dir

QUARANTINE_DIR = "quarantine"
LOCAL_CONFIG = CONFIG_FILES[0]
"""`.dvc/config.local`: the auditor's own DVC configuration, never committed."""


class OutsideCache(DlmGitError):
    """`--repair` would move files in a DVC cache outside the repository that only the
    checked-out (committed) configuration chose."""


def check_repairable(root: Path, confirmed: bool) -> None:
    """`--repair` moves files (and DVC fetches into) the DVC cache only where the auditor
    chose it: inside the repository, named by their own `.dvc/config.local`, or
    `confirmed` (`--allow-outside-cache`). A cache outside the repository that the
    committed `.dvc/config` names, or that DVC's default `.dvc/cache` reaches through a
    symbolic link (which a commit can carry too), is `OutsideCache`."""
    where = cache_location(root)
    if confirmed or where.named_by == LOCAL_CONFIG or _inside(where.path, root):
        return
    how = f"named by the committed {where.named_by}" if where.named_by else "through a link"
    raise OutsideCache(
        str(where.path),
        f"DVC cache outside the repository ({how}): --repair moves no file there unconfirmed",
        "if it is yours, pass --allow-outside-cache, or name it in your own config:"
        f" dvc cache dir --local {where.path}",
    )


def _inside(path: Path, root: Path) -> bool:
    """Whether `path`, links resolved, is inside the repository `root`."""
    return path.resolve().is_relative_to(Path(root).resolve())


def quarantine_dir(root: Path) -> Path:
    """A new directory `quarantine/<UTC time>[-n]` in the work tree's state directory."""
    parent = make_state_dir(root, QUARANTINE_DIR)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        candidate = parent / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(errno.EEXIST, "no free quarantine directory name", str(parent))


def _relative_in_cache(found: Finding, root: Path) -> Path:
    """Where `found` goes inside the quarantine: its path inside its cache, under the
    cache's name."""
    base = cache_dir(root) if found.area is Area.DVC else default_cache_dir(root)
    try:
        rel = found.file.relative_to(base)
    except ValueError:  # not under the cache it was found in: keep its name only
        rel = Path(found.file.name)
    return Path(found.area.value) / rel


def move_aside(found: Finding, root: Path, quarantine: Path) -> tuple[Finding, Path | None, str]:
    """Rename `found` into the quarantine (copy then unlink across file systems); the
    destination, or None and why not."""
    dest = quarantine / _relative_in_cache(found, root)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(found.file, dest)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            shutil.copy2(found.file, dest, follow_symlinks=False)
            with open(dest, "rb") as fh:
                os.fsync(fh.fileno())
            os.unlink(found.file)
        fsync_dir(dest.parent)
    except OSError as exc:
        return found, None, f"not moved: {exc.strerror or type(exc).__name__}"
    return found, dest, ""


def write_manifest(quarantine: Path, root: Path, moved: list[tuple[Finding, Path | None]]) -> None:
    """`quarantine.json`: what was moved aside, from where, and why."""
    rows = [
        {
            "from": found.path,
            "to": display_path(dest, root),
            "area": found.area.value,
            "md5": found.md5,
            "why": found.detail,
        }
        for found, dest in moved
        if dest is not None
    ]
    data = json.dumps({"format": "dlm-git/quarantine/v1", "moved": rows}, indent=1)
    with contextlib.suppress(OSError):  # the moved files themselves are what matters
        atomic_write_bytes(quarantine / "quarantine.json", data.encode("utf-8"))


def outcome(
    found: Finding,
    dest: Path | None,
    why: str,
    after: dict[tuple[Area, str], Finding],
    fetch_note: str | None,
    root: Path,
) -> Repair:
    """What became of `found`, judged by its finding in the re-check (`after`)."""
    where = display_path(dest, root) if dest is not None else None
    if dest is None:
        return Repair(found.area, found.path, None, Outcome.NOT_MOVED, why)
    if found.area is Area.TOKENS:
        detail = "a missing entry is a miss: the next run rewrites it"
        return Repair(found.area, found.path, where, Outcome.QUARANTINED, detail)
    now = after.get((found.area, found.path))
    if now is None:
        detail = "re-fetched from the DVC remote and verified"
        return Repair(found.area, found.path, where, Outcome.REPAIRED, detail)
    if now.state is State.CORRUPTED:
        detail = f"the DVC remote's copy is corrupted too: {now.detail}"
        return Repair(found.area, found.path, where, Outcome.STILL_CORRUPTED, detail)
    detail = f"not re-fetched: {fetch_note}" if fetch_note else "not on the DVC remote"
    return Repair(found.area, found.path, where, Outcome.QUARANTINED, detail)
