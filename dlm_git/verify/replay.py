"""Replay verification: re-train a commit's document from its own inputs and compare.

Invariants:
- The replay trains a copy of the commit's document and sources (from git objects) in a
  temp directory under the lock's numerics profile, seed and thread count; the work tree,
  the index, the token cache and `tokens/` are not used (`--no-cache` semantics). The
  profile's kernel variables are pinned before torch initialises (in a child process when
  this one already runs torch under other values), so any machine able to run the
  profile reproduces the adapter bit for bit.
- Whether bits are expected is decided by this dlm-git (`numerics.judge.expect_bits`) from the
  recorded profile, the replay's own kernel facts and the library versions; the commit's
  claims (its determinism class, its params) set no bar.
- Verdicts never accuse without evidence: `MISMATCH` only when bits were expected and
  differ, or when a tolerance comparison against the recorded adapter ran and failed.
  Bits not expected and the recorded adapter absent → `CANNOT_VERIFY` with the reason
  and the fix; a profile this machine cannot run → `CANNOT_VERIFY` naming what can.
- Whether bits are expected depends only on this dlm-git's table and on facts the replay
  itself observes; the lock was validated first (an unknown key anywhere is FAILED,
  nothing launched). Where bits are not expected, the verdict is CANNOT_VERIFY naming the
  environment to replay in, unless the auditor passed `--tolerance` (never read from the
  commit, never a default): then `WITHIN_TOLERANCE` or `MISMATCH`.
- One document's malformed record fails that document only: every document gets its own
  verdict.
- Never a pass where nothing was compared: BITWISE needs the recorded weights' bytes
  back, the other adapter files the manifest records and every claim of the manifest a
  bitwise replay reproduces (`verify.replay_claims`: a field that differs is a FAILED
  `replay`, MISMATCH, naming it). A commit's manifest that does not read here, or that
  records no weights sha256, compares nothing: `replay` ABSENT (the hash level's FAILED
  stays the verdict).
- A base here that the hash level found not to be the recorded one (`base.identity`
  FAILED) is not replayed on: `replay` ABSENT, the verdict the hash level's FAILED.
- After a bitwise replay, a commit's eval record is re-made and compared
  (`verify.eval_replay`, check `eval.replay`): FAILED where bits are expected and it
  differs, CANNOT_VERIFY where they are not or the evaluation cannot run here.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git import docat, gitio
from dlm_git.contract.outcome import Check, Outcome, absent, failed, judged, passed
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.layout import (
    ADAPTER_CARD,
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    ADAPTER_WEIGHTS,
    LEGACY_ADAPTER_FILES,
    LOCK_NAME,
    MANIFEST_NAME,
)
from dlm_git.numerics.judge import expect_bits
from dlm_git.verify.commit import assemble_adapter
from dlm_git.verify.eval_replay import replay_eval, with_eval
from dlm_git.verify.profile import Setup, recorded_setup, where_it_runs
from dlm_git.verify.replay_claims import describe, differing_claims
from dlm_git.verify.report import DocReport, Verdict, combine

if TYPE_CHECKING:
    from dlm_git.manifest.schema import Manifest
    from dlm_git.train.options import TrainOutcome


def check_tolerance(value: float) -> float:
    """The auditor's tolerance: finite and in [0, 1]."""
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise UsageError(
            "--tolerance", f"must be a number from 0 to 1, got {value!r}", "e.g. --tolerance 1e-3"
        )
    return value


def tensor_distances(a: Path, b: Path) -> dict[str, float]:
    """Relative L2 distance per tensor between two adapter weight files (inf if shapes or
    names differ)."""
    import numpy as np
    from safetensors.numpy import load_file

    ta, tb = load_file(str(a)), load_file(str(b))
    out: dict[str, float] = {}
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb or ta[name].shape != tb[name].shape:
            out[name] = float("inf")
            continue
        x, y = ta[name].astype(np.float64), tb[name].astype(np.float64)
        denom = max(float(np.linalg.norm(x)), 1e-30)
        out[name] = float(np.linalg.norm(x - y)) / denom
    return out


