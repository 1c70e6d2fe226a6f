"""Replay verification: re-train a commit's document from its own inputs and compare.

Invariants:
- The replay trains a copy of the commit's document and sources (from git objects) in a
  temp directory with the lock's seed and recorded thread count; the work tree, the index,
  the token cache and `tokens/` are not used (`--no-cache` semantics).
- Same hardware tier and determinism flags under class `strong`: the only passing verdict
  is `BITWISE` (identical adapter bytes); anything else is `MISMATCH`, naming the first
  tensor that differs.
- Otherwise bit-equality is not promised: the replay is compared per tensor by relative
  L2 distance against `verify.tolerance.max_rel_l2` from the commit's params.yaml (a
  tolerance declared before the run), giving `WITHIN_TOLERANCE` or `MISMATCH`, and the
  report says why bit-equality was not expected.
- Base not available → `CANNOT_VERIFY` with what to fetch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from dlm_git import gitio
from dlm_git.doc.peek import source_dirs
from dlm_git.errors import DlmGitError
from dlm_git.layout import LOCK_NAME
from dlm_git.manifest.records import ADAPTER_WEIGHTS
from dlm_git.verify.checks import Check
from dlm_git.verify.commit import assemble_adapter
from dlm_git.verify.report import CANNOT_VERIFY, DocReport

DEFAULT_MAX_REL_L2 = 1e-3
BITWISE = "BITWISE"
WITHIN_TOLERANCE = "WITHIN_TOLERANCE"
MISMATCH = "MISMATCH"


def declared_tolerance(root: Path, sha: str) -> float:
    data = gitio.cat_files([f"{sha}:params.yaml"], root).get(f"{sha}:params.yaml")
    try:
        params = yaml.safe_load(data.decode("utf-8")) if data else {}
        value = ((params or {}).get("verify") or {}).get("tolerance", {}).get("max_rel_l2")
    except (yaml.YAMLError, UnicodeDecodeError, AttributeError):
        value = None
    return float(value) if isinstance(value, (int, float)) else DEFAULT_MAX_REL_L2


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


def replay_doc(root: Path, sha: str, report: DocReport) -> DocReport:
    from dlm_git.determinism import detect_hardware
    from dlm_git.lock.io import parse_lock_json
    from dlm_git.train.run import TrainOptions, run_train

    doc_rel = report.doc
    prefix = "" if doc_rel == "." else doc_rel + "/"
    lock_bytes = gitio.cat_files([f"{sha}:{prefix}{LOCK_NAME}"], root).get(
        f"{sha}:{prefix}{LOCK_NAME}"
    )
    checks = list(report.checks)
    if lock_bytes is None:
        checks.append(Check("replay", False, "no dlm.lock to replay against"))
        return _with(report, checks, CANNOT_VERIFY, [])
    lock = parse_lock_json(lock_bytes, LOCK_NAME)
    versions_ok, versions_detail = _replayable_torch(lock)
    checks.append(Check("replay.versions", versions_ok, versions_detail))
    if not versions_ok:
        return _with(report, checks, CANNOT_VERIFY if report.ok else report.verdict, [])
    flags = lock.get("determinism_flags") or {}
    threads = int(flags.get("threads") or 1)
    device = str(flags.get("device") or "cpu")
    with tempfile.TemporaryDirectory(prefix="dlm-git-replay-") as tmp:
        work = Path(tmp)
        tree = work / "tree"
        (tree / ".git").mkdir(parents=True)
        dlm = [p for p in gitio.ls_files([doc_rel], root, rev=sha) if p.endswith(".dlm")]
        dlm_bytes = (
            gitio.cat_files([f"{sha}:{dlm[0]}"], root).get(f"{sha}:{dlm[0]}") if dlm else b""
        )
        gitio.materialize([doc_rel, *source_dirs(doc_rel, dlm_bytes or b"")], tree, root, rev=sha)
        try:
            outcome = run_train(
                tree / doc_rel,
                TrainOptions(
                    lock_mode="ignore", use_cache=False, device=device, threads=threads, quiet=True
                ),
            )
        except DlmGitError as exc:
            checks.append(Check("replay", False, f"cannot replay: {exc.one_line()}"))
            return _with(report, checks, CANNOT_VERIFY, [])
        now = detect_hardware(device, threads)
        same_setup = (
            lock.get("hardware_tier") == outcome.lock.hardware_tier
            and flags == outcome.lock.determinism_flags
            and lock.get("pinned_versions") == outcome.lock.pinned_versions
        )
        expect_bitwise = same_setup and lock.get("determinism_class") == "strong"
        recorded_sha = report.adapter_sha256
        notes: list[str] = [f"replayed on {now.tier} with threads={threads}"]
        if recorded_sha is not None and outcome.adapter_sha256 == recorded_sha:
            checks.append(Check("replay", True, f"bitwise identical adapter {recorded_sha[:16]}"))
            return _with(report, checks, BITWISE if report.ok else report.verdict, notes)
        recorded_dir = work / "recorded"
        dvc_lock = gitio.cat_files([f"{sha}:dvc.lock"], root).get(f"{sha}:dvc.lock")
        missing = assemble_adapter(root, dvc_lock, doc_rel, recorded_dir)
        if expect_bitwise or missing is not None:
            first = None
            if missing is None:
                dist = tensor_distances(
                    recorded_dir / ADAPTER_WEIGHTS, tree / doc_rel / "adapter" / ADAPTER_WEIGHTS
                )
                first = next((n for n, d in dist.items() if d != 0.0), None)
            why = "same tier, flags and versions under class strong: bit equality expected"
            detail = (
                f"replayed adapter {outcome.adapter_sha256[:16]}"
                f" != recorded {str(recorded_sha)[:16]}"
            )
            if first:
                detail += f"; first differing tensor {first}"
            checks.append(
                Check("replay", False, f"{detail} ({why if expect_bitwise else missing})")
            )
            return _with(report, checks, MISMATCH, notes)
        tolerance = declared_tolerance(root, sha)
        dist = tensor_distances(
            recorded_dir / ADAPTER_WEIGHTS, tree / doc_rel / "adapter" / ADAPTER_WEIGHTS
        )
        worst_name, worst = max(dist.items(), key=lambda kv: kv[1]) if dist else ("-", 0.0)
        reason = _why_not_bitwise(lock, outcome.lock.model_dump(mode="json"))
        notes.append(f"bit equality not expected: {reason}")
        ok = worst <= tolerance
        checks.append(
            Check(
                "replay",
                ok,
                f"max relative L2 {worst:.3g} at {worst_name} (tolerance {tolerance:g})",
            )
        )
        return _with(report, checks, WITHIN_TOLERANCE if ok and report.ok else MISMATCH, notes)


def _replayable_torch(lock: dict[str, Any]) -> tuple[bool, str]:
    """A replay under another torch major reproduces nothing the lock promises (the lock
    policy refuses to train across a torch major), so it is not attempted."""
    from importlib import metadata

    from dlm_git.verify.checks import version_major

    recorded = str((lock.get("pinned_versions") or {}).get("torch"))
    installed = metadata.version("torch")
    if version_major(recorded) != version_major(installed):
        return False, (
            f"recorded torch {recorded}, installed torch {installed}: a replay under another "
            f"torch major cannot reproduce this adapter (replay it with torch "
            f"{version_major(recorded)}.x)"
        )
    return True, f"torch {installed} (recorded {recorded})"


def _why_not_bitwise(recorded: dict[str, Any], now: dict[str, Any]) -> str:
    if recorded.get("determinism_class") != "strong":
        return f"recorded class is {recorded.get('determinism_class')}"
    diffs = [
        k
        for k in ("hardware_tier", "determinism_flags", "pinned_versions")
        if recorded.get(k) != now.get(k)
    ]
    return "different " + ", ".join(diffs) if diffs else "unknown"


def _with(report: DocReport, checks: list[Check], verdict: str, notes: list[str]) -> DocReport:
    return DocReport(
        doc=report.doc,
        level="replay",
        verdict=verdict,
        checks=checks,
        adapter_sha256=report.adapter_sha256,
        notes=[*report.notes, *notes],
        extra=report.extra,
    )


def replay_reports(
    root: Path, rev: str, reports: list[DocReport], level: str, sample: int, seed: int | None
) -> list[DocReport]:
    sha = gitio.resolve_commit(rev, root) or rev
    if level == "segments":
        from dlm_git.verify.segments import segment_reports

        return segment_reports(root, sha, reports, sample, seed)
    return [replay_doc(root, sha, r) for r in reports]
