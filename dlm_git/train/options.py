"""What a training is asked to do (`TrainOptions`), what it gave (`TrainOutcome`), and
the train errors.

Invariants:
- `TrainOptions` is the whole request: a training run in a child interpreter receives
  exactly these fields (`dlm_git.train.protocol.TrainRequest`), nothing is dropped on
  the way, and every field has a wire form.
- `TrainOutcome` is the same whether the training ran in this process or in a child.
- Imports only data types: every module of the package may import this one, and this
  one imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.errors import DlmGitError
from dlm_git.lock.decision import LockMode

if TYPE_CHECKING:
    from dlm_git.lock.policy import Finding
    from dlm_git.lock.schema import Lock
    from dlm_git.manifest.schema import Manifest


class TrainError(DlmGitError):
    """Training cannot proceed (no rows, bad device, ...)."""


@dataclass
class TrainOptions:
    lock_mode: LockMode = "default"
    use_cache: bool = True
    device: str = "auto"
    threads: int | None = None
    accept_license: bool = False
    quiet: bool = False
    """No plan or progress on stderr (`--no-progress`, replays, children); shown only on a
    terminal anyway (`dlm_git.train.progress`), and never changing a record."""
    segment_every: int | None = None
    tiny_dir: Path | None = None
    """Use this directory as the built-in tiny base (the pipeline's `base` stage output)."""
    base_dir: Path | None = None
    """Use this directory for a local-directory `base_model` (a replay's real base)."""
    numerics: str | None = None
    """Numerics profile (None or `auto`: the document's `training.numerics`, else the
    default for the device)."""
    replay_flags: dict[str, Any] | None = None
    """A replay: the recorded `determinism_flags` (a `native` replay forces them). A replay
    trains a document materialised from a commit, so sources outside the repository are
    refused (`Outside.REFUSE`): what this machine has there is not the commit's."""
    nproc: int = 1
    """Data-parallel processes (`dlm_git.train.launch`); recorded in the lock when > 1."""
    max_steps: int | None = None
    """`--max-steps N`: stop after N optimizer steps, whatever the document says; recorded
    in the effective config and the lock (`dlm_git.train.smoke`)."""


@dataclass
class TrainOutcome:
    doc_path: Path
    adapter_sha256: str
    tensor_root: str
    lock: Lock
    lock_written: bool
    manifest: Manifest
    warnings: list[Finding] = field(default_factory=list)
    run_record: dict[str, Any] = field(default_factory=dict)
