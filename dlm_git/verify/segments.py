"""Segment verification: check the whole boundary chain, replay K sampled segments.

Invariants:
- The chain is always checked in full: every boundary's tensors file matches the sha256
  its JSON records, every `prev` is the digest of the boundary before (the first is the
  genesis digest of config, token stream and base), the last digest is the manifest's
  chain root, and the last boundary's LoRA tensors are the adapter's.
- K segments are drawn with a `random.Random(seed)`; the seed is fresh unless given and
  is always printed, so a run can be repeated (`--seed`).
- A replayed segment must reproduce its end boundary byte for byte; on a mismatch the
  report names the first step whose loss differs (or the boundary step, if only the final
  update differs).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlm_git import gitio, numerics, revdoc
from dlm_git.determinism import Plan, plan
from dlm_git.dvcfiles import DvcRecordError
from dlm_git.errors import DlmGitError
from dlm_git.hashing import sha256_bytes
from dlm_git.layout import LOCK_NAME, MANIFEST_NAME, SEGMENTS_DIR
from dlm_git.manifest.records import ADAPTER_WEIGHTS, read_manifest_bytes
from dlm_git.verify.checks import Check, Outcome, absent, failed, judged, passed
from dlm_git.verify.commit import assemble_adapter, copy_out
from dlm_git.verify.profile import Setup, recorded_setup
from dlm_git.verify.report import CANNOT_VERIFY, FAILED, DocReport, Verdict, combine

SEGMENTS_OK = Verdict.SEGMENTS_BITWISE


def check_chain(
    boundaries: list[tuple[int, bytes, bytes]],
    genesis_digest: str,
    manifest: Any,
    adapter_dir: Path,
) -> tuple[list[str], str | None]:
    """Digests in order, or the first problem found."""
    from safetensors.numpy import load, load_file

    from dlm_git.train.segments import adapter_name, parse_meta

    record = manifest.segments
    if len(boundaries) != record.count:
        return [], f"{len(boundaries)} boundaries found, manifest records {record.count}"
    prev, digests = genesis_digest, list[str]()
    for step, meta_bytes, blob in boundaries:
        try:
            meta = parse_meta(meta_bytes)
        except (ValueError, UnicodeDecodeError):
            return digests, f"boundary {step}: JSON does not parse"
        if meta.get("step") != step:
            return digests, f"boundary {step}: records step {meta.get('step')}"
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
    final = load(boundaries[-1][2])
    adapter = load_file(str(adapter_dir / ADAPTER_WEIGHTS))
    params = {
        adapter_name(k.removeprefix("param/")): v
        for k, v in final.items()
        if k.startswith("param/")
    }
    if set(params) != set(adapter) or any(
        params[k].tobytes() != adapter[k].tobytes() for k in adapter
    ):
        return digests, "the last boundary's LoRA tensors are not the adapter's"
    return digests, None


def segment_reports(
    root: Path, sha: str, reports: list[DocReport], sample: int, seed: int | None
) -> list[DocReport]:
    seed = seed if seed is not None else secrets.randbelow(2**31)
    return [_each(root, sha, r, sample, seed) for r in reports]


def _each(root: Path, sha: str, report: DocReport, sample: int, seed: int) -> DocReport:
    """One document's segment check; a record of its that does not parse (or nests past
    the parser's bound) fails it alone, and the others still get their verdicts."""
    try:
        return segment_doc(root, sha, report, sample, seed)
    except DlmGitError as exc:
        checks = [*report.checks, failed("segments.chain", f"nothing replayed: {exc.one_line()}")]
        return _with(report, checks, FAILED, [])
    except RecursionError:
        checks = [*report.checks, failed("segments.chain", "a record nests too deeply to read")]
        return _with(report, checks, FAILED, [])