def replay_doc(
    root: Path,
    sha: str,
    report: DocReport,
    tolerance: float | None,
    accept_license: bool = False,
) -> DocReport:
    """Re-train one document and compare. `tolerance`: the auditor's bound for a replay in
    which bits are not expected (None: no tolerance comparison, such a replay is
    CANNOT_VERIFY)."""
    checks = list(report.checks)
    ready = _replayable(root, sha, report, checks)
    if isinstance(ready, DocReport):
        return ready
    lock, setup = ready
    with tempfile.TemporaryDirectory(prefix="dlm-git-replay-") as tmp:
        work = Path(tmp)
        try:
            outcome = _retrain(root, sha, report.doc, setup, work / "tree", accept_license)
        except DlmGitError as exc:
            checks.append(absent("replay", f"cannot replay: {exc.one_line()}"))
            return _with(report, checks, Verdict.CANNOT_VERIFY, [])
        return _judge(_Replayed(root, sha, report, setup, lock, outcome, work), checks, tolerance)


def _replayable(
    root: Path, sha: str, report: DocReport, checks: list[Check]
) -> tuple[dict[str, Any], Setup] | DocReport:
    """The commit's lock and the setup it records, checked before anything is launched
    (`checks` gets replay.versions and replay.profile); the document's report when there
    is nothing to replay: a missing or malformed lock, another torch major, a profile
    this machine cannot run, a base here that is not the recorded one."""
    from dlm_git.lock.io import parse_lock_json

    nothing = _nothing_to_compare(report)
    if nothing is not None:  # the hash level's FAILED stays the verdict
        checks.append(absent("replay", nothing))
        return _with(report, checks, Verdict.CANNOT_VERIFY, [])
    lock_bytes = _blob(root, sha, _in_doc(report.doc, LOCK_NAME))
    if lock_bytes is None:
        checks.append(failed("replay", "no dlm.lock to replay against"))
        return _with(report, checks, Verdict.FAILED, [])
    try:
        lock = parse_lock_json(lock_bytes, LOCK_NAME)
    except DlmGitError as exc:  # malformed: judged, nothing launched
        checks.append(failed("replay", f"nothing replayed: {exc.one_line()}"))
        return _with(report, checks, Verdict.FAILED, [])
    versions_ok, versions_detail = _replayable_torch(lock)
    checks.append((passed if versions_ok else absent)("replay.versions", versions_detail))
    if not versions_ok:
        return _with(report, checks, Verdict.CANNOT_VERIFY if report.ok else report.verdict, [])
    setup = recorded_setup(lock, root, report.doc)
    if isinstance(setup, tuple):
        checks.append(setup[0])
        malformed = Verdict.FAILED in (setup[1], report.verdict)
        return _with(report, checks, Verdict.FAILED if malformed else Verdict.CANNOT_VERIFY, [])
    checks.append(passed("replay.profile", setup.describe()))
    return lock, setup


def _nothing_to_compare(report: DocReport) -> str | None:
    """Why a replay here could compare nothing with the commit (None: it can): the commit
    records no weights sha256, or the base here is known not to be the recorded one."""
    if report.adapter_sha256 is None:
        return NO_RECORD
    return OTHER_BASE if report.state_of("base.identity") is Outcome.FAILED else None


NO_RECORD = (
    "not replayed: the commit records no adapter weights sha256 to compare a replay with"
    " (see the hash level's checks)"
)
OTHER_BASE = (
    "not replayed: the base on this machine is not the one the commit records (see"
    " base.identity), so a replay would train on other inputs and compare nothing"
)


@dataclass(frozen=True)
class _Replayed:
    """One document's replay, done: the commit, its hash-level report, what the replay
    ran under (the recorded setup and lock) and what came out (under `work`)."""

    root: Path
    sha: str
    report: DocReport
    setup: Setup
    lock: Mapping[str, Any]
    outcome: TrainOutcome
    work: Path

    @property
    def adapter_dir(self) -> Path:
        return self.work / "tree" / self.report.doc / ADAPTER_DIR

    @functools.cached_property
    def recorded(self) -> Manifest | None:
        """The commit's manifest of this document, read once; None where it is absent or
        unreadable (the hash level reports that)."""
        from dlm_git.manifest.records import read_manifest_bytes

        data = _blob(self.root, self.sha, _in_doc(self.report.doc, MANIFEST_NAME))
        try:
            return read_manifest_bytes(data, MANIFEST_NAME) if data else None
        except DlmGitError:
            return None


