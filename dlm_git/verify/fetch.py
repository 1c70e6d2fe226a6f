"""`verify --fetch`: bring exactly the DVC objects a check needs from the remote into the
cache, instead of telling the user to run `dvc fetch`.

Invariants:
- Only the objects a commit's `dvc.lock` names for a document's directory outs
  (`adapter/`, and `segments/` for the segments level) are fetched: every md5 is checked
  by `dlm_git.dvcfiles` before DVC sees it, the `.dir` listing is fetched first and read
  by the same strict parser, then only its entries that the cache lacks.
- Where from is said, never assumed. Without `--remote`, DVC's default remote of the
  work tree's DVC config, which is the *checked-out* `.dvc/config` (written by whoever
  wrote the checked-out commit) unless the auditor's `.dvc/config.local`, global or
  system config sets `core.remote`: every note names the remote, its URL (userinfo
  hidden) and the config file that chose it. With `--remote NAME`, the remote is the
  auditor's: NAME and its settings are read from the auditor's own DVC config only
  (`.dvc/config.local` when git does not track it, the global and the system config),
  and they replace the repository config's remotes for the fetch, so a committed
  `.dvc/config` can neither redefine NAME nor add settings to it. An unknown NAME is a
  usage error (exit 2) before anything is fetched.
- A fetch that fails is a note, never an error: the checks then report the absence
  (`CANNOT_VERIFY`, or `FAILED` for a malformed record, which is never fetched from).
  Fetched bytes are trusted no more than cached ones: every check re-hashes them.
- DVC is imported here only, and only with `--fetch`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from dlm_git import docat, gitio
from dlm_git.dvcfiles import (
    DvcRecordError,
    cache_object,
    check_md5,
    dir_listing,
    find_out,
    parse_dvc_lock,
)
from dlm_git.errors import UsageError, require_training_stack
from dlm_git.output import printable

LOCAL_CONFIG = ".dvc/config.local"
LEVEL_NAMES = {
    "system": "your system DVC config",
    "global": "your global DVC config",
    "repo": "the checked-out .dvc/config",
    "local": LOCAL_CONFIG,
}
"""Where a DVC config level's file is, as a note names it."""


class FetchFrom(NamedTuple):
    """The remote `--fetch` uses: DVC's default remote (`name` None), or the auditor's
    remote `name` (`--remote`) with the auditor's own remote settings, which replace the
    repository config's remotes while fetching."""

    name: str | None = None
    remotes: dict[str, Any] | None = None
    level: str | None = None


DEFAULT_REMOTE = FetchFrom()


def fetch_from(root: Path, fetch: bool, remote: str | None, command: str) -> FetchFrom | None:
    """What `--fetch [--remote NAME]` of `command` asks for: None (no fetch), DVC's
    default remote, or the auditor's remote NAME. `UsageError` (exit 2) for `--remote`
    without `--fetch` and for a NAME the auditor's DVC config does not define."""
    if remote is not None and not fetch:
        raise UsageError(command, "--remote goes with --fetch", "add --fetch or drop --remote")
    if not fetch:
        return None
    return DEFAULT_REMOTE if remote is None else auditor_remote(root, remote, command)


def auditor_remote(root: Path, name: str, command: str) -> FetchFrom:
    """`--remote NAME`: the remote NAME as the auditor's own DVC config defines it
    (`.dvc/config.local` when git does not track it, the global and the system config;
    never the checked-out `.dvc/config`). `UsageError` (exit 2) when none defines it."""
    subject = f"{command} --remote"
    require_training_stack(subject, "dvc")
    from dvc.config import Config, ConfigError

    local = root / ".dvc"
    levels = ["system", "global", *(["local"] if _auditors_local(root) else [])]
    try:
        config = Config(
            None, local_dvc_dir=str(local) if "local" in levels else None, validate=False
        )
        found = {lvl: config.load_one(lvl).get("remote", {}) for lvl in levels}
    except (ConfigError, OSError) as exc:
        raise UsageError(subject, f"your DVC config cannot be read: {str(exc)[:120]}") from None
    key = name.lower()  # DVC's remote names are case-insensitive
    defined = [lvl for lvl in levels if key in found[lvl]]
    if not defined:
        where = ", ".join(LEVEL_NAMES[lvl] for lvl in levels)
        raise UsageError(
            subject,
            f"no DVC remote '{printable(name)}' in your own DVC config ({where}; the"
            " checked-out .dvc/config is not consulted)",
            f"dvc remote add --local {printable(name)} URL, or leave out --remote",
        )
    return FetchFrom(key, dict(config.get("remote", {})), defined[-1])


