"""Segment verification: check the whole boundary chain, replay K sampled segments.

Invariants:
- The chain is always checked in full: it starts at step 0, every boundary is one
  training writes (`dlm_git.train.segments`: names, field kinds, RNG sizes, positions),
  its tensors file matches the sha256 its JSON records, every `prev` is the digest of
  the boundary before (the first is the genesis digest of config, token stream and
  base), the last digest is the manifest's chain root, and the last boundary's LoRA
  tensors are the adapter's.
- Where replays run, the chain's start is compared with the seeded start
  (`segments.start`) whatever the sample, as a sampled segment is: FAILED where bits are
  expected, ABSENT where not. A boundary to restore that no training captures, and a
  re-tokenized stream other than the manifest's, are FAILED whatever the profile (the
  stream ABSENT only where the hash level could not compare the base and this base's
  tokenizer is another, as for a full replay). Nothing is replayed on a base the hash
  level found other than the recorded one (`base.identity` FAILED): ABSENT.
- K segments are drawn with a `random.Random(seed)`; the seed is fresh unless given and
  is always printed, so a run can be repeated (`--seed`).
- A replayed segment must reproduce its end boundary byte for byte; on a mismatch the
  report names the first step whose loss differs (or the boundary step, if only the final
  update differs).
- Under a profile this process cannot pin (torch already runs here under other kernel
  settings), the same check runs in `python -m dlm_git.verify.segments DIR`, asked and
  answering through `dlm_git.childproc` (`SegmentsRequest` → `SegmentsAnswer`: the
  document's report so far in, the report with the segment checks out); a child never
  starts a child, and a child that cannot answer is CANNOT_VERIFY.
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git import gitio
from dlm_git.contract.outcome import Check, Outcome, absent, failed, passed
from dlm_git.docat import copy_out
from dlm_git.dvcfiles import DvcRecordError
from dlm_git.errors import DlmGitError
from dlm_git.hashing import sha256_bytes
from dlm_git.layout import ADAPTER_WEIGHTS, LOCK_NAME, MANIFEST_NAME, SEGMENTS_DIR
from dlm_git.manifest.records import read_manifest_bytes
from dlm_git.numerics.activate import apply_to, can_run_in_process
from dlm_git.numerics.plan import Plan, plan
from dlm_git.verify.commit import assemble_adapter
from dlm_git.verify.profile import Setup, recorded_setup
from dlm_git.verify.report import DocReport, Verdict, combine
from dlm_git.verify.segment_replay import Found, OtherStream, Replays, replay_segments

if TYPE_CHECKING:
    from dlm_git.manifest.schema import Manifest, SegmentsRecord
    from dlm_git.train.segments import Boundary

CHILD = "dlm_git.verify.segments"
Stop = tuple[Check, Verdict]
"""The check that ends a document's segment verification, and the verdict it gives."""


def check_chain(
    boundaries: list[Boundary],
    genesis_digest: str,
    record: SegmentsRecord,
    adapter_dir: Path,
) -> tuple[list[str], str | None]:
    """Digests in order, or the first problem found (`record`: the manifest's)."""
    from dlm_git.train.segments import parse_meta, record_problem

    if len(boundaries) != record.count:
        return [], f"{len(boundaries)} boundaries found, manifest records {record.count}"
    if len(boundaries) < 2:  # a training of one step or more has its start and its end
        return [], f"{len(boundaries)} boundaries: no segment between a start and an end"
    if boundaries[0][0] != 0:
        return [], f"the chain starts at step {boundaries[0][0]}, not at the training's start (0)"
    prev, digests = genesis_digest, list[str]()
    for step, meta_bytes, blob in boundaries:
        try:
            meta = parse_meta(meta_bytes)
        except (ValueError, UnicodeDecodeError):
            return digests, f"boundary {step}: JSON does not parse"
        if meta.get("step") != step:
            return digests, f"boundary {step}: records step {meta.get('step')}"
        problem = record_problem(meta)
        if problem is not None:
            return digests, f"boundary {step}: {problem}"
        if meta.get("tensors_sha256") != sha256_bytes(blob):
            return digests, f"boundary {step}: tensors file does not match its recorded sha256"
        if meta.get("prev") != prev:
            return (
                digests,
                f"boundary {step}: prev does not link to the boundary before"
                " (forged or reordered chain)",
            )
        prev = sha256_bytes(meta_bytes)
        digests.append(prev)
    if prev != record.chain_root:
        return digests, f"chain root {prev[:16]} is not the manifest's {record.chain_root[:16]}"
    return digests, _not_the_adapter(boundaries[-1], adapter_dir)