def _judge(done: _Replayed, checks: list[Check], tolerance: float | None) -> DocReport:
    """The replay's verdict: the same weights (with the same or other adapter files and
    claims, `_besides_the_weights`), or weights that differ (`_compare_unequal`)."""
    setup, report, recorded_sha = done.setup, done.report, done.report.adapter_sha256
    ranks = f" on {setup.nproc} ranks" if setup.nproc > 1 else ""
    notes = [f"replayed under {setup.profile.name} with threads={setup.threads}{ranks}"]
    assert recorded_sha is not None  # `_replayable` replays nothing without it
    if done.outcome.adapter_sha256 != recorded_sha:
        unknown = _tokens_of_an_unknown_tokenizer(done)
        if unknown is not None:
            return _with(report, [*checks, absent("replay", unknown)], Verdict.CANNOT_VERIFY, notes)
        check, verdict, why = _compare_unequal(done, tolerance)
        return _with(report, [*checks, check], verdict, [*notes, *why])
    held = _besides_the_weights(done, notes)
    if held is not None:
        verdict = Verdict.MISMATCH if held.state is Outcome.FAILED else Verdict.CANNOT_VERIFY
        return _with(report, [*checks, held], verdict, notes)
    if report.verdict == Verdict.CANNOT_VERIFY and _adapter_absent_only(report):
        # The replay supplies the bytes the DVC cache lacks: check them as the
        # hash level checks a cached adapter (manifest, dvc.lock, LoRA structure).
        report = _recheck_with(done.root, done.sha, report, done.adapter_dir, done.work / "recheck")
        checks = [*report.checks, *checks[-2:]]  # + replay.versions, replay.profile
    checks = [*checks, passed("replay", f"bitwise identical adapter {recorded_sha[:16]}")]
    verdict = Verdict.BITWISE if report.ok else report.verdict
    evaluated = replay_eval(
        done.root, done.sha, report, done.work / "tree", lambda: _expectation(done)
    )
    checks += [evaluated] if evaluated is not None else []
    return _with(report, checks, with_eval(verdict, evaluated), notes)


def _besides_the_weights(done: _Replayed, notes: list[str]) -> Check | None:
    """The weights came back: the `replay` check that stops the pass, or None. ABSENT
    where the commit's manifest does not read here (nothing else compared); FAILED where
    another adapter file (older-form and untemplated-card records excused, `notes` says
    so) or a claim of the manifest (`replay_claims`) is not the replay's."""
    recorded = done.recorded
    if recorded is None:
        return absent("replay", f"weights identical but {UNREAD_MANIFEST}")
    other_files = _other_files_differ(done, recorded)
    if other_files and _older_form(done):
        other_files = ""
        notes.append(OLDER_FORM_NOTE)
    if other_files == ADAPTER_CARD and _card_of_untemplated_record(done):
        other_files = ""
        notes.append(UNTEMPLATED_CARD_NOTE)
    if other_files:
        # Same weights, another config: the config is a pure function of the
        # document, so this difference is evidence, whatever the profile.
        return failed("replay", f"weights identical but {other_files} differ from the record")
    claims = differing_claims(recorded, done.outcome.manifest, _identity_ok(done.report))
    # Same weights from the same inputs: each claim is the replay's, or not true.
    return failed("replay", describe(claims)) if claims else None


UNREAD_MANIFEST = (
    "the commit's manifest.json does not read here (see the hash level's checks): its other"
    " adapter files and its claims were not compared"
)


def _expectation(done: _Replayed) -> Any:
    """Whether this replay expects the recorded bits (`numerics.judge.expect_bits`)."""
    ran = done.outcome.lock
    return expect_bits(
        done.setup.flags,
        ran.determinism_flags,
        done.lock.get("pinned_versions") or {},
        ran.pinned_versions,
        ran.hardware_tier,
    )


