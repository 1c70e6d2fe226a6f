"""`dlm-git fsck`: is every cache object the history relies on what its name says it is?

Invariants:
- DVC cache (DVC 3 layout, `<cache>/files/md5/<2>/<30>[.dir]`): every object the
  history's records reference (`dlm_git.history.references`) is checked once per md5.
  A file object is good when the md5 of its raw bytes is its address (DVC 3 does no
  line-ending normalisation); a `.dir` object when that holds *and* its listing parses
  under `dlm_git.dvcfiles`' strict rules, whose entries are then checked in turn.
  Referenced and absent is `missing`: reported, not a failure (a DVC cache holds what
  was pulled, and history is rarely all pulled; `dvc fetch` brings it). Present and
  referenced by nothing is `orphaned`: reported, never touched. A bad hash, an
  unparseable listing, a file that is not a regular file or cannot be read is
  `corrupted`: a failure.
- Token cache (`dlm_git.cache`): every entry (`entries/<2>/<key>.tok`) and pack
  (`packs/<id>.pack`) is decoded by the cache's own decoders, which check the
  checksum the format embeds; a file that fails is `corrupted`, a failure (the cache
  itself would only count it as a miss, but a file that fails its checksum is a disk or
  a bug worth knowing about). Files of another format version are not ours to judge.
- Only names built from checked md5s (or listed from the cache's own directories) are
  opened, without blocking and with `O_NOFOLLOW` (`dlm_git.fsutil.open_regular`); a
  symbolic link, FIFO or device where an object should be is corrupted, never followed
  and never waited on.
- An unchanged file is not re-read: `dlm_git.history.statrecord` vouches for what a
  previous run verified while its size, mtime, ctime and inode are unchanged (`--full`
  ignores it). `.dir` objects are always read (their listing is needed).
- `--repair` renames each corrupted file into `quarantine/<UTC time>/` in the work
  tree's state directory inside the git directory (`dlm_git.statedir`: no commit can
  link it elsewhere) under its path relative to its cache (never deletes), re-fetches
  the quarantined DVC objects, exactly those md5s, from the work tree's default DVC
  remote (`dlm_git.verify.fetch.pull_objects`), and checks everything again: what is
  reported is the state after the repair. A token-cache file needs no re-fetch (a
  missing entry is a miss, rewritten by the next run).
- `--repair` changes a DVC cache only where the auditor chose it (`check_repairable`):
  inside the repository, or named by their own `.dvc/config.local`. One outside the
  repository that the committed `.dvc/config` names (or a `.dvc/cache` link reaches) is
  refused, before anything is read or written, unless `--allow-outside-cache` confirms it.
- Exit status (`FsckReport.ok`): 1 while any corrupted object or token-cache file
  remains; missing and orphaned objects never fail.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from dlm_git.cache.store import ENTRIES_DIR, PACKS_DIR, SUFFIX, TMP_SUFFIX, default_cache_dir
from dlm_git.dvcfiles import (
    CONFIG_FILES,
    MD5_RE,
    DvcRecordError,
    cache_dir,
    cache_location,
    parse_dir_listing,
)
from dlm_git.errors import DlmGitError, missing_stack_module
from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, fsync_dir, open_regular
from dlm_git.history.references import References, Referrer, collect
from dlm_git.history.statrecord import Stamp, StatRecord, record_path, stamp_of
from dlm_git.output import printable
from dlm_git.statedir import make_state_dir

FORMAT = "dlm-git/fsck/v1"
QUARANTINE_DIR = "quarantine"
PACK_SUFFIX = ".pack"
REPAIR_ROUNDS = 3
"""A `.dir` listing re-fetched in one round names files the next round checks first."""
MISSING_DETAIL = "referenced, not in the DVC cache (`dvc fetch` brings it)"
LOCAL_CONFIG = CONFIG_FILES[0]
"""`.dvc/config.local`: the auditor's own DVC configuration, never committed."""
LIST_LIMIT = 20
"""Missing and orphaned objects shown per kind in the human output (`--json` has all)."""


class State(StrEnum):
    OK = "ok"
    CORRUPTED = "corrupted"
    MISSING = "missing"
    ORPHANED = "orphaned"