def segment_doc(root: Path, sha: str, report: DocReport, sample: int, seed: int) -> DocReport:
    from dlm_git.train.segments import genesis

    doc_rel = report.doc
    prefix = "" if doc_rel == "." else doc_rel + "/"
    blobs = gitio.cat_files(
        [f"{sha}:{prefix}{MANIFEST_NAME}", f"{sha}:{prefix}{LOCK_NAME}", f"{sha}:dvc.lock"], root
    )
    checks = list(report.checks)
    notes = [f"segment sample seed {seed} (repeat with --seed {seed})"]
    manifest_bytes = blobs.get(f"{sha}:{prefix}{MANIFEST_NAME}")
    if manifest_bytes is None:
        checks.append(failed("segments.chain", "no manifest"))
        return _with(report, checks, FAILED, notes)
    manifest = read_manifest_bytes(manifest_bytes, MANIFEST_NAME)
    if manifest.segments is None:
        why = "trained without segment snapshots (training.segment_every: 0)"
        checks.append(absent("segments.chain", why))
        return _with(report, checks, CANNOT_VERIFY, notes)
    from dlm_git.lock.io import parse_lock_json

    lock_bytes = blobs.get(f"{sha}:{prefix}{LOCK_NAME}")
    if lock_bytes is None:
        checks.append(failed("segments.replay", "no dlm.lock to replay against"))
        return _with(report, checks, FAILED, notes)
    lock = parse_lock_json(lock_bytes, LOCK_NAME)
    with tempfile.TemporaryDirectory(prefix="dlm-git-segments-") as tmp:
        work = Path(tmp)
        seg_dir, adapter_dir = work / "segments", work / "adapter"
        missing = assemble_adapter(root, blobs.get(f"{sha}:dvc.lock"), doc_rel, adapter_dir)
        try:
            missing = missing or copy_out(
                root, blobs.get(f"{sha}:dvc.lock"), doc_rel, SEGMENTS_DIR, seg_dir
            )
        except DvcRecordError as exc:  # malformed is a failure, not an absence
            checks.append(failed("segments.chain", f"malformed record: {exc.one_line()}"))
            return _with(report, checks, FAILED, notes)
        if missing:
            checks.append(absent("segments.chain", missing))
            return _with(report, checks, CANNOT_VERIFY, notes)
        from dlm_git.train.segments import read_boundaries

        boundaries = read_boundaries(seg_dir)
        gen = genesis(manifest.config_sha256, manifest.tokens.root, manifest.base.tensor_root)
        digests, problem = check_chain(boundaries, gen, manifest, adapter_dir)
        checks.append(
            judged(
                "segments.chain",
                problem is None,
                problem
                or f"{len(digests)} boundaries chained to {manifest.segments.chain_root[:16]}",
            )
        )
        if problem is not None:
            return _with(report, checks, FAILED, notes)
        # The chain holds; replaying needs the recorded profile (checked only now, so a
        # machine that cannot run it still checks the whole chain).
        setup = recorded_setup(lock, root, doc_rel)
        if isinstance(setup, tuple):
            checks.append(setup[0])
            return _with(report, checks, setup[1], notes)
        if setup.nproc > 1:  # snapshots are one process's; ranks take none
            why = (
                f"cannot replay segments of a {setup.nproc}-rank training here (segment"
                " replay runs one process; use --level replay)"
            )
            checks.append(absent("segments.replay", why))
            return _with(report, checks, CANNOT_VERIFY, notes)
        run_plan = plan(setup.device, setup.profile.name, None, setup.flags)
        if not numerics.can_run_in_process(run_plan.env):
            return segment_doc_in_child(root, sha, report, sample, seed, run_plan.env)
        n = len(boundaries) - 1
        picks = sorted(random.Random(seed).sample(range(1, n + 1), min(sample, n)))
        notes.append(f"replaying segments {picks} of {n}")
        try:
            results, expectation = replay_segments(
                root,
                sha,
                doc_rel,
                manifest,
                (setup, run_plan, lock.get("pinned_versions") or {}),
                boundaries,
                digests,
                picks,
                work,
            )
        except DlmGitError as exc:
            checks.append(absent("segments.replay", f"cannot replay: {exc.one_line()}"))
            return _with(report, checks, CANNOT_VERIFY, notes)
    if not expectation.bits:
        notes.append(f"bit equality not expected: {expectation.reason}")
    for index, problem in results:
        start, end = boundaries[index - 1][0], boundaries[index][0]
        done = f"segment {index} (steps {start + 1}-{end}) bitwise identical"
        if problem is None:
            checks.append(passed("segments.replay", done))
        else:  # a divergence accuses only where bits were expected
            checks.append((failed if expectation.bits else absent)("segments.replay", problem))
    ok = all(c.ok for c in checks)
    # A diverging segment accuses only where bits were expected.
    verdict = SEGMENTS_OK if ok else (Verdict.MISMATCH if expectation.bits else CANNOT_VERIFY)
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
    # `--doc=NAME`: a document directory named like an option stays a value
    argv = [sys.executable, "-m", "dlm_git", "verify", sha, f"--doc={report.doc}"]
    argv += ["--level", "segments", "--sample", str(sample), "--seed", str(seed), "--json"]
    env_child = numerics.apply_to(dict(os.environ), env)
    proc = subprocess.run(argv, cwd=root, env=env_child, capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout)["documents"][0]
        checks = [
            Check(str(c["name"]), Outcome(c["state"]), str(c["detail"])) for c in doc["checks"]
        ]
        verdict = Verdict(str(doc["verdict"]))
    except (ValueError, KeyError, IndexError, TypeError):
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit {proc.returncode}"
        checks = [*report.checks, absent("segments.replay", f"cannot replay: {why}")]
        return _with(report, checks, CANNOT_VERIFY, [])
    known = {"doc", "level", "verdict", "checks", "adapter_sha256", "notes", "passed", "failed"}
    return DocReport(
        doc=report.doc,
        level="segments",
        verdict=verdict,
        checks=checks,
        adapter_sha256=report.adapter_sha256,
        notes=[str(n) for n in doc.get("notes", [])],
        extra={k: v for k, v in doc.items() if k not in known},
    )


