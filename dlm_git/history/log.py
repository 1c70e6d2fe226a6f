"""`log`: a document's adapter lineage through history, from git objects only.

Invariants:
- The lineage is the first-parent history from HEAD of the commits that change any of the
  document's records (`dlm.lock`, `manifest.json`, `dlm.sig`, `verify.json`,
  `eval.json`): one `git log --raw`, one tree listing for the oldest entry shown (and one
  for its parent's lock, manifest and eval record), one `cat-file --batch` for every blob
  and commit. `limit` windows
  what is read and shown, never what an entry is judged against: `Lineage.total` counts
  the whole lineage, and every entry, the oldest shown included, is compared with the
  records of its own first parent (a new adapter, an acceptance's drift). Nothing heavy
  is imported: no torch, no DVC, no pydantic model validation (records are read as
  plain JSON).
- Each entry says what its commit holds, never more: the recorded adapter sha256, the
  lock's determinism class, profile and world size; a lock acceptance (a new
  `supersedes`) with its author, whether it names the lock it replaced (sha256 of that
  lock's bytes) and the drift it accepted (the one lock table, against that lock); the
  signature judged by the contract's signature checks with this machine's trust
  (`contract.signature`, as `verify` judges it; a signature by an untrusted key is
  "untrusted", not "invalid"; one tree listing per signed entry); the verdict the commit's own
  `verify.json` records and, apart from it, the last verdict this machine's
  `dlm-git verify` reached for the commit (`dlm_git.verify.verdicts`); the headline
  scores of its `eval.json` (`history.scores.headline`: val overall loss, probes exactly
  matched) and those of its first parent's, which its change is against.
- Malformed records are described, never fatal.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from dlm_git import gitio
from dlm_git.contract.signature import Signature
from dlm_git.docat import prefix_of
from dlm_git.gitio import CommitInfo
from dlm_git.hashing import sha256_bytes
from dlm_git.history.records import json_object, recorded_adapter_sha
from dlm_git.history.scores import Headline, headline, stale_note
from dlm_git.layout import EVAL_NAME, LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME, VERIFY_NAME
from dlm_git.lock.policy import Finding, classify
from dlm_git.topology import recorded_world_size

if TYPE_CHECKING:
    from dlm_git.sign.trust import TrustedKey

RECORDS = (LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME, VERIFY_NAME, EVAL_NAME)
BEFORE = (LOCK_NAME, MANIFEST_NAME, EVAL_NAME)
"""The records an entry is compared with at its first parent."""


class Acceptance(NamedTuple):
    supersedes: str
    chained: bool
    """True when `supersedes` is the sha256 of the lock this commit replaced."""
    drift: list[Finding]


@dataclass
class LogEntry:
    commit: CommitInfo
    changed: list[str]
    adapter_sha256: str | None = None
    adapter_changed: bool = False
    """The recorded adapter differs from the one its commit's first parent records (the
    lineage's previous entry; for the first entry, none)."""
    determinism_class: str | None = None
    profile: str | None = None
    world_size: int | None = None
    acceptance: Acceptance | None = None
    signature: Signature | None = None
    recorded_verdict: dict[str, str] | None = None
    local_verdict: dict[str, Any] | None = None
    scores: Headline = field(default_factory=lambda: Headline("not_evaluated"))
    previous_scores: Headline = field(default_factory=lambda: Headline("not_evaluated"))
    """The headline scores of the `eval.json` its commit's first parent holds."""
    stale_scores: str | None = None
    """Why `scores` are not those of this entry's adapter (its record scored another)."""
    problems: list[str] = field(default_factory=list)


class Lineage(NamedTuple):
    entries: list[LogEntry]
    """Newest first, at most the `limit` asked for."""
    total: int
    """Entries in the whole lineage, however many are shown."""


def lineage(root: Path, head: str, doc: str, limit: int | None) -> Lineage:
    """The entries of `doc` from `head`, newest first (at most `limit`)."""
    from dlm_git.verify.verdicts import known

    prefix = prefix_of(doc)
    paths = [prefix + name for name in RECORDS]
    every = gitio.path_history(paths, root, head, None)
    commits = every[:limit] if limit is not None else every
    if not commits:
        return Lineage([], 0)
    states = _states(root, paths, commits)
    infos = gitio.commit_info([c.sha for c in commits], root)
    before = _records_before(root, infos.get(commits[-1].sha), paths)
    blob_ids = {b for s in states for b in s.values() if b} | set(before.values())
    blobs = gitio.read_blobs(blob_ids, root)
    verdicts = known(root, [c.sha for c in commits])  # the shown commits' files only
    entries: list[LogEntry] = []
    previous = {name: blobs.get(b) for name, b in before.items()}
    scores = headline(previous.get(EVAL_NAME))  # each record is read once
    for commit, state in reversed(list(zip(commits, states, strict=True))):
        info = infos.get(commit.sha) or CommitInfo(commit.sha, (), "", "", 0, "")
        names = sorted(posixpath.basename(p) for p in commit.changed)
        entry = LogEntry(info, names)
        record = {posixpath.basename(p): blobs.get(b) if b else None for p, b in state.items()}
        _read_records(entry, record, previous.get(LOCK_NAME), doc)
        if record.get(SIGNATURE_NAME) is not None:
            entry.signature = _signature(root, info, doc)
        entry.local_verdict = verdicts.get(commit.sha, {}).get(doc)
        parent_adapter = recorded_adapter_sha(json_object(previous.get(MANIFEST_NAME)))
        entry.adapter_changed = entry.adapter_sha256 != parent_adapter
        _read_scores(entry, record.get(EVAL_NAME), scores)
        previous, scores = record, entry.scores
        entries.append(entry)
    return Lineage(entries[::-1], len(every))