def _auditors_local(root: Path) -> bool:
    """`.dvc/config.local` is the auditor's unless a commit brought it (git tracks it)."""
    return not gitio.ls_files([LOCAL_CONFIG], root)


def fetch_outs(
    root: Path,
    dvc_lock: bytes | None,
    doc_rel: str,
    names: Iterable[str],
    source: FetchFrom | None = None,
) -> list[str]:
    """Fetch the objects of `<doc>/<name>` for each name from `source` (None: DVC's
    default remote); returns notes (what was fetched, what could not be, from where)."""
    source = source or DEFAULT_REMOTE
    if dvc_lock is None:
        return []
    try:
        lock = parse_dvc_lock(dvc_lock)
    except DvcRecordError:
        return []  # dvc.binding reports it; nothing it names is fetched
    notes: list[str] = []
    repo: Any = None
    for name in names:
        out_path = docat.prefix_of(doc_rel) + name
        try:
            out = find_out(lock, out_path)
            if out is None:
                continue
            missing = _missing(root, out.md5)
            if missing is None:
                continue  # all there
            repo = repo or _open(root, source)
            if repo is None:
                return [f"--fetch: {root} has no DVC repository to fetch with"]
            _pull(repo, missing, source)
            rest = _missing(root, out.md5)  # the listing came: now its files
            if rest and out.md5 not in rest:
                _pull(repo, rest, source)
            # judged by the cache, not by DVC's report (which counts absent objects as done)
            remote = describe(root, repo, source)
            notes.append(
                f"--fetch: {out_path} fetched from the DVC remote {remote}"
                if _missing(root, out.md5) is None
                else f"--fetch: {out_path} ({out.md5}) is not on the DVC remote {remote}"
            )
        except DvcRecordError:
            continue  # a malformed record: dvc.binding reports it, nothing is fetched
        except Exception as exc:  # noqa: BLE001 - the remote's failures are DVC's many types
            notes.append(f"--fetch: {out_path}: {type(exc).__name__}: {str(exc)[:120]}")
    return notes


def describe(root: Path, repo: Any, source: FetchFrom) -> str:
    """`'NAME' (URL, chosen by FILE)` of the remote a fetch from `source` uses, through
    `printable`, with any password in the URL hidden."""
    name = source.name or repo.config["core"].get("remote")
    if not name:
        return "(none configured)"
    url = str(repo.config["remote"].get(name, {}).get("url", "?"))
    if source.name is not None:
        why = f"--remote, defined in {LEVEL_NAMES.get(source.level or '', '?')}"
    else:
        level = _default_level(repo)
        where = LEVEL_NAMES.get(level, level)
        if level == "local" and not _auditors_local(root):
            where += " (tracked by git: the checked-out commit's)"
        why = f"the default remote set by {where}"
    return printable(f"'{name}' ({hide_password(url)}; {why})")


def _default_level(repo: Any) -> str:
    """The config level whose `core.remote` DVC's default remote comes from."""
    chosen = "?"
    for level in repo.config.files:
        if repo.config.load_one(level).get("core", {}).get("remote"):
            chosen = level
    return str(chosen)


def hide_password(url: str) -> str:
    """`url` with the password of its userinfo (`user:secret@host`) shown as `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    user, colon, _ = parts.netloc.rpartition("@")[0].partition(":")
    if not colon:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


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


def _open(root: Path, source: FetchFrom = DEFAULT_REMOTE) -> Any:
    """DVC's repository at `root`, its remotes replaced by the auditor's for `--remote`."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    try:
        repo = Repo(str(root))
    except NotDvcRepoError:
        return None
    if source.remotes is not None:
        repo.config["remote"] = dict(source.remotes)  # what the checkout defines is gone
        repo.config["core"]["remote"] = source.name
    return repo


def _pull(repo: Any, md5s: list[str], source: FetchFrom = DEFAULT_REMOTE) -> None:
    from dvc_data.hashfile.hash_info import HashInfo

    repo.cloud.pull({HashInfo("md5", m) for m in md5s}, remote=source.name)
