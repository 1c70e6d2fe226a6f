"""Read what DVC records, without importing DVC (the git hooks use this).

Invariants:
- `dvc.lock` is read with a safe YAML loader, its nesting bounded first
  (`dlm_git.safeparse`); a stage's out is matched by its exact path relative to the
  repository root.
- A record is checked before it is used: every md5 is exactly 32 lowercase hex digits
  (plus `.dir` for a directory), every `.dir` listing entry a relative path the one
  path-safety rule accepts (`dlm_git.paths`), and no path listed twice. A record
  that fails is a `DvcRecordError` (malformed: a failed check), never a path joined
  into the file system; only a cache object that is not there is "absent". So nothing
  outside the DVC cache is ever opened on a record's say-so.
- Directory outs are recorded as `<md5>.dir`; the listing (relpath + md5 per file) is the
  JSON object stored in the DVC cache at `.dvc/cache/files/md5/<2>/<30>.dir` (DVC 3).
- File md5s are plain md5 of the bytes (DVC 3 does no line-ending normalisation).
- Cache objects and DVC's config files are read through `dlm_git.fsutil` (non-blocking
  open, regular file checked on the descriptor, bounded where whole files are read;
  cache objects never through a symbolic link): a FIFO or device in their place is one
  line naming it (`NotRegularFile`), never a hang.
- `cache_location` says which file named the cache directory: the auditor's own
  `.dvc/config.local`, the checked-out (committed) `.dvc/config`, or neither (DVC's
  default `.dvc/cache`), so that what moves files there can tell whose choice it was.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import copy_regular, digest_regular, read_regular
from dlm_git.paths import problem
from dlm_git.safeparse import dig, load_json, load_yaml

DVC_LOCK = "dvc.lock"
MD5_RE = re.compile(r"[0-9a-f]{32}(?:\.dir)?")
RESTORE = "restore dvc.lock from a good commit or re-run `dvc repro`"
OBJECT_HINT = "remove it and run `dvc fetch`: a DVC cache object is a regular file"
CONFIG_HINT = "a DVC config is a regular file: restore it with `git checkout -- .dvc/config`"
MAX_CONFIG_BYTES = 1 << 20
MAX_LISTING_BYTES = 1 << 26
"""A `.dir` listing is JSON of about 100 bytes per file: 64 MiB is over 600,000 files."""
CONFIG_FILES = (".dvc/config.local", ".dvc/config")
"""Where the cache directory may be named, the first that names it winning (as in DVC)."""


class DvcRecordError(DlmGitError, ValueError):
    """dvc.lock or a `.dir` listing in the DVC cache is malformed (not merely absent)."""


def check_md5(value: object, where: str) -> str:
    """`value` if it is a DVC md5 (32 lowercase hex digits, optionally `.dir`)."""
    if not isinstance(value, str) or not MD5_RE.fullmatch(value):
        raise DvcRecordError(
            where,
            f"md5 {str(value)[:80]!r} is not 32 lowercase hex digits (optionally + .dir)",
            RESTORE,
        )
    return value


def check_relpath(value: object, where: str) -> str:
    """`value` if it is a path relative to a directory out that stays inside it."""
    if not isinstance(value, str) or not value:
        raise DvcRecordError(
            where, f"relpath {str(value)[:80]!r} is not a non-empty string", RESTORE
        )
    bad = problem(value)
    if bad is not None:
        raise DvcRecordError(where, f"relpath {value[:80]!r} {bad.value}", RESTORE)
    return value


class DvcOut(NamedTuple):
    stage: str
    path: str
    md5: str
    size: int | None
    nfiles: int | None

    @property
    def is_dir(self) -> bool:
        return self.md5.endswith(".dir")


def parse_dvc_lock(data: bytes) -> dict[str, Any]:
    """dvc.lock's mapping; `DvcRecordError` when it does not parse or is not a mapping."""
    try:
        obj = load_yaml(data.decode("utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DvcRecordError(DVC_LOCK, f"does not parse ({_why(exc)})", RESTORE) from None
    if not isinstance(obj, dict):
        raise DvcRecordError(DVC_LOCK, "is not a YAML mapping", RESTORE)
    return obj


def _why(exc: Exception) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        return str(exc.problem) + (f" at line {mark.line + 1}" if mark is not None else "")
    return type(exc).__name__


def find_out(lock: dict[str, Any], path: str) -> DvcOut | None:
    """The recorded out at `path` (repo-relative POSIX), from any stage. The stages'
    shape is checked on the way (`DvcRecordError`), and the out's md5 before it is
    returned."""
    for stage, out in _outs_in_order(lock):
        if out.get("path") == path and out.get("md5"):
            return _dvc_out(stage, path, out)
    return None


def _outs_in_order(lock: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(stage, out) of every out of every stage, in file order; `DvcRecordError` where
    the walk meets a stage or an out of the wrong shape."""
    stages = lock.get("stages") or {}
    if not isinstance(stages, dict):
        raise DvcRecordError(DVC_LOCK, "`stages` is not a mapping", RESTORE)
    for stage, body in stages.items():
        if not isinstance(body or {}, dict):
            raise DvcRecordError(DVC_LOCK, f"stages.{stage} is not a mapping", RESTORE)
        outs = (body or {}).get("outs") or []
        if not isinstance(outs, list):
            raise DvcRecordError(DVC_LOCK, f"stages.{stage}.outs is not a list", RESTORE)
        for out in outs:
            if not isinstance(out, dict):
                raise DvcRecordError(DVC_LOCK, f"stages.{stage}.outs has a non-mapping", RESTORE)
            yield str(stage), out


def _dvc_out(stage: str, path: str, out: dict[str, Any]) -> DvcOut:
    md5 = check_md5(out["md5"], f"{DVC_LOCK}: stages.{stage}.outs[{path}].md5")
    return DvcOut(stage, path, md5, dig(out, "size", kind=int), dig(out, "nfiles", kind=int))


class LockOuts:
    """One dvc.lock's outs by path: the file is parsed and its stages walked once, so the
    documents of a commit that share its dvc.lock cost one parse, not one each. `find`
    answers exactly as `find_out(parse_dvc_lock(data), path)` does, raising the same
    `DvcRecordError` where that would (the file does not parse; a malformed stage or out
    comes before the first out naming `path`; that out's md5 is not an md5)."""

    def __init__(self, data: bytes) -> None:
        self._first: dict[str, tuple[str, dict[str, Any]]] = {}
        self._error: DvcRecordError | None = None
        try:
            for stage, out in _outs_in_order(parse_dvc_lock(data)):
                path = out.get("path")
                if isinstance(path, str) and out.get("md5") and path not in self._first:
                    self._first[path] = (stage, out)
        except DvcRecordError as exc:
            self._error = exc  # what every path not found before it runs into

    def find(self, path: str) -> DvcOut | None:
        hit = self._first.get(path)
        if hit is None:
            if self._error is not None:
                raise DvcRecordError(self._error.subject, self._error.message, self._error.hint)
            return None
        return _dvc_out(hit[0], path, hit[1])


@functools.lru_cache(maxsize=4)
def lock_outs(data: bytes) -> LockOuts:
    """`LockOuts` of a dvc.lock, remembered by its bytes (every byte it answers from is
    the key, so an answer is never reused for another file)."""
    return LockOuts(data)


def record_outs(
    record: dict[str, Any], name: str = DVC_LOCK
) -> tuple[list[DvcOut], list[DvcRecordError]]:
    """Every out a DVC record names by md5: each stage's `outs` of a dvc.lock (a mapping
    with `stages`), or the top-level `outs` of a `.dvc` file (stage ""). Each out's md5 is
    checked; an out or a stage that is malformed is returned as an error, not raised, so
    one bad entry does not hide the others. Outs without an md5 (cloud-versioned, or not
    yet computed) are left out. `name`: the record's path, for the errors."""
    if "stages" in record:
        stages = record.get("stages") or {}
        if not isinstance(stages, dict):
            return [], [DvcRecordError(name, "`stages` is not a mapping", RESTORE)]
        bodies = [(str(stage), body) for stage, body in stages.items()]
    else:
        bodies = [("", record)]
    outs: list[DvcOut] = []
    errors: list[DvcRecordError] = []
    for stage, body in bodies:
        where = f"stages.{stage}" if stage else "outs"
        if not isinstance(body or {}, dict):
            errors.append(DvcRecordError(name, f"{where} is not a mapping", RESTORE))
            continue
        listed = (body or {}).get("outs") or []
        if not isinstance(listed, list):
            errors.append(DvcRecordError(name, f"{where}.outs is not a list", RESTORE))
            continue
        for out in listed:
            if not isinstance(out, dict) or not isinstance(out.get("path"), str):
                errors.append(DvcRecordError(name, f"{where}.outs has a malformed entry", RESTORE))
                continue
            if not out.get("md5"):
                continue
            path = out["path"]
            try:
                md5 = check_md5(out["md5"], name)
            except DvcRecordError as exc:
                what = f"{where}.outs[{path[:80]}].md5: {exc.message}"
                errors.append(DvcRecordError(name, what, RESTORE))
                continue
            size, nfiles = dig(out, "size", kind=int), dig(out, "nfiles", kind=int)
            outs.append(DvcOut(stage, path, md5, size, nfiles))
    return outs, errors


@functools.lru_cache(maxsize=8)
def _stage_index(data: bytes) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]] | None:
    """dvc.lock's stages as YAML text, one `name:\n  body` block each, in file order, and
    for every `path:` value the blocks naming it, when the file has the layout DVC writes
    (`stages:` at column 0, each stage name alone on a line at column 2, its body deeper);
    None for any other layout."""
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    try:
        start = lines.index("stages:")
    except ValueError:
        return None
    blocks: list[list[str]] = []
    naming: dict[str, list[int]] = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):  # a later top-level key
            break
        if not line.startswith("   "):
            if not line.rstrip().endswith(":") or line.lstrip().startswith(("-", "#")):
                return None
            blocks.append([line[2:]])
            continue
        if not blocks:
            return None
        blocks[-1].append(line[2:])
        key = line.lstrip(" -")
        if key.startswith("path: "):
            naming.setdefault(key[6:].rstrip(), []).append(len(blocks) - 1)
    texts = tuple("\n".join(b) + "\n" for b in blocks)
    return texts, {k: tuple(dict.fromkeys(v)) for k, v in naming.items()}


def stages_naming(data: bytes, path: str) -> tuple[str, ...]:
    """The text of every dvc.lock stage with a `path: <path>` entry, in file order (empty
    when there is none, or the file is not laid out the way DVC writes it)."""
    index = _stage_index(data)
    if index is None:
        return ()
    texts, naming = index
    return tuple(texts[i] for i in naming.get(path, ()))


@functools.lru_cache(maxsize=256)
def _parse_stage(text: str) -> Any:
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return None  # the full parse below says what is wrong


def find_out_in(data: bytes, path: str) -> DvcOut | None:
    """`find_out(parse_dvc_lock(data), path)`, parsing only the stages that name `path`
    when the file has DVC's layout: a dvc.lock of many documents is thousands of lines,
    and building all of it in Python would dominate the pre-commit hook's time. Falls
    back to parsing everything whenever the quick look finds nothing."""
    for text in stages_naming(data, path):
        stage = _parse_stage(text)
        if isinstance(stage, dict):
            out = find_out({"stages": stage}, path)
            if out is not None:
                return out
    return find_out(parse_dvc_lock(data), path)


class CacheLocation(NamedTuple):
    path: Path
    named_by: str | None
    """The file (`CONFIG_FILES`) whose `cache.dir` names it; None for DVC's default."""


def cache_location(repo_root: Path) -> CacheLocation:
    """The DVC cache directory and the config file that named it (`[cache] dir`)."""
    for name in CONFIG_FILES:
        candidate = repo_root / name
        value = _cache_dir_setting(candidate)
        if value:
            path = Path(value)
            path = path if path.is_absolute() else (candidate.parent / path).resolve()
            return CacheLocation(path, name)
    return CacheLocation(repo_root / ".dvc" / "cache", None)


def cache_dir(repo_root: Path) -> Path:
    """The DVC cache directory (`cache.dir` is honoured when a repository config sets it)."""
    return cache_location(repo_root).path


def _cache_dir_setting(config: Path) -> str | None:
    try:
        data = read_regular(config, MAX_CONFIG_BYTES, hint=CONFIG_HINT)
    except (FileNotFoundError, NotADirectoryError):
        return None
    section = ""
    for line in data.decode("utf-8", "replace").splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[]").strip().strip("'\"")
            continue
        key, _, value = line.partition("=")
        if section == "cache" and key.strip() == "dir" and value.strip():
            return value.strip()
    return None


def cache_object(repo_root: Path, md5: str) -> Path:
    """The cache file of `md5` (checked: `DvcRecordError` for anything but an md5)."""
    check_md5(md5, "DVC cache")
    return cache_dir(repo_root) / "files" / "md5" / md5[:2] / md5[2:]


def dir_listing(repo_root: Path, md5: str) -> dict[str, str] | None:
    """relpath -> md5 of a directory out, from the DVC cache; None if it is not cached.
    `DvcRecordError` when `md5` is not a `.dir` md5 or the cached listing is malformed
    (not JSON, not a list of {relpath, md5}, a bad md5 or relpath, a relpath twice)."""
    check_md5(md5, "dvc.lock directory out")
    if not md5.endswith(".dir"):
        raise DvcRecordError("dvc.lock", f"directory out md5 {md5} lacks the .dir suffix", RESTORE)
    path = cache_object(repo_root, md5)
    try:
        data = read_object(path, MAX_LISTING_BYTES)
    except OSError:
        return None  # absent (or unreadable): not cached here
    return parse_dir_listing(data, md5)


def read_object(path: Path, limit: int) -> bytes:
    """The bytes of the DVC cache object at `path`: a regular file, not a link, at most
    `limit` bytes (`NotRegularFile` otherwise; `OSError` when it cannot be opened)."""
    return read_regular(path, limit, follow_symlinks=False, hint=OBJECT_HINT)


def copy_object(path: Path, dest: Path) -> None:
    """Copy the DVC cache object at `path` (a regular file, not a link) to `dest`."""
    copy_regular(path, dest, follow_symlinks=False, hint=OBJECT_HINT)


def parse_dir_listing(data: bytes, md5: str) -> dict[str, str]:
    """relpath -> md5 of the `.dir` object `md5` whose bytes are `data`; `DvcRecordError`
    when the listing is malformed (see `dir_listing`)."""
    where = f"DVC cache object {md5}"
    try:
        entries = load_json(data)
    except (ValueError, UnicodeDecodeError):
        raise DvcRecordError(where, "is not a JSON directory listing", "run `dvc fetch`") from None
    if not isinstance(entries, list):
        raise DvcRecordError(where, "is not a JSON list of {relpath, md5}", "run `dvc fetch`")
    listing: dict[str, str] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DvcRecordError(where, f"entry {i} is not a mapping", "run `dvc fetch`")
        rel = check_relpath(entry.get("relpath"), f"{where}: entry {i}")
        if rel in listing:
            raise DvcRecordError(where, f"relpath {rel!r} is listed twice", "run `dvc fetch`")
        listing[rel] = check_md5(entry.get("md5"), f"{where}: entry {i} ({rel})")
        if listing[rel].endswith(".dir"):
            raise DvcRecordError(where, f"entry {i} ({rel}) md5 names a directory", RESTORE)
    return listing


def dir_md5(listing: dict[str, str]) -> str:
    """The md5 DVC names a directory out by (`<md5>.dir`): the md5 of its listing as DVC
    serialises it (entries sorted by relpath, keys sorted, JSON's default separators)."""
    entries = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(listing.items())]
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def md5_file(path: Path) -> str:
    """The md5 DVC gives the file at `path` (a regular file; a link is followed, as a
    work tree's DVC links to its cache are)."""
    return digest_regular(path, "md5")