def _compare_unequal(done: _Replayed, tolerance: float | None) -> tuple[Check, Verdict, list[str]]:
    """The replayed adapter differs from the record: MISMATCH when bits were expected;
    else CANNOT_VERIFY naming the environment to replay in, unless the auditor passed
    `--tolerance`: then the tolerance against the recorded adapter, or CANNOT_VERIFY when
    that adapter is not here to compare (no comparison, no accusation)."""
    expectation = _expectation(done)
    recorded = done.work / "recorded"
    dvc_lock = _blob(done.root, done.sha, "dvc.lock")
    missing = assemble_adapter(done.root, dvc_lock, done.report.doc, recorded)
    detail = (
        f"replayed adapter {done.outcome.adapter_sha256[:16]}"
        f" != recorded {str(done.report.adapter_sha256)[:16]}"
    )
    if expectation.bits:
        if missing is None:
            first = _first_differing(recorded / ADAPTER_WEIGHTS, done.adapter_dir / ADAPTER_WEIGHTS)
            detail += f"; first differing tensor {first}" if first else ""
        why = f"{detail} (bit equality expected: {expectation.reason})"
        return failed("replay", why), Verdict.MISMATCH, []
    notes = [f"bit equality not expected: {expectation.reason}"]
    if tolerance is None:
        why = (
            f"{detail}; bit equality not expected ({expectation.reason}): replay"
            f" {_where_bits_hold(done.setup, done.lock)} for a bitwise verdict, or pass"
            " --tolerance to compare within a bound"
        )
        return absent("replay", why), Verdict.CANNOT_VERIFY, notes
    if missing is not None:
        why = (
            f"{detail}; bit equality not expected ({expectation.reason}) and the recorded"
            f" adapter is not available to compare within tolerance ({missing})"
        )
        return absent("replay", why), Verdict.CANNOT_VERIFY, notes
    check, verdict = _within(recorded / ADAPTER_WEIGHTS, done, tolerance)
    return check, verdict, notes


def _first_differing(recorded: Path, replayed: Path) -> str | None:
    """The first tensor (by name) whose values differ between the two weight files."""
    dist = tensor_distances(recorded, replayed)
    return next((name for name, d in dist.items() if d != 0.0), None)


def _within(recorded: Path, done: _Replayed, tolerance: float) -> tuple[Check, Verdict]:
    """The auditor's tolerance comparison against the recorded adapter's weights."""
    dist = tensor_distances(recorded, done.adapter_dir / ADAPTER_WEIGHTS)
    worst_name, worst = max(dist.items(), key=lambda kv: kv[1]) if dist else ("-", 0.0)
    ok = worst <= tolerance
    what = f"max relative L2 {worst:.3g} at {worst_name} (tolerance {tolerance:g})"
    verdict = Verdict.WITHIN_TOLERANCE if ok and done.report.ok else Verdict.MISMATCH
    return judged("replay", ok, what), verdict


def _where_bits_hold(setup: Setup, lock: Mapping[str, Any]) -> str:
    """Where a replay would expect the recorded bits: the profile and recorded versions."""
    versions = lock.get("pinned_versions") or {}
    shown = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if k != "dlm_git")
    own = versions.get("dlm_git")
    return (
        f"under profile {setup.profile.name} with {shown}"
        + (f" and dlm-git {own}" if own else "")
        + f" ({where_it_runs(setup.profile, setup.flags)})"
    )


def _retrain(
    root: Path, sha: str, doc_rel: str, setup: Setup, tree: Path, accept_license: bool
) -> TrainOutcome:
    from dlm_git.train.options import TrainOptions
    from dlm_git.train.run import run_train

    if docat.materialize(root, doc_rel, sha, tree) is None:
        raise DlmGitError(doc_rel, "no single .dlm in the document directory at this commit")
    options = TrainOptions(
        lock_mode="ignore",
        use_cache=False,
        device=setup.device,
        threads=setup.threads,
        quiet=True,
        numerics=setup.profile.name,
        replay_flags=setup.flags,
        base_dir=setup.base_dir,
        accept_license=accept_license,
        nproc=setup.nproc,
        # ranks take no snapshots (an honest multi-rank commit has none to compare)
        segment_every=0 if setup.nproc > 1 else None,
    )
    return run_train(tree / doc_rel, options)


