"""What crosses a process boundary in training: each pair's request and answer.

Invariants:
- The pairs: a training under another numerics profile, `python -m dlm_git.train.child`
  (`TrainRequest` → `TrainResult`), asked and answering through `dlm_git.childproc`;
  the data-parallel ranks, `python -m dlm_git.train.rank` (`RankJob` → `RankResult`,
  documents in the launcher's job directory, since torch's elastic agent starts them),
  written and read back through `dlm_git.childproc` as well. (A segment replay under
  another profile is verify's pair: `dlm_git.verify.segments`.)
- Every field has a wire form and nothing is dropped on the way (`TrainOptions` crosses
  whole). Records inside an answer (the lock, the manifest) travel as their own bytes
  and are read back by their own readers, as the files would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.doc.schema import TrainingConfig
from dlm_git.lock.policy import Finding
from dlm_git.train.options import TrainOptions, TrainOutcome

JOB = "job.json"
"""The ranks' job directory: the `RankJob`, the token stream, rank 0's `RankResult`."""
TOKENS = "tokens.npz"
RESULT = "result.json"
PROGRESS = "progress.json"
"""Rank 0's latest progress (a `dlm_git.train.progress.Progress`), for its launcher to draw."""
PEER_LOST = 75
"""A rank's exit code when it lost a peer (the cause is the rank that failed first)."""


@dataclass(frozen=True)
class TrainRequest:
    """Train `target` with exactly these options (the parent has chosen the profile and
    the device; the child plans the same kernel settings and pins them)."""

    target: Path
    options: TrainOptions


@dataclass(frozen=True)
class TrainResult:
    """A `TrainOutcome` on the wire: the lock and the manifest as their own bytes."""

    doc_path: Path
    adapter_sha256: str
    tensor_root: str
    lock: str
    lock_written: bool
    manifest: str
    warnings: list[Finding]
    run_record: dict[str, Any]

    @classmethod
    def of(cls, outcome: TrainOutcome) -> TrainResult:
        return cls(
            doc_path=outcome.doc_path,
            adapter_sha256=outcome.adapter_sha256,
            tensor_root=outcome.tensor_root,
            lock=outcome.lock.to_bytes().decode("utf-8"),
            lock_written=outcome.lock_written,
            manifest=outcome.manifest.to_bytes().decode("utf-8"),
            warnings=list(outcome.warnings),
            run_record=outcome.run_record,
        )

    def outcome(self) -> TrainOutcome:
        """The outcome, its lock and manifest read by their own readers."""
        from dlm_git.lock.io import parse_lock
        from dlm_git.manifest.records import read_manifest_bytes

        return TrainOutcome(
            doc_path=self.doc_path,
            adapter_sha256=self.adapter_sha256,
            tensor_root=self.tensor_root,
            lock=parse_lock(self.lock.encode("utf-8"), "the training child's lock"),
            lock_written=self.lock_written,
            manifest=read_manifest_bytes(
                self.manifest.encode("utf-8"), "the training child's manifest"
            ),
            warnings=list(self.warnings),
            run_record=dict(self.run_record),
        )


@dataclass(frozen=True)
class RankJob:
    """What every rank is told: the same plan, base and config (`dlm_git.train.rank`)."""

    launcher_pid: int
    device: str
    numerics: str
    replay_flags: dict[str, Any] | None
    threads: int
    training: TrainingConfig
    base_path: Path
    base_repo_id: str | None
    """The base as the adapter config names it (`dlm_git.train.adapter.HubBase`)."""
    base_revision: str | None
    precision: str
    pad_id: int
    world_size: int
    backend: str
    bucket_elements: int
    staging: Path


@dataclass(frozen=True)
class RankResult:
    """Rank 0's record of the training every rank ran (losses as exact float hex)."""

    losses_hex: list[str]
    steps: int
    tokens: int
    loss_tokens: int
    sequences_seen: int
    targets: list[str]
    flags: dict[str, Any]
    rank0: dict[str, Any]
