"""Data-parallel arithmetic inside a rank: which micro-batches it reads, how gradients sum.

Invariants:
- A rank's micro-batches are the stride `group[rank::world_size]` of the optimizer step's
  group (`dlm_git.topology.SHARDING`); every micro-batch loss is divided by the group's
  global size, so after the sum the gradient is the one a single process with
  `grad_accum x world_size` micro-batches per step would compute (other bits, same math).
- Gradients are summed in flat fp32 buckets: parameters in registration order, packed
  into buckets of at most `bucket_elements` (a larger parameter is a bucket of its own);
  the layout is a function of the model and the constant alone. A rank that read no
  micro-batch in a step contributes zeros. Every rank ends a step with the same bits.
- Per-step scalars (loss, token counts) are summed the same way, in float64 and int64.
- Dropout draws from a per-rank stream seeded from (seed, rank), set after the LoRA layers
  are initialised from the seed on every rank alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    bucket_elements: int


def rank_seed(seed: int, rank: int) -> int:
    digest = hashlib.sha256(f"dlm-git rank seed {seed} {rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def seed_rank(seed: int, rank: Rank) -> None:
    import torch

    torch.manual_seed(rank_seed(seed, rank.rank))


def local_share(group: list[list[int]], rank: Rank | None) -> list[list[int]]:
    return group if rank is None else group[rank.rank :: rank.world_size]


def buckets(sizes: list[int], bucket_elements: int) -> list[list[int]]:
    """Parameter indices per bucket, in order (a pure function of the sizes)."""
    out: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for index, size in enumerate(sizes):
        if current and filled + size > bucket_elements:
            out.append(current)
            current, filled = [], 0
        current.append(index)
        filled += size
    if current:
        out.append(current)
    return out


def reduce_gradients(params: list[torch.nn.Parameter], rank: Rank) -> None:
    """Sum every parameter's gradient over the ranks (missing gradients count as zeros)."""
    import torch
    import torch.distributed as dist

    for indices in buckets([p.numel() for p in params], rank.bucket_elements):
        parts = [_grad_or_zeros(params[i]).reshape(-1) for i in indices]
        flat = torch.cat(parts) if len(parts) > 1 else parts[0].clone()
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for i in indices:
            p = params[i]
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()


def _grad_or_zeros(p: torch.nn.Parameter) -> torch.Tensor:
    import torch

    return p.grad if p.grad is not None else torch.zeros_like(p)


def sum_step(loss: float, counts: tuple[int, int, int], device: str) -> tuple[float, list[int]]:
    """The step's loss and (tokens, loss tokens, sequences) summed over the ranks."""
    import torch
    import torch.distributed as dist

    dev = device if device.startswith("cuda") else "cpu"
    total = torch.tensor([loss], dtype=torch.float64, device=dev)
    ints = torch.tensor(list(counts), dtype=torch.int64, device=dev)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    dist.all_reduce(ints, op=dist.ReduceOp.SUM)
    return float(total.item()), [int(v) for v in ints.tolist()]


def weights_agree(params: list[torch.nn.Parameter], device: str) -> bool:
    """Whether every rank holds bit-identical trainable weights (a digest per rank)."""
    import torch
    import torch.distributed as dist

    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    mine = int.from_bytes(h.digest()[:8], "little") >> 1
    dev = device if device.startswith("cuda") else "cpu"
    gathered = [torch.zeros(1, dtype=torch.int64, device=dev) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, torch.tensor([mine], dtype=torch.int64, device=dev))
    return len({int(t.item()) for t in gathered}) == 1