def _not_the_adapter(last: Boundary, adapter_dir: Path) -> str | None:
    """Why the last boundary's LoRA tensors are not the adapter's weights, or None."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from dlm_git.train.segments import BoundaryError, adapter_name, read_tensors

    step, _, blob = last
    try:
        final = read_tensors(step, blob)
    except BoundaryError as exc:
        return exc.one_line()
    try:
        adapter = load_file(str(adapter_dir / ADAPTER_WEIGHTS))
    except (SafetensorError, KeyError):  # KeyError: a dtype numpy does not have
        return "the adapter's weights file does not load"
    params = {
        adapter_name(k.removeprefix("param/")): v
        for k, v in final.items()
        if k.startswith("param/")
    }
    if set(params) != set(adapter) or any(
        params[k].tobytes() != adapter[k].tobytes() for k in adapter
    ):
        return "the last boundary's LoRA tensors are not the adapter's"
    return None


def segment_reports(
    root: Path, sha: str, reports: list[DocReport], sample: int, seed: int | None
) -> list[DocReport]:
    seed = seed if seed is not None else secrets.randbelow(2**31)
    return [_each(root, sha, r, sample, seed) for r in reports]


def _each(
    root: Path, sha: str, report: DocReport, sample: int, seed: int, in_child: bool = False
) -> DocReport:
    """One document's segment check; a record of its that does not parse (or nests past
    the parser's bound) fails it alone, and the others still get their verdicts."""
    try:
        return segment_doc(root, sha, report, sample, seed, in_child)
    except DlmGitError as exc:
        checks = [*report.checks, failed("segments.chain", f"nothing replayed: {exc.one_line()}")]
        return _with(report, checks, Verdict.FAILED, [])
    except RecursionError:
        checks = [*report.checks, failed("segments.chain", "a record nests too deeply to read")]
        return _with(report, checks, Verdict.FAILED, [])


def segment_doc(
    root: Path, sha: str, report: DocReport, sample: int, seed: int, in_child: bool = False
) -> DocReport:
    """The chain, then the sampled replays (`in_child`: this is the child of a process that
    could not pin the recorded profile, and starts none itself)."""
    doc_rel = report.doc
    checks = list(report.checks)
    notes = [f"segment sample seed {seed} (repeat with --seed {seed})"]
    records = _records(root, sha, doc_rel)
    if isinstance(records, tuple):
        return _with(report, [*checks, records[0]], records[1], notes)
    with tempfile.TemporaryDirectory(prefix="dlm-git-segments-") as tmp:
        work = Path(tmp)
        chain = _chain(root, doc_rel, records, work)
        if isinstance(chain, tuple):
            return _with(report, [*checks, chain[0]], chain[1], notes)
        checks.append(chain.check)
        # The chain holds; replaying needs the recorded base and profile (checked only
        # now, so a machine that cannot run it still checks the whole chain).
        setup = _replay_setup(records.lock, root, report)
        if isinstance(setup, tuple):
            return _with(report, [*checks, setup[0]], setup[1], notes)
        run_plan = plan(setup.device, setup.profile.name, None, setup.flags)
        if not in_child and not can_run_in_process(run_plan.env):
            return segment_doc_in_child(root, sha, report, sample, seed, run_plan.env)
        n = len(chain.boundaries) - 1
        picks = sorted(random.Random(seed).sample(range(1, n + 1), min(sample, n)))
        notes.append(f"replaying segments {picks} of {n}")
        replayed = _replay(root, sha, report, records, (setup, run_plan), chain, picks, work)
        if isinstance(replayed, tuple):
            return _with(report, [*checks, replayed[0]], replayed[1], notes)
    return _judged(report, checks, notes, replayed)


def _replay(
    root: Path,
    sha: str,
    report: DocReport,
    records: _Records,
    pinned: tuple[Setup, Plan],
    chain: _Chain,
    picks: list[int],
    work: Path,
) -> Replays | Stop:
    """The chain's start and the sampled segments replayed (`replay_segments`), or the
    check that stopped them: other tokens (`_other_stream`), or why nothing could be
    replayed here (ABSENT)."""
    setup, run_plan = pinned
    versions = records.lock.get("pinned_versions") or {}
    try:
        return replay_segments(
            root,
            sha,
            report.doc,
            records.manifest,
            (setup, run_plan, versions),
            chain.boundaries,
            chain.digests,
            picks,
            work,
        )
    except OtherStream as exc:
        return _other_stream(report, records.manifest, exc)
    except DlmGitError as exc:
        return absent("segments.replay", f"cannot replay: {exc.one_line()}"), Verdict.CANNOT_VERIFY