def _other_files_differ(done: _Replayed, recorded: Manifest) -> str:
    """The adapter files other than the weights whose replayed sha256 is not the one the
    commit's manifest (`recorded`) records (", "-joined; "" when all agree)."""
    before = {name: f.sha256 for name, f in recorded.adapter.files.items()}
    after = {name: f.sha256 for name, f in done.outcome.manifest.adapter.files.items()}
    names = sorted((set(before) | set(after)) - {ADAPTER_WEIGHTS})
    return ", ".join(n for n in names if before.get(n) != after.get(n))


OLDER_FORM_NOTE = (
    "the record is dlm-git's adapter form from before the model card (the base spec in "
    "adapter_config.json, no README.md): this replay wrote the current form, and the "
    "older form of its files is byte-identical to the record"
)


def _older_form(done: _Replayed) -> bool:
    """Whether the commit's adapter is the pre-card form of the replayed one: it records
    exactly `LEGACY_ADAPTER_FILES`, and the replayed config, put back in the older form
    (`legacy_adapter_config`), has the recorded sha256. Then the replayed directory is put
    in that form, so that checks of its bytes judge what the commit records."""
    from dlm_git.hashing import sha256_bytes
    from dlm_git.safeparse import load_json
    from dlm_git.train.adapter import legacy_adapter_config

    recorded = done.recorded.adapter.files if done.recorded is not None else {}
    try:
        config = load_json((done.adapter_dir / ADAPTER_CONFIG).read_bytes())
    except (DlmGitError, OSError, ValueError):
        return False
    if set(recorded) != set(LEGACY_ADAPTER_FILES) or not isinstance(config, dict):
        return False
    older = legacy_adapter_config(config, done.outcome.manifest.base.spec)
    if sha256_bytes(older) != recorded[ADAPTER_CONFIG].sha256:
        return False
    (done.adapter_dir / ADAPTER_CONFIG).write_bytes(older)
    (done.adapter_dir / ADAPTER_CARD).unlink(missing_ok=True)
    return True


UNTEMPLATED_CARD_NOTE = (
    "the model card differs from the record only in its tokenizer sha256: the record's is "
    "this base's digest without additional_chat_templates/ (see base.identity)"
)


def _identity_absent(report: DocReport) -> bool:
    """The hash level could not compare the base (`base.identity` ABSENT)."""
    return report.state_of("base.identity") is Outcome.ABSENT


def _identity_ok(report: DocReport) -> bool:
    """The hash level found this machine's base to be the recorded one."""
    return report.state_of("base.identity") is Outcome.OK


def _tokens_of_an_unknown_tokenizer(done: _Replayed) -> str | None:
    """Why other weights accuse nothing, or None: the hash level could not compare the
    base (`base.identity` ABSENT), the replay's tokenizer is not the one the record
    names (another digest: an untemplated record's base with templates), and it
    tokenized the commit's rows into another stream than the recorded one, so it trained
    on other inputs. With the recorded tokenizer, other tokens are evidence as ever."""
    manifest, ran = done.recorded, done.outcome.manifest
    if manifest is None or not done.report.other_tokenizer(
        manifest.tokenizer_sha256, ran.tokenizer_sha256
    ):
        return None
    recorded, replayed = manifest.tokens.root, ran.tokens.root
    if recorded == replayed:
        return None
    return (
        f"replayed adapter {done.outcome.adapter_sha256[:16]} != recorded"
        f" {str(done.report.adapter_sha256)[:16]}, from another token stream"
        f" ({replayed[:16]} != recorded {recorded[:16]}) of a base this machine could not"
        " compare with the record (see base.identity): other inputs, not a verdict"
    )


def _card_of_untemplated_record(done: _Replayed) -> bool:
    """Whether the replayed card differs from the record only by the tokenizer digest's
    rule: the hash level could not compare the tokenizer (`base.identity` ABSENT, the
    record's digest being this base's without `additional_chat_templates/`), and the
    card with the record's digest in place of the replay's has the recorded sha256."""
    from dlm_git.hashing import sha256_bytes

    if not _identity_absent(done.report):
        return False
    recorded = done.recorded
    try:
        card = (done.adapter_dir / ADAPTER_CARD).read_bytes()
    except OSError:
        return False
    if recorded is None or ADAPTER_CARD not in recorded.adapter.files:
        return False
    ours = done.outcome.manifest.tokenizer_sha256.encode("ascii")
    theirs = recorded.tokenizer_sha256.encode("ascii", "replace")
    if ours == theirs or card.count(ours) != 1:
        return False
    older = card.replace(ours, theirs)
    return sha256_bytes(older) == recorded.adapter.files[ADAPTER_CARD].sha256


