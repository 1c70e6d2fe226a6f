"""What a training records: the lock (and its decision), the manifest, metrics and loss,
and the gitignored run record.

Invariants:
- `dlm.lock`, `manifest.json`, `metrics.json`, `train_loss.tsv` are pure functions of
  the inputs; wall times, throughput and the machine go only to the gitignored run
  record (`run.json`).
- Lock modes: default (ERROR aborts, WARN warns), strict (WARN aborts too), update
  (no validation; writes with `supersedes` = sha256 of the replaced lock), ignore (no
  validation, lock not written); the decision is `lock.decision`'s, rendered here, and
  its WARN findings are printed by `report_warnings` only (for a run in this process
  and for one in a child alike).
- The records are written after the adapter is installed, each atomically, the
  manifest last.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.base.build import built_here
from dlm_git.base.registry import REGISTRY
from dlm_git.base.resolve import ResolvedBase
from dlm_git.doc.load import LoadedDocument
from dlm_git.doc.schema import TrainingConfig
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json, canonical_json_sha256, digest_text, float_hex
from dlm_git.lock.decision import LockMode, lock_to_write
from dlm_git.lock.errors import LockValidationError
from dlm_git.lock.io import read_lock
from dlm_git.lock.policy import Finding
from dlm_git.lock.schema import LicenseAcceptance, Lock
from dlm_git.manifest.records import sources_record
from dlm_git.manifest.schema import (
    AdapterRecord,
    BaseRecord,
    Manifest,
    SegmentsRecord,
    TokensRecord,
    TrainingResult,
)
from dlm_git.topology import topology_flags
from dlm_git.train.assemble import resolve_precision
from dlm_git.train.options import TrainError
from dlm_git.train.progress import notice
from dlm_git.train.smoke import smoke_flags
from dlm_git.versions import pinned_versions

if TYPE_CHECKING:
    from dlm_git.layout import DocLayout
    from dlm_git.numerics.prepare import Environment, HardwareInfo
    from dlm_git.numerics.table import DeterminismClass
    from dlm_git.train.loop import LoopResult
    from dlm_git.train.pipeline import TokenizeResult

PERMISSIVE_LICENSES = frozenset({"apache-2.0", "mit", "bsd-3-clause", "bsd-2-clause"})


def license_acceptance(resolved: ResolvedBase, accept: bool) -> LicenseAcceptance:
    spec = resolved.spec
    if spec.kind == "builtin":
        return LicenseAcceptance(license="MIT", requires_acceptance=False, accepted=True)
    if spec.registry_key is not None:
        lic = REGISTRY[spec.registry_key].license
    elif built_here(resolved.path) is not None:
        lic = "mit"  # random weights drawn by `dlm-git base build`: dlm-git's own license
    else:
        lic = "unknown"
    requires = lic not in PERMISSIVE_LICENSES
    if requires and not accept:
        raise TrainError(
            "base_model",
            f"base '{spec.raw}' has license '{lic}', which must be accepted explicitly",
            "read the license, then re-run with --accept-license (recorded in dlm.lock)",
        )
    return LicenseAcceptance(license=lic, requires_acceptance=requires, accepted=True)


def build_lock(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    hw: HardwareInfo,
    flags: dict[str, Any],
    klass: DeterminismClass,
    accept_license: bool,
    nproc: int = 1,
    max_steps: int | None = None,
) -> Lock:
    """The lock of a run; `max_steps`: a `--max-steps` limit (`dlm_git.train.smoke`)."""
    fm = loaded.doc.frontmatter
    flags = {
        **flags,
        **training_flags(fm.training, hw.device),
        **topology_flags(nproc, hw.device),
        **smoke_flags(max_steps),
    }
    return Lock(
        dlm_id=fm.dlm_id,
        dlm_sha256=loaded.doc.sha256,
        base_model=fm.base_model,
        base_model_revision=resolved.identity.revision,
        base_model_sha256=resolved.identity.tensor_root,
        pinned_versions=pinned_versions(),
        cuda_version=hw.details.get("cuda_version") if hw.device == "cuda" else None,
        rocm_version=hw.details.get("rocm_version") if hw.device == "cuda" else None,
        hardware_tier=hw.tier,
        seed=fm.training.seed,
        val_fraction=fm.training.val_fraction,
        determinism_flags=flags,
        determinism_class=klass,
        license_acceptance=license_acceptance(resolved, accept_license),
    )


def training_flags(training: TrainingConfig, device: str) -> dict[str, Any]:
    """The training options the lock records beside the kernel facts: the precision a GPU
    run computes in, and gradient checkpointing when on (absent: off, so records made
    before the option existed read the same)."""
    flags: dict[str, Any] = {}
    if device.startswith("cuda"):
        flags["precision"] = resolve_precision(training.precision, device)
    if training.gradient_checkpointing:
        flags["gradient_checkpointing"] = True
    return flags


def validate_lock(
    prior: Lock | None, current: Lock, mode: LockMode, subject: str
) -> tuple[Lock, list[Finding]]:
    """The lock to write and the WARN findings to print; the lock decision's errors
    rendered as a `LockValidationError`."""
    lock, decision = lock_to_write(prior, current, mode)
    if not decision.ok:
        flag = "--update-lock" if mode == "default" else "--update-lock (or drop --strict-lock)"
        raise LockValidationError(
            subject,
            [f"ERROR {f.describe()}" for f in decision.errors],
            f"if the change is intended, re-run with {flag} to accept it and record "
            "`supersedes`; otherwise restore the environment the lock records "
            "(see docs/determinism.md)",
        )
    return lock, list(decision.warnings)


def decide_lock(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    env: Environment,
    mode: LockMode,
    accept_license: bool,
    nproc: int,
    max_steps: int | None = None,
) -> tuple[Lock, list[Finding]]:
    """The lock this run records and the WARN findings it prints (ERROR raises)."""
    current = build_lock(
        loaded, resolved, env.hardware, env.flags, env.klass, accept_license, nproc, max_steps
    )
    layout = loaded.layout
    warnings_: list[Finding] = []
    if mode == "ignore":  # no validation, nothing written: don't even read it
        lock = current
    elif mode == "update" and _corrupt(layout.lock):
        # Accepting over a corrupt lock binds the acceptance to the exact bytes replaced.
        # (in the form git stores, as the hook hashes HEAD's lock: `canonical_text`)
        replaced = digest_text(layout.lock.read_bytes()).sha256
        lock = current.model_copy(update={"supersedes": replaced})
    else:
        prior = read_lock(layout.lock)
        lock, warnings_ = validate_lock(prior, current, mode, str(layout.lock))
    report_warnings(layout.lock, warnings_)
    return lock, warnings_


def report_warnings(lock_path: Path, findings: Iterable[Finding]) -> None:
    """The lock decision's WARN findings, one line each on the user's stderr (from a
    training child, through its parent: `dlm_git.train.progress.notice`)."""
    for f in findings:
        notice(f"{lock_path}: WARN {f.describe()}")  # the lock's values, escaped


def _corrupt(path: Path) -> bool:
    from dlm_git.lock.errors import LockError

    try:
        read_lock(path)
    except LockError:
        return True
    return False


@dataclass
class Fitted:
    """A finished training whose adapter is installed: what the records are made of."""

    config: dict[str, Any]
    result: LoopResult
    record: AdapterRecord
    segments: SegmentsRecord | None
    seconds: float
    run_facts: dict[str, Any] = field(default_factory=dict)


def write_records(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    tok: TokenizeResult,
    fit: Fitted,
    lock: Lock,
) -> Manifest:
    """metrics.json, train_loss.tsv, then manifest.json last (each atomically)."""
    layout, fm = loaded.layout, loaded.doc.frontmatter
    result, record = fit.result, fit.record
    final_loss = result.losses[-1]
    metrics = {
        "steps": result.steps,
        "final_loss": final_loss,  # exact bits: manifest.training.final_loss_hex
        "tokens_trained": result.tokens,
        "loss_tokens": result.loss_tokens,
        "sequences": len(tok.sequences),
        "rows": tok.rows,
    }
    atomic_write_bytes(layout.metrics, canonical_json(metrics))
    loss_tsv = "step\tloss\n" + "".join(f"{i + 1}\t{v!r}\n" for i, v in enumerate(result.losses))
    atomic_write_bytes(layout.loss, loss_tsv.encode("utf-8"))
    identity = resolved.identity
    manifest = Manifest(
        dlm_id=fm.dlm_id,
        dlm_sha256=loaded.doc.sha256,
        section_ids=loaded.section_ids,
        sources=sources_record(loaded.sources.recorded()),
        tokens=TokensRecord(
            root=tok.stream_root, rows=tok.rows, sequences=len(tok.whole), tokens=tok.whole.tokens
        ),
        tokenizer_sha256=identity.tokenizer_sha256,
        base=BaseRecord(
            spec=fm.base_model,
            kind=resolved.spec.kind,
            revision=identity.revision,
            tensor_root=identity.tensor_root,
            tokenizer_sha256=identity.tokenizer_sha256,
            config_sha256=identity.config_sha256,
        ),
        training_config=fit.config,
        config_sha256=canonical_json_sha256(fit.config),
        lock_sha256=lock.sha256(),
        adapter=record,
        training=TrainingResult(
            steps=result.steps,
            final_loss_hex=float_hex(final_loss),
            tokens_trained=result.tokens,
            skipped_preference_sections=tok.skipped_preference,
        ),
        segments=fit.segments,
    )
    atomic_write_bytes(layout.manifest, manifest.to_bytes())
    return manifest


def write_run_record(
    layout: DocLayout,
    env: Environment,
    tok: TokenizeResult,
    fit: Fitted,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """run.json (gitignored): wall times, throughput and the machine, not a pure function
    of the inputs."""
    train, result = seconds["train"], fit.result
    run_record = {
        "wall_seconds": round(seconds["wall"], 3),
        "tokenize_seconds": round(seconds["tokenize"], 3),
        "train_seconds": round(train, 3),
        "tokens_per_second": round(result.tokens / train, 1) if train > 0 else None,
        "cache": tok.cache_stats,
        "tokens_source": tok.source,
        "host_python": platform.python_version(),
        "numerics": env.profile.name,
        **peak_memory(env.device),
        **fit.run_facts,
        "machine": {k: v for k, v in env.hardware.details.items() if k != "threads"},
    }
    atomic_write_bytes(layout.run_record, canonical_json(run_record))
    return run_record


def peak_memory(device: str) -> dict[str, int]:
    """The process's peak resident set (and the GPU's peak allocation) so far, in bytes."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_bytes": peak if sys.platform == "darwin" else peak * 1024}
    if device.startswith("cuda"):
        import torch

        out["peak_cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    return out
