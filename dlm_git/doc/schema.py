"""Frontmatter schema of a `.dlm` document (`dlm_git.validated` records: frozen, unknown
keys refused, values read as pydantic v2 read them in lax mode).

Invariants:
- Unknown keys are errors (the CLI names the key and its line).
- Defaults here are part of the determinism contract: the *effective* training config
  (defaults filled in) is what the manifest digests, so changing a default changes the
  config digest of every document that relies on it.
- Documents written for the original `dlm` tool (`dlm_version` 1..15, `export:` block,
  `sources_policy: permissive`, registry base keys) validate unchanged.
- Numbers are numbers: a YAML boolean is never taken as an integer or a float
  (`max_steps: true` is an error, not 1), and no float field takes `.inf` or `.nan`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from dlm_git.doc.peek import DEFAULT_BASE_MODEL
from dlm_git.doc.ulid import is_ulid
from dlm_git.validated import After, Before, Bounds, Finite, MinLength, Record

MAX_DLM_VERSION = 15
GiB = 1024**3


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not the boolean {str(value).lower()}")
    return value


NotBool = Before(_not_a_bool)
Int = Annotated[int, NotBool]
Float = Annotated[float, NotBool, Finite()]


def _path_not_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("path must not be empty")
    return value


def _known_profile(value: str | None) -> str | None:
    from dlm_git.numerics.table import PROFILES

    if value is not None and value != "auto" and value not in PROFILES:
        raise ValueError(f"unknown numerics profile {value!r}; use one of {', '.join(PROFILES)}")
    return None if value == "auto" else value


def _targets_not_empty(value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    if isinstance(value, tuple) and not value:
        raise ValueError("target_modules must be 'auto' or a non-empty list")
    return value


def _ulid(value: str) -> str:
    if not is_ulid(value):
        raise ValueError(
            "dlm_id must be a 26-character Crockford ULID (e.g. 01JD3Z8X9Q4W5E6R7T8Y9V0A1K)"
        )
    return value.upper()


class Frozen(Record):
    """The records of a document's frontmatter."""


class SourceSpec(Frozen):
    """One `training.sources` directive: a file or directory pulled into training."""

    path: Annotated[str, After(_path_not_empty)]
    include: tuple[str, ...] = ("**/*",)
    exclude: tuple[str, ...] = ()
    max_bytes_per_file: Annotated[Int, Bounds(gt=0)] = 1_000_000
    max_files: Annotated[Int, Bounds(gt=0)] = 10_000


class CacheConfig(Frozen):
    enabled: bool = True
    max_bytes: Annotated[Int, Bounds(gt=0)] = 10 * GiB
    prune_older_than_days: Annotated[Int, Bounds(gt=0)] = 90


class TrainingConfig(Frozen):
    adapter: Literal["lora"] = "lora"
    lora_r: Annotated[Int, Bounds(ge=1, le=1024)] = 8
    lora_alpha: Annotated[Float, Bounds(gt=0)] = 16
    lora_dropout: Annotated[Float, Bounds(ge=0, lt=1)] = 0.05
    target_modules: Annotated[Literal["auto"] | tuple[str, ...], After(_targets_not_empty)] = "auto"
    sequence_len: Annotated[Int, Bounds(ge=16, le=131072)] = 256
    micro_batch_size: Annotated[Int, Bounds(ge=1)] = 4
    grad_accum: Annotated[Int, Bounds(ge=1)] = 1
    learning_rate: Annotated[Float, Bounds(gt=0)] = 2e-4
    num_epochs: Annotated[Int, Bounds(ge=1)] = 1
    max_steps: Annotated[Int, Bounds(ge=1)] | None = None
    seed: Annotated[Int, Bounds(ge=0, lt=2**32)] = 42
    lr_scheduler: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: Annotated[Float, Bounds(ge=0, le=1)] = 0.1
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% more compute; the
    same bits on CPU). Recorded in `dlm.lock` and the effective config when on."""
    sources: tuple[SourceSpec, ...] = ()
    sources_policy: Literal["strict", "permissive"] = "strict"
    cache: CacheConfig = CacheConfig()
    val_fraction: Annotated[Float, Bounds(gt=0, lt=1)] | None = None
    """The held-out split (`dlm_git.train.heldout`): about this fraction of the rows is
    never trained on. None (the default): off, and recorded nowhere."""
    segment_every: Annotated[Int, Bounds(ge=0)] | None = None
    """Segment snapshot interval in optimizer steps; None: about 4 segments; 0: none."""
    numerics: Annotated[str | None, After(_known_profile)] = None
    """Numerics profile (`dlm_git.numerics`); None: the default for the device. Recorded
    in `dlm.lock`, not in the manifest's training config."""


class ExportConfig(Frozen):
    """Kept and shown for compatibility with the original `dlm`; dlm-git does not export."""

    default_quant: str | None = None
    default_temperature: Float | None = None
    default_top_p: Float | None = None


class EvalConfig(Frozen):
    """`eval:`: what `dlm-git eval` runs besides val loss and probes (docs/eval.md). Not
    part of the training config: no digest of the effective config holds it."""

    tasks: tuple[Annotated[str, MinLength(1)], ...] = ()
    """lm-evaluation-harness task YAML files, relative to the document's directory."""


class Frontmatter(Frozen):
    dlm_id: Annotated[str, After(_ulid)]
    dlm_version: Annotated[Int, Bounds(ge=1, le=MAX_DLM_VERSION)] = 1
    base_model: str = DEFAULT_BASE_MODEL
    system_prompt: str | None = None
    training: TrainingConfig = TrainingConfig()
    eval: EvalConfig = EvalConfig()
    export: ExportConfig | None = None
