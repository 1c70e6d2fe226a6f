"""Assemble a training: the base with fresh LoRA layers, the loop's configuration, and
the effective training config the manifest digests.

Invariants:
- One derivation of what a run trains under: `run_config` gives the loop configuration,
  the step and warmup counts and the effective config, for one process and for N
  data-parallel ranks alike (the world size is part of what was trained: each step
  reads `grad_accum x world_size` micro-batches, and the config records it when > 1).
- `build_model` is the one way a model is made, from the seed: train, the ranks and
  segment replay all build theirs here, and the same inputs give the same weights.
- torch, peft and transformers are imported only inside the functions that need them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dlm_git.base.resolve import ResolvedBase, check_native_model
from dlm_git.doc.load import LoadedDocument
from dlm_git.doc.schema import TrainingConfig
from dlm_git.hashing import canonical_json_sha256
from dlm_git.train.options import TrainError

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

    from dlm_git.train.loop import LoopConfig
    from dlm_git.train.pipeline import TokenizeResult
    from dlm_git.train.segments import SegmentWriter

LOSS_POLICY = {"prose": "all tokens", "instruction": "answer tokens"}


def effective_config(
    training: TrainingConfig,
    system_prompt: str | None,
    target_modules: list[str],
    steps: int,
    warmup: int,
    precision: str,
    template_kind: str,
) -> dict[str, Any]:
    from dlm_git.train.loop import MAX_GRAD_NORM, OPTIMIZER

    excluded = {"cache", "sources", "sources_policy", "segment_every", "numerics"}
    if not training.gradient_checkpointing:  # off is the default, and older records' form
        excluded.add("gradient_checkpointing")
    if training.val_fraction is None:  # no held-out split: the records of before it existed
        excluded.add("val_fraction")
    cfg = training.model_dump(mode="json", exclude=excluded)
    cfg.update(
        {
            "target_modules": sorted(target_modules),
            "total_steps": steps,
            "warmup_steps": warmup,
            "precision": precision,
            "optimizer": OPTIMIZER,
            "max_grad_norm": MAX_GRAD_NORM,
            "system_prompt": system_prompt,
            "template": template_kind,
            "loss": LOSS_POLICY,
        }
    )
    return cfg


@dataclass(frozen=True)
class RunConfig:
    """What a run trains under: the loop's configuration, its step count, and the
    effective config the manifest records and digests."""

    loop: LoopConfig
    steps: int
    config: dict[str, Any]


def run_config(
    loaded: LoadedDocument,
    tok: TokenizeResult,
    device: str,
    precision: str,
    targets: list[str],
    world_size: int = 1,
) -> RunConfig:
    """The one derivation of steps, warmup and the effective config (one process or
    `world_size` ranks)."""
    from dlm_git.train.loop import total_steps, warmup_steps

    fm = loaded.doc.frontmatter
    training = fm.training
    loop = loop_config(training, device, precision, tok.pad_id, world_size)
    steps = total_steps(len(tok.sequences), loop)
    warmup = warmup_steps(steps, training.warmup_ratio)
    config = effective_config(
        training, fm.system_prompt, targets, steps, warmup, precision, tok.template_kind
    )
    if world_size > 1:
        config["world_size"] = world_size
    return RunConfig(loop, steps, config)


def resolve_targets(model: PreTrainedModel, requested: str | tuple[str, ...]) -> list[str]:
    """LoRA targets by module name: `auto` takes every linear layer inside the repeated
    decoder blocks (a numbered path component: `model.layers.3.self_attn.q_proj`,
    `gpt_neox.layers.0.attention.query_key_value`, `transformer.h.1.mlp.c_fc`), whatever
    the family calls them; the output head and embeddings are never targets."""
    names = sorted({leaf for leaf in _block_linears(model)})
    if requested == "auto":
        if not names:
            raise TrainError("target_modules", "no linear layers found inside decoder blocks")
        return names
    missing = sorted(set(requested) - set(names))
    if missing:
        raise TrainError(
            "training.target_modules",
            f"not linear modules of the base: {', '.join(missing)}",
            f"available: {', '.join(names)}",
        )
    return sorted(requested)


def _block_linears(model: PreTrainedModel) -> list[str]:
    """The last name component of each linear (or transformers Conv1D) module that sits
    inside a numbered block."""
    import torch
    from transformers.pytorch_utils import Conv1D

    head = model.get_output_embeddings()  # type: ignore[no-untyped-call]
    out = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear | Conv1D) or module is head:
            continue
        parts = name.split(".")
        if any(p.isdigit() for p in parts[:-1]):
            out.append(parts[-1])
    return out


def build_model(
    base_path: Path, training: TrainingConfig, device: str
) -> tuple[PeftModel, list[str]]:
    """The base with fresh LoRA layers, initialised from the seed (train and replay)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    check_native_model(base_path)
    torch.manual_seed(training.seed)
    # never run code shipped with a base; the config is loaded under the same flag
    model: Any = AutoModelForCausalLM.from_pretrained(
        str(base_path), dtype=torch.float32, trust_remote_code=False
    )
    if training.gradient_checkpointing:
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    targets = resolve_targets(model, training.target_modules)
    lora = LoraConfig(
        r=training.lora_r,
        lora_alpha=training.lora_alpha,  # type: ignore[arg-type]  # peft takes floats
        lora_dropout=training.lora_dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(training.seed)
    peft_model = cast("PeftModel", get_peft_model(model, lora))  # mixed=False: a PeftModel
    peft_model.to(device)
    return peft_model, targets


def loop_config(
    training: TrainingConfig, device: str, precision: str, pad_id: int, world_size: int = 1
) -> LoopConfig:
    from dlm_git.train.loop import LoopConfig

    return LoopConfig(
        learning_rate=training.learning_rate,
        lr_scheduler=training.lr_scheduler,
        warmup_ratio=training.warmup_ratio,
        num_epochs=training.num_epochs,
        max_steps=training.max_steps,
        micro_batch_size=training.micro_batch_size,
        grad_accum=training.grad_accum,
        seed=training.seed,
        device=device,
        precision=precision,
        pad_id=pad_id,
        world_size=world_size,
    )


def resolve_precision(requested: str, device: str) -> str:
    if device == "cpu":
        if requested in ("bf16", "fp16"):
            raise TrainError(
                "training.precision", f"{requested} is not supported on CPU", "use fp32 or auto"
            )
        return "fp32"
    return "fp32" if requested == "auto" else requested


def quiet_libraries() -> None:
    """No transformers progress bars or advisory warnings in a training's output."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    warnings.filterwarnings("ignore", category=FutureWarning)


@dataclass
class TrainingRun:
    """A run assembled and ready to train: the model with fresh LoRA layers, the loop's
    configuration, the effective training config the manifest digests, and the segment
    snapshot writer (None when snapshots are off)."""

    model: PeftModel
    loop_cfg: LoopConfig
    config: dict[str, Any]
    every: int
    segments: SegmentWriter | None


def build_training(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    device: str,
    tok: TokenizeResult,
    segment_every: int | None,
) -> TrainingRun:
    from dlm_git.train.segments import SegmentWriter, genesis, resolve_every

    quiet_libraries()
    training = loaded.doc.frontmatter.training
    precision = resolve_precision(training.precision, device)
    model, targets = build_model(resolved.path, training, device)
    cfg = run_config(loaded, tok, device, precision, targets)
    every = resolve_every(
        segment_every if segment_every is not None else training.segment_every, cfg.steps
    )
    segments = None
    if every:
        start = genesis(
            canonical_json_sha256(cfg.config), tok.stream_root, resolved.identity.tensor_root
        )
        segments = SegmentWriter.create(loaded.layout, every, start)
    return TrainingRun(model, cfg.loop, cfg.config, every, segments)