def _other_stream(report: DocReport, manifest: Manifest, exc: OtherStream) -> Stop:
    """Other tokens from the commit's rows are evidence (FAILED), unless the hash level
    could not compare the base (`base.identity` ABSENT) and this base's tokenizer is not
    the recorded one: then it tokenized other inputs, which accuses nothing (ABSENT), as
    a full replay judges it."""
    if report.other_tokenizer(manifest.tokenizer_sha256, exc.tokenizer_sha256):
        why = (
            f"{exc.message}, with a tokenizer other than the recorded one on a base this"
            " machine could not compare with the record (see base.identity): other inputs,"
            " not a verdict"
        )
        return absent("segments.replay", why), Verdict.CANNOT_VERIFY
    return failed("segments.replay", exc.message), Verdict.MISMATCH


@dataclass(frozen=True)
class _Records:
    """The commit's records of one document that segment verification reads."""

    manifest: Manifest
    segments: SegmentsRecord
    lock: dict[str, Any]
    dvc_lock: bytes | None


def _records(root: Path, sha: str, doc_rel: str) -> _Records | Stop:
    from dlm_git.lock.io import parse_lock_json

    prefix = "" if doc_rel == "." else doc_rel + "/"
    blobs = gitio.cat_files(
        [f"{sha}:{prefix}{MANIFEST_NAME}", f"{sha}:{prefix}{LOCK_NAME}", f"{sha}:dvc.lock"], root
    )
    manifest_bytes = blobs.get(f"{sha}:{prefix}{MANIFEST_NAME}")
    if manifest_bytes is None:
        return failed("segments.chain", "no manifest"), Verdict.FAILED
    manifest = read_manifest_bytes(manifest_bytes, MANIFEST_NAME)
    segments = manifest.segments
    if segments is None:
        why = "trained without segment snapshots (training.segment_every: 0)"
        return absent("segments.chain", why), Verdict.CANNOT_VERIFY
    lock_bytes = blobs.get(f"{sha}:{prefix}{LOCK_NAME}")
    if lock_bytes is None:
        return failed("segments.replay", "no dlm.lock to replay against"), Verdict.FAILED
    lock = parse_lock_json(lock_bytes, LOCK_NAME)
    return _Records(manifest, segments, lock, blobs.get(f"{sha}:dvc.lock"))


@dataclass(frozen=True)
class _Chain:
    """A chain that holds: its passed check, its boundaries and their digests."""

    check: Check
    boundaries: list[Boundary]
    digests: list[str]


def _chain(root: Path, doc_rel: str, records: _Records, work: Path) -> _Chain | Stop:
    """The commit's boundaries and adapter copied out of the DVC cache into `work`, and
    the whole chain checked (`check_chain`)."""
    from dlm_git.train.segments import BoundaryError, genesis, read_boundaries

    seg_dir, adapter_dir = work / "segments", work / "adapter"
    missing = assemble_adapter(root, records.dvc_lock, doc_rel, adapter_dir)
    try:
        missing = missing or copy_out(root, records.dvc_lock, doc_rel, SEGMENTS_DIR, seg_dir)
    except DvcRecordError as exc:  # malformed is a failure, not an absence
        return failed("segments.chain", f"malformed record: {exc.one_line()}"), Verdict.FAILED
    if missing:
        return absent("segments.chain", missing), Verdict.CANNOT_VERIFY
    manifest, record = records.manifest, records.segments
    try:
        boundaries = read_boundaries(seg_dir)
    except BoundaryError as exc:
        return failed("segments.chain", exc.one_line()), Verdict.FAILED
    gen = genesis(manifest.config_sha256, manifest.tokens.root, manifest.base.tensor_root)
    digests, problem = check_chain(boundaries, gen, record, adapter_dir)
    if problem is not None:
        return failed("segments.chain", problem), Verdict.FAILED
    held = f"{len(digests)} boundaries chained to {record.chain_root[:16]}"
    return _Chain(passed("segments.chain", held), boundaries, digests)


