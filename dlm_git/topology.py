"""The process topology of a training run: how many ranks, which backend, which buckets.

Invariants:
- One process (`world_size` 1) is recorded as nothing: `determinism_flags` has no
  `distributed` key, so every record made before data-parallel training reads the same.
- N > 1 processes are recorded in `determinism_flags.distributed` as
  `{"world_size", "backend", "bucket_elements", "sharding"}`: everything that fixes the
  reduction order of a step's gradients besides the kernels (the ranks, the collective's
  backend, the flat fp32 buckets in parameter order, the rule that gives each rank its
  micro-batches). The same record means the same order, so bits are expected; another
  world size means another sum (and, with micro-batches per rank, another global batch).
- The backend follows the device (gloo on CPU, NCCL on CUDA); the bucket size and the
  sharding rule are this dlm-git's constants, never taken from a commit. A replay takes
  only the world size from the record, validated here (`recorded_world_size`).
- No torch here: the hooks and the verifier's validation import this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlm_git.errors import UsageError

FLAG = "distributed"
MAX_NPROC = 64
BUCKET_ELEMENTS = 1 << 22  # 4 Mi fp32 elements (16 MiB) per all-reduce
SHARDING = "group-stride"
"""Each optimizer step reads `grad_accum x world_size` consecutive micro-batches of the
seed's epoch order; rank r takes micro-batches r, r + N, r + 2N, ... of that group."""


@dataclass(frozen=True)
class Topology:
    world_size: int
    backend: str
    bucket_elements: int = BUCKET_ELEMENTS

    def record(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "bucket_elements": self.bucket_elements,
            "sharding": SHARDING,
        }


def check_nproc(nproc: int, subject: str = "--nproc") -> int:
    if not 1 <= nproc <= MAX_NPROC:
        raise UsageError(
            subject, f"must be from 1 to {MAX_NPROC}, got {nproc}", "e.g. --nproc 2 (1: no ranks)"
        )
    return nproc


def backend_for(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def topology_for(nproc: int, device: str) -> Topology | None:
    """The topology a run of `nproc` processes on `device` records (None: one process)."""
    return Topology(nproc, backend_for(device)) if nproc > 1 else None


def topology_flags(nproc: int, device: str) -> dict[str, Any]:
    """What `dlm.lock` adds to `determinism_flags` for this topology (nothing for one)."""
    topo = topology_for(nproc, device)
    return {FLAG: topo.record()} if topo is not None else {}


def record_problem(record: object) -> str | None:
    """Why `determinism_flags.distributed` is not a topology record a dlm-git writes."""
    if not isinstance(record, Mapping):
        return f"determinism_flags.{FLAG} is not an object"
    keys = {"world_size", "backend", "bucket_elements", "sharding"}
    unknown = sorted(str(k) for k in record if k not in keys)
    if unknown:
        return f"determinism_flags.{FLAG}.{unknown[0]!r:.60}: unknown key"
    size = recorded_world_size({FLAG: record})
    if isinstance(size, str):
        return size
    if record.get("backend") not in ("gloo", "nccl"):
        return f"determinism_flags.{FLAG}.backend {record.get('backend')!r:.60} is not a backend"
    bucket = record.get("bucket_elements")
    if type(bucket) is not int or not 1 <= bucket <= 1 << 40:
        return f"determinism_flags.{FLAG}.bucket_elements {bucket!r:.60} is not a count"
    if not isinstance(record.get("sharding"), str) or len(record["sharding"]) > 64:
        return f"determinism_flags.{FLAG}.sharding {record.get('sharding')!r:.60} is not a rule"
    return None


def recorded_world_size(flags: Mapping[str, Any]) -> int | str:
    """The world size a lock's flags record (1 when absent), or why the record is malformed."""
    record = flags.get(FLAG)
    if record is None:
        return 1
    if not isinstance(record, Mapping):
        return f"determinism_flags.{FLAG} is not an object"
    size = record.get("world_size")
    if type(size) is not int or not 2 <= size <= MAX_NPROC:
        return (
            f"determinism_flags.{FLAG}.world_size {size!r} is not a process count"
            f" from 2 to {MAX_NPROC}"
        )
    return size