def _states(
    root: Path, paths: list[str], commits: list[gitio.PathCommit]
) -> list[dict[str, str | None]]:
    """The blob of every record path after each commit, aligned with `commits` (newest
    first): the oldest's from its tree listing, then each newer commit's changes applied."""
    oldest = commits[-1].sha
    listed = gitio.object_ids([f"{oldest}:{p}" for p in paths], root)
    state: dict[str, str | None] = {p: listed.get(f"{oldest}:{p}") for p in paths}
    by_age = [state]
    for commit in reversed(commits[:-1]):
        state = {**state, **commit.changed}
        by_age.append(state)
    return by_age[::-1]


def _records_before(root: Path, oldest: CommitInfo | None, paths: list[str]) -> dict[str, str]:
    """The blobs of the `BEFORE` records at the first parent of the oldest entry shown
    (record name -> blob; none when it has no parent or they are absent there)."""
    if oldest is None or not oldest.parents:
        return {}
    parent = oldest.parents[0]
    wanted = {f"{parent}:{p}": posixpath.basename(p) for p in paths}
    wanted = {spec: name for spec, name in wanted.items() if name in BEFORE}
    listed = gitio.object_ids(list(wanted), root)
    return {name: listed[spec] for spec, name in wanted.items() if listed.get(spec)}


def _read_records(
    entry: LogEntry, record: dict[str, bytes | None], previous_lock: bytes | None, doc: str
) -> None:
    manifest = json_object(record.get(MANIFEST_NAME))
    if record.get(MANIFEST_NAME) is not None and manifest is None:
        entry.problems.append(f"{MANIFEST_NAME} is not a JSON object")
    entry.adapter_sha256 = recorded_adapter_sha(manifest)
    lock = json_object(record.get(LOCK_NAME))
    if record.get(LOCK_NAME) is not None and lock is None:
        entry.problems.append(f"{LOCK_NAME} is not a JSON object")
    if lock is not None:
        _read_lock(entry, lock, previous_lock)
    report = json_object(record.get(VERIFY_NAME))
    if report is not None:
        entry.recorded_verdict = _recorded_verdict(report, doc)


def _read_scores(entry: LogEntry, record: bytes | None, parents: Headline) -> None:
    """The headline scores of the entry's `eval.json` (and its first parent's, read)."""
    entry.scores = headline(record)
    entry.previous_scores = parents
    if entry.scores.problem is not None:
        entry.problems.append(entry.scores.problem)
    elif entry.scores.state == "evaluated":
        entry.stale_scores = stale_note(entry.scores.adapter_sha256, entry.adapter_sha256)


def _read_lock(entry: LogEntry, lock: dict[str, Any], previous_lock: bytes | None) -> None:
    klass = lock.get("determinism_class")
    entry.determinism_class = klass if isinstance(klass, str) else None
    flags = lock.get("determinism_flags")
    if isinstance(flags, dict):
        profile = flags.get("numerics")
        entry.profile = profile if isinstance(profile, str) else None
        size = recorded_world_size(flags)
        entry.world_size = size if isinstance(size, int) else None
        if isinstance(size, str):
            entry.problems.append(f"{LOCK_NAME}: {size}")
    supersedes = lock.get("supersedes")
    before = json_object(previous_lock)
    if isinstance(supersedes, str) and (before is None or before.get("supersedes") != supersedes):
        chained = previous_lock is not None and sha256_bytes(previous_lock) == supersedes
        drift = [f for f in classify(before, lock) if f.severity != "ALLOW"] if before else []
        entry.acceptance = Acceptance(supersedes, chained, drift)


def _signature(root: Path, info: CommitInfo, doc: str) -> Signature:
    """The signature checks of `doc` at the commit (`contract.signature`, as `verify` runs
    them), judged with this machine's trust and the policy of the commit's first parent,
    nothing required; the state read from the checks' states."""
    from dlm_git.contract.outcome import Checks
    from dlm_git.contract.signature import signature_checks, signature_state
    from dlm_git.docat import TreeAt
    from dlm_git.sign.trust import trusted_keys

    def keys() -> list[TrustedKey]:
        return trusted_keys(root, info.parents[0] if info.parents else None)[0]

    checks = Checks()
    with TreeAt(root, info.sha) as tree:
        notes = signature_checks(checks, tree.doc(doc), keys, required=False)
    return signature_state(checks, notes)


def _recorded_verdict(report: dict[str, Any], doc: str) -> dict[str, str] | None:
    docs = report.get("documents")
    for item in docs if isinstance(docs, list) else []:
        if isinstance(item, dict) and item.get("doc") in (doc, f"{doc}/"):
            verdict, level = item.get("verdict"), item.get("level")
            if isinstance(verdict, str) and isinstance(level, str):
                return {"verdict": verdict, "level": level}
    return None