def _replay_setup(lock: dict[str, Any], root: Path, report: DocReport) -> Setup | Stop:
    """The recorded profile to replay under, or why the segments cannot be replayed
    (among them: the hash level found this machine's base other than the recorded one,
    so no replay on it could give the recorded bits)."""
    if report.state_of("base.identity") is Outcome.FAILED:
        why = (
            "not replayed: this machine's base is not the recorded one (base.identity"
            " FAILED), so a replay on it could not give the recorded bits"
        )
        return absent("segments.replay", why), Verdict.CANNOT_VERIFY
    setup = recorded_setup(lock, root, report.doc)
    if isinstance(setup, tuple):
        return setup
    if setup.nproc > 1:  # snapshots are one process's; ranks take none
        why = (
            f"cannot replay segments of a {setup.nproc}-rank training here (segment"
            " replay runs one process; use --level replay)"
        )
        return absent("segments.replay", why), Verdict.CANNOT_VERIFY
    return setup


def _judged(
    report: DocReport,
    checks: list[Check],
    notes: list[str],
    replayed: Replays,
) -> DocReport:
    """One check per replay (the start, each sampled segment): other bytes accuse only
    where bits were expected; a boundary no training captures always fails."""
    results, expectation = replayed.found, replayed.expectation
    if not expectation.bits:
        notes.append(f"bit equality not expected: {expectation.reason}")
    diverged = failed if expectation.bits else absent
    judge = {Found.SAME: passed, Found.DIVERGED: diverged, Found.REFUSED: failed}
    judged = [judge[r.found](r.check, r.detail) for r in results]
    # a replay's finding on a check run before it (the chain, refused once the replay
    # knows the step the document trains to) replaces it: one state per check
    named = {c.name for c in judged}
    checks = [*(c for c in checks if c.name not in named), *judged]
    found = {r.found for r in results}
    if Found.REFUSED in found:
        verdict = Verdict.FAILED
    elif Found.DIVERGED in found or any(c.state is Outcome.FAILED for c in checks):
        # a hash-level check that could not compare (ABSENT) is no divergence: `_with`
        # combines the hash level's own verdict with this one
        verdict = Verdict.MISMATCH if expectation.bits else Verdict.CANNOT_VERIFY
    else:
        verdict = Verdict.SEGMENTS_BITWISE
    return _with(report, checks, verdict, notes)


def segment_doc_in_child(
    root: Path,
    sha: str,
    report: DocReport,
    sample: int,
    seed: int,
    env: Mapping[str, str | None],
) -> DocReport:
    """The same check in a fresh interpreter that pins the recorded profile (this process
    already runs torch under other kernel settings)."""
    from dlm_git.childproc import ChildError, ProtocolError, call_child

    request = SegmentsRequest(
        root.resolve(), sha, report.doc, report.verdict, report.checks, report.notes, sample, seed
    )
    try:
        got = call_child(
            CHILD,
            request,
            SegmentsAnswer,
            env=apply_to(dict(os.environ), env),
            what="the segment replay child",
        )
    except (ChildError, ProtocolError) as exc:
        checks = [*report.checks, absent("segments.replay", f"cannot replay: {exc.one_line()}")]
        return _with(report, checks, Verdict.CANNOT_VERIFY, [])
    return DocReport(
        doc=report.doc,
        level="segments",
        verdict=got.verdict,
        checks=got.checks,
        adapter_sha256=report.adapter_sha256,
        notes=got.notes,
        extra=report.extra,
    )


@dataclass(frozen=True)
class SegmentsRequest:
    """A segment check for the child: the commit, the document's report so far (the
    segment verdict is judged with its checks, as in one process), the sample."""

    root: Path
    sha: str
    doc: str
    verdict: Verdict
    checks: list[Check]
    notes: list[str]
    sample: int
    seed: int


@dataclass(frozen=True)
class SegmentsAnswer:
    """The child's report of the document: its verdict, every check, every note."""

    verdict: Verdict
    checks: list[Check]
    notes: list[str]


def answer(request: SegmentsRequest) -> SegmentsAnswer:
    """The child's side: the same check on the same report, in this interpreter."""
    report = DocReport(
        request.doc, "hash", request.verdict, list(request.checks), notes=list(request.notes)
    )
    done = _each(request.root, request.sha, report, request.sample, request.seed, in_child=True)
    return SegmentsAnswer(done.verdict, done.checks, done.notes)


def _with(report: DocReport, checks: list[Check], verdict: Verdict, notes: list[str]) -> DocReport:
    return DocReport(
        doc=report.doc,
        level="segments",
        verdict=combine(report.verdict, verdict),
        checks=checks,
        adapter_sha256=report.adapter_sha256,
        notes=[*report.notes, *notes],
        extra=report.extra,
    )


if __name__ == "__main__":
    from dlm_git.childproc import serve

    sys.exit(serve(sys.argv[1:], SegmentsRequest, answer, CHILD))
