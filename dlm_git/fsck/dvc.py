"""`dlm-git fsck` over the DVC cache (DVC 3 layout, `<cache>/files/md5/<2>/<30>[.dir]`).

Invariants:
- Every object the history's records reference (`dlm_git.history.references`) is checked
  once per md5. A file object is good when the md5 of its raw bytes is its address (DVC 3
  does no line-ending normalisation); a `.dir` object when that holds *and* its listing
  parses under `dlm_git.dvcfiles`' strict rules, whose entries are then checked in turn.
- Referenced and absent is `missing`: reported, not a failure (a DVC cache holds what was
  pulled; `dvc fetch` brings the rest). Present and referenced by nothing is `orphaned`:
  reported, never touched. A bad hash, an unparseable listing, a file that is not a
  regular file or cannot be read is `corrupted`: a failure.
- A present object is found by the name its place spells; anything in the tree not shaped
  like an object is keyed by a name no md5 can have, so it is never taken for one.
- `.dir` objects are always read (their listing is needed); their hash is not recomputed
  while the stat record vouches for them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dlm_git.dvcfiles import MD5_RE, DvcRecordError, parse_dir_listing
from dlm_git.fsck.report import Area, DvcCounts, Finding, State
from dlm_git.fsck.scan import Pass, Unreadable, read_bytes, read_md5, regular_stamp
from dlm_git.history.references import References
from dlm_git.statcache import Stamped

MISSING_DETAIL = "referenced, not in the DVC cache (`dvc fetch` brings it)"


def check_dvc(run: Pass, refs: References, cache: Path) -> DvcCounts:
    """Check every object `refs` references in the DVC cache at `cache`; findings go to
    `run`."""
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


def _scan(files: Path) -> dict[str, os.DirEntry[str]]:
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


class _DvcCheck:
    """One pass over the DVC cache's referenced objects; `states` holds each md5's."""

    def __init__(self, run: Pass, refs: References, files: Path) -> None:
        self.run, self.refs, self.files = run, refs, files
        self.present = _scan(files)
        self.states: dict[str, State] = {}

    def finding(self, md5: str, state: State, detail: str) -> None:
        self.states[md5] = state
        path = self.files / md5[:2] / md5[2:]
        ref = self.refs.objects.get(md5)
        self.run.findings.append(
            Finding(Area.DVC, state, self.run.display(path), md5, detail, ref, path)
        )

    def verified(self, key: str, stamped: Stamped, address: str) -> None:
        if stamped.stamp is not None:
            self.run.record.keep(key, stamped.stamp, f"md5:{address}", stamped.seen_ns)

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
            stamped, data = read_bytes(Path(key))
        except Unreadable as exc:
            self.finding(md5, State.CORRUPTED, str(exc))
            return None
        stamp = stamped.stamp
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
        self.verified(key, stamped, address)
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
        lstamp = regular_stamp(entry)
        if lstamp is not None and run.record.verified(key, lstamp) == f"md5:{md5}":
            run.unchanged += 1
            run.record.carry(key, lstamp)
            self.states[md5] = State.OK
            return
        try:
            stamped, content_md5 = read_md5(Path(key))
        except Unreadable as exc:
            self.finding(md5, State.CORRUPTED, str(exc))
            return
        run.hashed += 1
        if content_md5 != md5:
            self.finding(md5, State.CORRUPTED, f"content md5 is {content_md5!s}, not its address")
            return
        self.states[md5] = State.OK
        self.verified(key, stamped, md5)

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
