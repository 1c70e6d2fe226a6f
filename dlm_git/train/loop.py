"""A plain PyTorch LoRA training loop whose result depends only on its inputs.

Invariants:
- Data order comes from the seed only: epoch `e` visits sequences in the permutation
  drawn from a `torch.Generator` seeded with `seed + e`.
- Batches are right-padded to their longest sequence; padding never carries loss.
- Everything recorded (per-step loss, steps, token counts) is a function of the inputs;
  wall time (`LoopResult.seconds`, on `time.perf_counter`) is measured here, handed to
  the progress function and never enters a record committed to git.
- Optional boundary callback every `boundary_every` optimizer steps (segment snapshots).
- The loop owns the RNG state it trains and snapshots from: a fresh run starts Python's
  and numpy's global RNGs from the seed (`determinism.seed_host_rngs`), and whatever a
  progress callback does runs under `kept_rngs`, which puts every host RNG back. So no
  record depends on the terminal, `--quiet`, `--json` or a library's log level (a
  progress bar's imports and rendering draw from Python's `random`).
- Data-parallel (`rank` given): an optimizer step reads `grad_accum x world_size`
  micro-batches, this rank its stride of them, and gradients and per-step scalars are
  summed over the ranks before clipping (`dlm_git.train.distributed`); one process reads
  exactly what it read before ranks existed.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dlm_git.token_stream import IGNORE_INDEX, Sequence, TokenStream
from dlm_git.train.distributed import Rank, local_share, reduce_gradients, sum_step

if TYPE_CHECKING:
    import torch

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
ADAM_WEIGHT_DECAY = 0.0
OPTIMIZER: dict[str, Any] = {
    "name": "adamw",
    "betas": list(ADAM_BETAS),
    "eps": ADAM_EPS,
    "weight_decay": ADAM_WEIGHT_DECAY,
}
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class LoopConfig:
    learning_rate: float
    lr_scheduler: str
    warmup_ratio: float
    num_epochs: int
    max_steps: int | None
    micro_batch_size: int
    grad_accum: int
    seed: int
    device: str
    precision: str
    pad_id: int
    world_size: int = 1

    @property
    def group_size(self) -> int:
        """Micro-batches per optimizer step, over all ranks."""
        return self.grad_accum * self.world_size


@dataclass
class LoopResult:
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    tokens: int = 0
    loss_tokens: int = 0
    sequences_seen: int = 0
    seconds: float = 0.0
    """Wall time of this call's loop (`time.perf_counter`) from its start to the end of
    its last step, snapshot included: run.json's `train_seconds` for a training in one
    process, `rank0.loop_seconds` for rank 0 of `--nproc` (never recorded in git)."""


def micro_batches_per_epoch(n_sequences: int, micro_batch_size: int) -> int:
    return math.ceil(n_sequences / micro_batch_size)


def total_steps(n_sequences: int, cfg: LoopConfig) -> int:
    if cfg.max_steps is not None:
        return cfg.max_steps
    per_epoch = math.ceil(
        micro_batches_per_epoch(n_sequences, cfg.micro_batch_size) / cfg.group_size
    )
    return max(1, per_epoch * cfg.num_epochs)


def warmup_steps(steps: int, warmup_ratio: float) -> int:
    return int(math.ceil(steps * warmup_ratio))


def lr_factor(step: int, total: int, warmup: int, kind: str) -> float:
    if step < warmup:
        return (step + 1) / (warmup + 1)
    if kind == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return max(0.0, 1.0 - progress)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    import torch

    gen = torch.Generator()
    gen.manual_seed(seed + epoch)
    return [int(i) for i in torch.randperm(n, generator=gen).tolist()]


def micro_batches(sequences: TokenStream, cfg: LoopConfig, epoch: int) -> list[list[int]]:
    order = epoch_order(len(sequences), cfg.seed, epoch)
    mbs = cfg.micro_batch_size
    return [order[i : i + mbs] for i in range(0, len(order), mbs)]


def collate(batch: list[Sequence], pad_id: int, device: str) -> dict[str, Any]:
    import torch

    width = max(len(s.input_ids) for s in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, s in enumerate(batch):
        n = len(s.input_ids)
        ids[i, :n] = torch.from_numpy(s.input_ids.astype("int64"))
        labels[i, :n] = torch.from_numpy(s.labels.astype("int64"))
        mask[i, :n] = 1
    return {
        "input_ids": ids.to(device),
        "labels": labels.to(device),
        "attention_mask": mask.to(device),
    }


@contextlib.contextmanager
def kept_rngs() -> Iterator[None]:
    """Run code that is not training (progress output): Python's, numpy's and torch's
    CPU RNG states are put back as they were, whatever it draws."""
    import numpy as np
    import torch

    py, host, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(host)
        torch.set_rng_state(cpu)


BoundaryFn = Callable[[int, "torch.nn.Module", "Trainer", "LoopResult"], None]
ProgressFn = Callable[[int, int, float, int, float], None]
"""(step, total, the step's loss, tokens so far, `LoopResult.seconds` so far)."""


@dataclass
class Cursor:
    """Where the data order stands: the next optimizer step reads group `group` of `epoch`."""

    epoch: int = 0
    group: int = 0


@dataclass
class Trainer:
    """The mutable state of a run between optimizer steps (what a boundary snapshots)."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    params: list[torch.nn.Parameter]
    total: int
    step: int = 0
    cursor: Cursor = field(default_factory=Cursor)


def make_trainer(model: torch.nn.Module, n_sequences: int, cfg: LoopConfig) -> Trainer:
    import torch

    steps = total_steps(n_sequences, cfg)
    warmup = warmup_steps(steps, cfg.warmup_ratio)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params,
        lr=cfg.learning_rate,
        betas=ADAM_BETAS,
        eps=ADAM_EPS,
        weight_decay=ADAM_WEIGHT_DECAY,
        foreach=False,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, steps, warmup, cfg.lr_scheduler)
    )
    return Trainer(optimizer, scheduler, params, steps)


def train_loop(
    model: torch.nn.Module,
    sequences: TokenStream,
    cfg: LoopConfig,
    *,
    progress: ProgressFn | None = None,
    boundary_every: int = 0,
    on_boundary: BoundaryFn | None = None,
    trainer: Trainer | None = None,
    stop_at: int | None = None,
    rank: Rank | None = None,
) -> LoopResult:
    """Train `model` (a peft model, already seeded and on `cfg.device`) in place.

    With `trainer` the run resumes from that state (a restored segment boundary) and
    `stop_at` ends it after that optimizer step. With `rank` this process is one of
    `cfg.world_size` data-parallel ranks (the result holds the sums over all of them)."""
    if not sequences:
        raise ValueError("no training sequences")
    started = time.perf_counter()
    if trainer is None:
        from dlm_git.numerics.prepare import seed_host_rngs

        seed_host_rngs(cfg.seed)
    t = trainer or make_trainer(model, len(sequences), cfg)
    end = min(t.total, stop_at) if stop_at is not None else t.total
    mixed = Mixed.of(cfg.precision)
    model.train()
    result = LoopResult(steps=t.step)
    if on_boundary is not None and boundary_every and t.step == 0:
        on_boundary(0, model, t, result)
    groups: list[list[list[int]]] = []
    groups_epoch = -1
    while t.step < end:
        if groups_epoch != t.cursor.epoch:
            groups, groups_epoch = epoch_groups(sequences, cfg, t.cursor.epoch), t.cursor.epoch
        if t.cursor.group >= len(groups):  # a cursor at an epoch's end (older snapshots)
            t.cursor = Cursor(t.cursor.epoch + 1, 0)
            continue
        group = groups[t.cursor.group]
        step_loss, counts = _accumulate(model, t, sequences, group, cfg, mixed, rank)
        _optimizer_step(t, mixed)
        t.cursor = _next_cursor(t.cursor, len(groups))
        _record_step(result, t.step, step_loss, counts)
        last = t.step == t.total
        if on_boundary is not None and boundary_every and (t.step % boundary_every == 0 or last):
            on_boundary(t.step, model, t, result)
        result.seconds = time.perf_counter() - started  # the step and its snapshot
        if progress is not None:
            with kept_rngs():
                progress(t.step, t.total, step_loss, result.tokens, result.seconds)
    return result


def _next_cursor(cursor: Cursor, n_groups: int) -> Cursor:
    """The group after `cursor`'s in an epoch of `n_groups`: the cursor always names the
    next group to read (an epoch's end rolls over here)."""
    if cursor.group + 1 < n_groups:
        return Cursor(cursor.epoch, cursor.group + 1)
    return Cursor(cursor.epoch + 1, 0)


def _record_step(result: LoopResult, step: int, loss: float, counts: list[int]) -> None:
    """Add one optimizer step to `result`: its loss and [tokens, loss tokens, sequences]."""
    result.tokens += counts[0]
    result.loss_tokens += counts[1]
    result.sequences_seen += counts[2]
    result.steps = step
    result.losses.append(loss)


def epoch_groups(sequences: TokenStream, cfg: LoopConfig, epoch: int) -> list[list[list[int]]]:
    """The epoch's micro-batches, `cfg.group_size` to an optimizer step."""
    batches = micro_batches(sequences, cfg, epoch)
    size = cfg.group_size
    return [batches[i : i + size] for i in range(0, len(batches), size)]


@dataclass(frozen=True)
class Mixed:
    """Mixed precision: the autocast dtype (None: fp32) and fp16's gradient scaler."""

    autocast: torch.dtype | None
    scaler: torch.amp.GradScaler | None

    @classmethod
    def of(cls, precision: str) -> Mixed:
        import torch

        autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        return cls(autocast, scaler)


def _accumulate(
    model: torch.nn.Module,
    t: Trainer,
    sequences: TokenStream,
    group: list[list[int]],
    cfg: LoopConfig,
    mixed: Mixed,
    rank: Rank | None,
) -> tuple[float, list[int]]:
    """One optimizer step's forward and backward passes over this process's share of
    `group`: the step's loss and [tokens, loss tokens, sequences read] (summed over the
    ranks, their gradients too, when data-parallel)."""
    import torch

    step_loss = 0.0
    counts = [0, 0, 0]  # tokens, loss tokens, sequences read by this process
    for indices in local_share(group, rank):
        batch = collate([sequences[i] for i in indices], cfg.pad_id, cfg.device)
        if mixed.autocast is not None:
            with torch.autocast(device_type="cuda", dtype=mixed.autocast):
                out = model(**batch)
        else:
            out = model(**batch)
        loss = out.loss / len(group)
        if mixed.scaler is not None:
            mixed.scaler.scale(loss).backward()
        else:
            loss.backward()
        step_loss += float(loss.detach().float().cpu())
        counts[0] += int(batch["attention_mask"].sum())
        counts[1] += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
        counts[2] += len(indices)
    if rank is not None:
        if mixed.scaler is not None and not counts[2]:  # no micro-batch here this step:
            mixed.scaler.scale(torch.zeros((), device=cfg.device))  # the scale must exist
        reduce_gradients(t.params, rank)
        step_loss, counts = sum_step(step_loss, (counts[0], counts[1], counts[2]), cfg.device)
    return step_loss, counts


def _optimizer_step(t: Trainer, mixed: Mixed) -> None:
    """Clip, step the optimizer and the schedule, clear the gradients, count the step."""
    import torch

    if mixed.scaler is not None:
        mixed.scaler.unscale_(t.optimizer)
    torch.nn.utils.clip_grad_norm_(t.params, MAX_GRAD_NORM, foreach=False)
    if mixed.scaler is not None:
        mixed.scaler.step(t.optimizer)
        mixed.scaler.update()
    else:
        t.optimizer.step()
    t.scheduler.step()
    t.optimizer.zero_grad(set_to_none=True)
    t.step += 1