def _adapter_absent_only(report: DocReport) -> bool:
    """The hash level could not check the adapter only because its bytes are absent."""
    from dlm_git.verify.commit import ADAPTER_ABSENT_CHECKS

    return all(
        c.ok or (c.state is Outcome.ABSENT and c.name in ADAPTER_ABSENT_CHECKS)
        for c in report.checks
    )


def _recheck_with(
    root: Path, sha: str, report: DocReport, adapter_dir: Path, work: Path
) -> DocReport:
    from dlm_git.docset import CHECK
    from dlm_git.verify.commit import verify_commit_doc

    work.mkdir()
    listing = next(((c.ok, c.detail) for c in report.checks if c.name == CHECK), None)
    rechecked = verify_commit_doc(
        root, sha, report.doc, work, adapter_from=adapter_dir, listing=listing
    )
    # the signature was judged on the commit's records, which the replay does not change
    rechecked.checks.extend(c for c in report.checks if c.name.startswith("signature."))
    rechecked.notes = [
        *[n for n in report.notes if "DVC cache" not in n and n not in rechecked.notes],
        "adapter bytes checked from the bitwise replay (not in the DVC cache)",
    ]
    return rechecked


def _in_doc(doc_rel: str, name: str) -> str:
    return name if doc_rel == "." else f"{doc_rel}/{name}"


def _blob(root: Path, sha: str, path: str) -> bytes | None:
    return gitio.cat_files([f"{sha}:{path}"], root).get(f"{sha}:{path}")


def _replayable_torch(lock: dict[str, Any]) -> tuple[bool, str]:
    """A replay under another torch major reproduces nothing the lock promises (the lock
    policy refuses to train across a torch major), so it is not attempted."""
    from importlib import metadata

    from dlm_git.contract.records import version_major

    recorded = str((lock.get("pinned_versions") or {}).get("torch"))
    installed = metadata.version("torch")
    if version_major(recorded) != version_major(installed):
        return False, (
            f"recorded torch {recorded}, installed torch {installed}: a replay under another "
            f"torch major cannot reproduce this adapter (replay it with torch "
            f"{version_major(recorded)}.x)"
        )
    return True, f"torch {installed} (recorded {recorded})"


def _with(report: DocReport, checks: list[Check], verdict: Verdict, notes: list[str]) -> DocReport:
    return DocReport(
        doc=report.doc,
        level="replay",
        verdict=combine(report.verdict, verdict),
        checks=checks,
        adapter_sha256=report.adapter_sha256,
        notes=[*report.notes, *notes],
        extra=report.extra,
    )


def replay_reports(
    root: Path,
    rev: str,
    reports: list[DocReport],
    level: str,
    sample: int,
    seed: int | None,
    tolerance: float | None = None,
    accept_license: bool = False,
) -> list[DocReport]:
    from dlm_git.verify.commit import is_params_report

    sha = gitio.resolve_commit(rev, root) or rev
    docs = [r for r in reports if not is_params_report(r)]
    about_params = [r for r in reports if is_params_report(r)]  # nothing to replay
    if level == "segments":
        from dlm_git.verify.segments import segment_reports

        return segment_reports(root, sha, docs, sample, seed) + about_params
    limit = None if tolerance is None else check_tolerance(tolerance)
    return [_each(replay_doc, root, sha, r, limit, accept_license) for r in docs] + about_params


def _each(
    replay: Callable[..., DocReport], root: Path, sha: str, report: DocReport, *args: Any
) -> DocReport:
    """One document's replay; a record of its that does not parse fails it alone."""
    try:
        return replay(root, sha, report, *args)
    except DlmGitError as exc:
        checks = [*report.checks, failed("replay", f"nothing replayed: {exc.one_line()}")]
        return _with(report, checks, Verdict.FAILED, [])