def replay_segments(
    root: Path,
    sha: str,
    doc_rel: str,
    manifest: Any,
    pinned: tuple[Setup, Plan, Mapping[str, Any]],
    boundaries: list[tuple[int, bytes, bytes]],
    digests: list[str],
    picks: list[int],
    work: Path,
) -> tuple[list[tuple[int, str | None]], numerics.Expectation]:
    from safetensors.numpy import load

    from dlm_git.base.resolve import resolve_base
    from dlm_git.determinism import prepare
    from dlm_git.doc.load import load_document
    from dlm_git.doc.sources import Outside
    from dlm_git.train.loop import make_trainer, train_loop
    from dlm_git.train.pipeline import tokenize_document
    from dlm_git.train.run import build_model, loop_config, resolve_precision
    from dlm_git.train.segments import capture, encode_boundary, parse_meta, restore
    from dlm_git.versions import pinned_versions

    setup, run_plan, recorded_versions = pinned
    numerics.activate(run_plan.env)  # before anything below imports torch
    tree = work / "tree"
    if revdoc.materialize(root, doc_rel, sha, tree) is None:
        raise DlmGitError(doc_rel, "no single .dlm in the document directory at this commit")
    loaded = load_document(tree / doc_rel, Outside.REFUSE)  # a commit's inputs only
    training = loaded.doc.frontmatter.training
    resolved = resolve_base(
        loaded.doc.frontmatter.base_model,
        loaded.doc.directory,
        loaded.repo_root,
        local_dir=setup.base_dir,
    )
    env = prepare(training.seed, run_plan, setup.threads)
    device = env.device
    expectation = numerics.expect_bits(
        setup.flags, env.flags, recorded_versions, pinned_versions(), env.hardware.tier
    )
    tok = tokenize_document(loaded, resolved, use_cache=False)
    if tok.stream_root != manifest.tokens.root:
        raise DlmGitError("segments", "re-tokenized stream differs from the manifest's token root")
    precision = resolve_precision(training.precision, device)
    results: list[tuple[int, str | None]] = []
    for index in picks:
        start_step, start_meta, start_blob = boundaries[index - 1]
        end_step, end_meta, _ = boundaries[index]
        model, _ = build_model(resolved.path, training, device)
        cfg = loop_config(training, device, precision, tok.pad_id)
        trainer = make_trainer(model, len(tok.sequences), cfg)
        restore(model, trainer, load(start_blob), parse_meta(start_meta))
        result = train_loop(model, tok.sequences, cfg, trainer=trainer, stop_at=end_step)
        tensors, scalars = capture(model, trainer)
        _, _, digest = encode_boundary(tensors, scalars, result.losses, digests[index - 1])
        if digest == digests[index]:
            results.append((index, None))
            continue
        recorded = parse_meta(end_meta).get("losses_hex") or []
        from dlm_git.hashing import float_hex

        replayed = [float_hex(v) for v in result.losses]
        pairs = enumerate(zip(recorded, replayed, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), None)
        step = start_step + 1 + first if first is not None else end_step
        results.append(
            (
                index,
                f"segment {index} (steps {start_step + 1}-{end_step}) diverges;"
                f" first divergent step {step}",
            )
        )
    return results, expectation


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