class Area(StrEnum):
    DVC = "dvc-cache"
    TOKENS = "token-cache"


class Outcome(StrEnum):
    REPAIRED = "repaired"
    """Quarantined, re-fetched from the DVC remote, and the new copy is good."""
    QUARANTINED = "quarantined"
    """Quarantined and not replaced (no remote, not on it, or a token-cache file)."""
    STILL_CORRUPTED = "still-corrupted"
    """Quarantined and re-fetched, but the remote's copy is corrupted too."""
    NOT_MOVED = "not-moved"
    """The move into quarantine failed: the object stays where it was."""


@dataclass(frozen=True)
class Finding:
    """One object that is not simply ok."""

    area: Area
    state: State
    path: str
    """Where it is (relative to the repository root when inside it)."""
    md5: str | None
    detail: str
    referrer: Referrer | None
    file: Path = field(compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        ref = self.referrer
        return {
            "area": self.area.value,
            "state": self.state.value,
            "path": self.path,
            "md5": self.md5,
            "detail": self.detail,
            "commit": ref.commit if ref else None,
            "record": ref.record if ref else None,
            "out": ref.out if ref else None,
            "doc": ref.doc if ref else None,
        }


@dataclass(frozen=True)
class Repair:
    area: Area
    path: str
    quarantined_to: str | None
    outcome: Outcome
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "area": self.area.value,
            "path": self.path,
            "quarantine": self.quarantined_to,
            "outcome": self.outcome.value,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class DvcCounts:
    path: str
    referenced: int
    ok: int
    corrupted: int
    missing: int
    orphaned: int


@dataclass(frozen=True)
class TokenCounts:
    path: str
    files: int
    ok: int
    corrupted: int
    other_version: int
    checked: bool
    """False when the training stack (numpy, blake3) is not installed to decode them."""


@dataclass(frozen=True)
class FsckReport:
    commits: int
    dvc: DvcCounts
    tokens: TokenCounts
    hashed: int
    """Files read and hashed or decoded (both passes with --repair)."""
    unchanged: int
    """Files vouched for by the stat record, not re-read."""
    full: bool
    findings: tuple[Finding, ...]
    repairs: tuple[Repair, ...] = ()
    quarantine: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.dvc.corrupted == 0 and self.tokens.corrupted == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "ok": self.ok,
            "commits": self.commits,
            "full": self.full,
            "dvc_cache": vars(self.dvc),
            "token_cache": vars(self.tokens),
            "hashed": self.hashed,
            "unchanged": self.unchanged,
            "objects": [f.to_json() for f in self.findings],
            "repairs": [r.to_json() for r in self.repairs],
            "quarantine": self.quarantine,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- one pass


@dataclass
class _Pass:
    root: Path
    record: StatRecord
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hashed: int = 0
    unchanged: int = 0

    def display(self, path: Path) -> str:
        return display_path(path, self.root)


def display_path(path: Path, root: Path) -> str:
    """`path` relative to `root` when it is inside it, else absolute."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


class _Unreadable(Exception):
    """A cache file that is not a regular file or cannot be read."""


def _read(path: Path, want: str) -> tuple[Stamp | None, str | bytes, int]:
    """(stamp, md5 hex or the bytes, when it was stat'ed) of a regular file, opened
    without blocking and without following a symbolic link (`fsutil.open_regular`);
    `want` "md5" streams it, "bytes" returns it. The stamp is None when the file changed
    while it was read (checked, never recorded)."""
    try:
        fh = open_regular(path, follow_symlinks=False)
    except NotRegularFile as exc:
        raise _Unreadable(exc.message) from None
    except OSError as exc:
        raise _Unreadable(f"cannot be read ({exc.strerror})") from None
    with fh:
        fd = fh.fileno()
        seen = time.time_ns()
        before = os.fstat(fd)
        try:
            if want == "md5":
                result: str | bytes = hashlib.file_digest(fh, "md5").hexdigest()
            else:
                result = fh.read() or b""
        except OSError as exc:
            raise _Unreadable(f"cannot be read ({exc.strerror})") from None
        after = stamp_of(os.fstat(fd))
    return (stamp_of(before) if stamp_of(before) == after else None), result, seen


def _regular_stamp(entry: os.DirEntry[str]) -> Stamp | None:
    """The stamp of a directory entry that is a regular file (None for anything else)."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return stamp_of(st) if stat.S_ISREG(st.st_mode) else None


# --------------------------------------------------------------------------- DVC cache


def _scan_dvc(files: Path) -> dict[str, os.DirEntry[str]]:
    """Every entry of the cache's `files/md5` tree by the md5 its place names
    (`<2><30>[.dir]` for `<2>/<30>[.dir]`); anything not shaped like an object is keyed
    by a name no md5 can have (`<dir>/<name>`, `./<name>`), so it is never taken for one."""
    found: dict[str, os.DirEntry[str]] = {}
    try:
        shards = list(os.scandir(files))
    except OSError:
        return found
    for shard in shards:
        if not shard.is_dir(follow_symlinks=False):
            found[f"./{shard.name}"] = shard
            continue
        try:
            names = list(os.scandir(shard.path))
        except OSError:
            continue
        for entry in names:
            key = shard.name + entry.name
            if len(shard.name) != 2 or not MD5_RE.fullmatch(key):
                key = f"{shard.name}/{entry.name}"
            found[key] = entry
    return found


def _check_dvc(run: _Pass, refs: References, cache: Path) -> DvcCounts:
    check = _DvcCheck(run, refs, cache / "files" / "md5")
    for md5, referrer in refs.run_cache.items():
        if md5 in check.present and md5 not in refs.objects:
            refs.add(md5, referrer)
    check.directories()  # first: their listings reference more objects
    check.plain_files()
    orphaned = check.orphans()
    values = list(check.states.values())
    return DvcCounts(
        path=run.display(cache),
        referenced=len(values),
        ok=values.count(State.OK),
        corrupted=values.count(State.CORRUPTED),
        missing=values.count(State.MISSING),
        orphaned=orphaned,
    )


class _DvcCheck:
    """One pass over the DVC cache's referenced objects; `states` holds each md5's."""

    def __init__(self, run: _Pass, refs: References, files: Path) -> None:
        self.run, self.refs, self.files = run, refs, files
        self.present = _scan_dvc(files)
        self.states: dict[str, State] = {}

    def finding(self, md5: str, state: State, detail: str) -> None:
        self.states[md5] = state
        path = self.files / md5[:2] / md5[2:]
        ref = self.refs.objects.get(md5)
        self.run.findings.append(
            Finding(Area.DVC, state, self.run.display(path), md5, detail, ref, path)
        )

    def verified(self, key: str, stamp: Stamp | None, seen: int, address: str) -> None:
        if stamp is not None:
            self.run.record.keep(key, stamp, f"md5:{address}", seen)

    def directories(self) -> None:
        for md5 in [m for m in self.refs.objects if m.endswith(".dir")]:
            listing = self._directory(md5)
            if listing is not None:
                referrer = self.refs.objects[md5]
                for rel, entry_md5 in listing.items():
                    self.refs.add(entry_md5, referrer.entry(rel))

    def _directory(self, md5: str) -> dict[str, str] | None:
        """The listing of a good `.dir` object (None: a finding was made)."""
        run, entry = self.run, self.present.get(md5)
        if entry is None:
            self.finding(md5, State.MISSING, MISSING_DETAIL)
            return None
        key, address = entry.path, md5.removesuffix(".dir")
        try:
            stamp, data, seen = _read(Path(key), "bytes")
        except _Unreadable as exc:
            self.finding(md5, State.CORRUPTED, str(exc))
            return None
        assert isinstance(data, bytes)
        if stamp is not None and run.record.verified(key, stamp) == f"md5:{address}":
            run.unchanged += 1  # read for its listing, not re-hashed
        else:
            run.hashed += 1
            digest = hashlib.md5(data).hexdigest()
            if digest != address:
                self.finding(md5, State.CORRUPTED, f"content md5 is {digest}, not its address")
                return None
        try:
            listing = parse_dir_listing(data, md5)
        except DvcRecordError as exc:
            self.finding(md5, State.CORRUPTED, f"its listing is malformed: {exc.message}")
            return None
        self.states[md5] = State.OK
        self.verified(key, stamp, seen, address)
        return listing

    def plain_files(self) -> None:
        for md5 in [m for m in self.refs.objects if not m.endswith(".dir")]:
            self._file(md5)

    def _file(self, md5: str) -> None:
        run, entry = self.run, self.present.get(md5)
        if entry is None:
            self.finding(md5, State.MISSING, MISSING_DETAIL)
            return
        key = entry.path
        lstamp = _regular_stamp(entry)
        if lstamp is not None and run.record.verified(key, lstamp) == f"md5:{md5}":
            run.unchanged += 1
            run.record.carry(key, lstamp)
            self.states[md5] = State.OK
            return
        try:
            stamp, content_md5, seen = _read(Path(key), "md5")
        except _Unreadable as exc:
            self.finding(md5, State.CORRUPTED, str(exc))
            return
        run.hashed += 1
        if content_md5 != md5:
            self.finding(md5, State.CORRUPTED, f"content md5 is {content_md5!s}, not its address")
            return
        self.states[md5] = State.OK
        self.verified(key, stamp, seen, md5)

    def orphans(self) -> int:
        """Report every present object no record references; how many."""
        orphaned = 0
        for name in sorted(self.present):
            if name in self.refs.objects:
                continue
            orphaned += 1
            path = Path(self.present[name].path)
            named = name if MD5_RE.fullmatch(name) else None
            detail = "referenced by no commit's DVC records" if named else "not a DVC object name"
            self.run.findings.append(
                Finding(Area.DVC, State.ORPHANED, self.run.display(path), named, detail, None, path)
            )
        return orphaned


# --------------------------------------------------------------------------- token cache


def _token_files(tokens: Path) -> Iterator[tuple[os.DirEntry[str], str, str]]:
    """(entry, kind, key) of every entry file and pack (tmp files being written skipped)."""
    try:
        shards = [s for s in os.scandir(tokens / ENTRIES_DIR) if s.is_dir(follow_symlinks=False)]
    except OSError:
        shards = []
    for shard in sorted(shards, key=lambda s: s.name):
        try:
            names = sorted(os.scandir(shard.path), key=lambda e: e.name)
        except OSError:
            continue
        for entry in names:
            if entry.name.endswith(SUFFIX) and not entry.name.endswith(TMP_SUFFIX):
                yield entry, "entry", entry.name.removesuffix(SUFFIX)
    try:
        packs = sorted(os.scandir(tokens / PACKS_DIR), key=lambda e: e.name)
    except OSError:
        packs = []
    for entry in packs:
        if entry.name.endswith(PACK_SUFFIX):
            yield entry, "pack", entry.name.removesuffix(PACK_SUFFIX)


def _check_tokens(run: _Pass, tokens: Path) -> TokenCounts:
    found = list(_token_files(tokens))
    display = run.display(tokens)
    try:
        from dlm_git.cache.entry import CorruptEntry, check_entry, is_other_entry_version
        from dlm_git.cache.pack import decode_pack, is_other_pack_version
    except ImportError as exc:
        module = missing_stack_module(exc)
        if module is None:
            raise
        if found:
            run.notes.append(
                f"token cache: {len(found)} files not checked: decoding them needs {module}"
                " (pip install 'dlm-git[train]')"
            )
        return TokenCounts(display, len(found), 0, 0, 0, checked=False)
    ok = corrupted = other = 0

    def bad(entry: os.DirEntry[str], detail: str) -> None:
        path = Path(entry.path)
        run.findings.append(
            Finding(Area.TOKENS, State.CORRUPTED, run.display(path), None, detail, None, path)
        )

    for entry, kind, key in found:
        path = Path(entry.path)
        lstamp = _regular_stamp(entry)
        recorded = run.record.verified(str(path), lstamp) if lstamp is not None else None
        if recorded is not None and recorded.startswith("blake3:"):
            run.unchanged += 1
            run.record.carry(str(path), lstamp)  # type: ignore[arg-type]
            ok += 1
            continue
        try:
            stamp, data, seen = _read(path, "bytes")
        except _Unreadable as exc:
            corrupted += 1
            bad(entry, str(exc))
            continue
        assert isinstance(data, bytes)
        run.hashed += 1
        try:
            if kind == "entry":
                if is_other_entry_version(data):
                    other += 1
                    continue
                if key[:2] != Path(entry.path).parent.name:
                    raise CorruptEntry("not in its shard directory")
                check_entry(data, key)
            else:
                if is_other_pack_version(data):
                    other += 1
                    continue
                decode_pack(data)
        except CorruptEntry as exc:
            corrupted += 1
            bad(entry, f"fails its {kind} check: {exc}")
            continue
        ok += 1
        if stamp is not None:
            run.record.keep(str(path), stamp, f"blake3:{data[-32:].hex()}", seen)
    return TokenCounts(display, len(found), ok, corrupted, other, checked=True)


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class _Result:
    commits: int
    dvc: DvcCounts
    tokens: TokenCounts
    findings: list[Finding]
    notes: list[str]
    hashed: int
    unchanged: int


def _check(root: Path, full: bool) -> _Result:
    record = StatRecord(record_path(root), enabled=not full)
    run = _Pass(root, record)
    cache = cache_dir(root)
    refs = collect(root, cache)
    run.notes += refs.notes
    dvc = _check_dvc(run, refs, cache)
    tokens = _check_tokens(run, default_cache_dir(root))
    if record.damaged:
        run.notes.append(f"{run.display(record.path)} was damaged: ignored and rewritten")
    problem = record.save()
    if problem is not None:
        run.notes.append(f"stat record {problem}")
    order = {State.CORRUPTED: 0, State.MISSING: 1, State.ORPHANED: 2, State.OK: 3}
    run.findings.sort(key=lambda f: (order[f.state], f.area.value, f.path))
    return _Result(refs.commits, dvc, tokens, run.findings, run.notes, run.hashed, run.unchanged)


def run_fsck(
    root: Path, *, repair: bool = False, full: bool = False, allow_outside_cache: bool = False
) -> FsckReport:
    """Check the DVC cache against the history and the token cache against its checksums;
    with `repair`, quarantine what is corrupted, re-fetch it, and check again (refused
    before anything is read or written when the DVC cache is not the auditor's to change:
    `check_repairable`)."""
    if repair:
        check_repairable(root, allow_outside_cache)
    result = _check(root, full)
    hashed, unchanged = result.hashed, result.unchanged
    notes = list(result.notes)
    moved: list[tuple[Finding, Path | None, str, str | None]] = []
    attempted: set[tuple[Area, str]] = set()
    quarantine: Path | None = None
    # A re-fetched `.dir` object can reveal entries not checked before: up to
    # REPAIR_ROUNDS rounds, each repairing only what no earlier round tried.
    for _ in range(REPAIR_ROUNDS if repair else 0):
        corrupted = [
            f
            for f in result.findings
            if f.state is State.CORRUPTED and (f.area, f.path) not in attempted
        ]
        if not corrupted:
            break
        quarantine = quarantine or _quarantine_dir(root)
        this_round = [_move_aside(f, root, quarantine) for f in corrupted]
        attempted |= {(f.area, f.path) for f in corrupted}
        wanted = [f.md5 for f, dest, _ in this_round if dest and f.area is Area.DVC and f.md5]
        fetch_note: str | None = None
        if wanted:
            from dlm_git.verify.fetch import pull_objects

            fetch_note = pull_objects(root, wanted)
            if fetch_note is not None:
                notes.append(f"--repair: re-fetch from the DVC remote failed: {fetch_note}")
        moved += [(f, dest, why, fetch_note) for f, dest, why in this_round]
        result = _check(root, full=False)
        hashed, unchanged = hashed + result.hashed, unchanged + result.unchanged
        notes += result.notes
    if quarantine is None:
        return _report(result, full, hashed, unchanged, notes=notes)
    _write_manifest(quarantine, root, [(f, dest) for f, dest, _, _ in moved])
    after = {(f.area, f.path): f for f in result.findings}
    repairs = [_outcome(f, dest, why, after, note, root) for f, dest, why, note in moved]
    return _report(
        result,
        full,
        hashed,
        unchanged,
        repairs=tuple(repairs),
        quarantine=display_path(quarantine, root),
        notes=list(dict.fromkeys(notes)),
    )


def _report(
    result: _Result,
    full: bool,
    hashed: int,
    unchanged: int,
    *,
    repairs: tuple[Repair, ...] = (),
    quarantine: str | None = None,
    notes: Iterable[str] | None = None,
) -> FsckReport:
    return FsckReport(
        commits=result.commits,
        dvc=result.dvc,
        tokens=result.tokens,
        hashed=hashed,
        unchanged=unchanged,
        full=full,
        findings=tuple(result.findings),
        repairs=repairs,
        quarantine=quarantine,
        notes=tuple(result.notes if notes is None else notes),
    )


# --------------------------------------------------------------------------- repair


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


def _quarantine_dir(root: Path) -> Path:
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


def _move_aside(found: Finding, root: Path, quarantine: Path) -> tuple[Finding, Path | None, str]:
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


def _write_manifest(quarantine: Path, root: Path, moved: list[tuple[Finding, Path | None]]) -> None:
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


def _outcome(
    found: Finding,
    dest: Path | None,
    why: str,
    after: dict[tuple[Area, str], Finding],
    fetch_note: str | None,
    root: Path,
) -> Repair:
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


# --------------------------------------------------------------------------- human output


def _safe(text: str, limit: int = 200) -> str:
    """A value from a commit, fit for a terminal line (`printable`), cut to `limit`."""
    clean = printable(text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _where(ref: Referrer | None) -> str:
    if ref is None:
        return ""
    doc = f" (doc {_safe(ref.doc)})" if ref.doc else ""
    at = f"commit {ref.commit[:12]}" if ref.commit else "the work tree"
    return f" <- {_safe(ref.out)}{doc}, {_safe(ref.record)} at {at}"


def render(report: FsckReport) -> list[str]:
    """The human summary: counts, then one line per problem object (missing and orphaned
    ones cut at `LIST_LIMIT` each), repairs, notes and the verdict."""
    d, t = report.dvc, report.tokens
    lines = [
        f"history     {report.commits} commits",
        f"dvc cache   {d.path}: {d.referenced} objects referenced: {d.ok} ok, "
        f"{d.corrupted} corrupted, {d.missing} missing; {d.orphaned} orphaned",
        f"token cache {t.path}: "
        + (
            f"{t.files} files: {t.ok} ok, {t.corrupted} corrupted"
            + (f", {t.other_version} of another version" if t.other_version else "")
            if t.checked
            else f"{t.files} files, not checked"
        ),
        f"checked     {report.hashed} files hashed, {report.unchanged} unchanged since verified"
        + (" (--full: stat record ignored)" if report.full else ""),
    ]
    shown: dict[State, int] = {}
    for f in report.findings:
        n = shown[f.state] = shown.get(f.state, 0) + 1
        if f.state is not State.CORRUPTED and n > LIST_LIMIT:
            continue
        lines.append(f"{f.state.value:<11} {f.path}: {_safe(f.detail)}{_where(f.referrer)}")
    for state, n in shown.items():
        if state is not State.CORRUPTED and n > LIST_LIMIT:
            lines.append(f"{state.value:<11} ... and {n - LIST_LIMIT} more (--json lists all)")
    for r in report.repairs:
        to = f" -> {r.quarantined_to}" if r.quarantined_to else ""
        lines.append(f"{r.outcome.value:<11} {r.path}{to}: {r.detail}")
    lines += [f"note        {_safe(n, 300)}" for n in report.notes]
    if d.missing:
        lines.append(
            "note        missing objects are not an error: the DVC cache holds what was"
            " pulled (`dvc fetch` brings the rest)"
        )
    bad = d.corrupted + t.corrupted
    lines.append(
        "fsck        OK"
        if report.ok
        else f"fsck        FAILED: {bad} corrupted"
        + ("" if report.repairs else " (dlm-git fsck --repair moves them aside and re-fetches)")
    )
    return lines
