"""Segment boundaries: snapshots of the full training state, chained by digest.

Every `every` optimizer steps (and at step 0 and at the last step) training writes
`segments/boundary-<step>.safetensors` (trainable LoRA tensors, AdamW moments and step
counts, RNG states as tensors) and `segments/boundary-<step>.json` (canonical JSON: step,
data cursor, scheduler position, the per-step losses of the segment as exact float hex,
python/numpy RNG scalars, the sha256 of the tensors file, and `prev`, the digest of the
previous boundary). A boundary's digest is the sha256 of its JSON bytes, so each boundary
commits to the whole chain before it; the chain root (digest of the last boundary) is in
the manifest. The first `prev` is a genesis digest binding the training config, the
token stream and the base weights.

Invariants:
- Replaying a segment = restoring boundary k-1 and training to boundary k must give
  byte-identical boundary k under the determinism class `strong`.
- A boundary is captured on the training thread at its step (host copies of every
  tensor) and encoded and written by a background writer, in step order
  (`SegmentWriter`); no record names the chain until `wait` has returned, i.e. until
  every boundary file is written, fsynced and named durably. A failed write is the run's
  error (raised on the training thread), and the staging dir is removed.
"""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.fsutil import atomic_write_bytes, fsync_dir
from dlm_git.hashing import canonical_json, canonical_json_sha256, float_hex, sha256_bytes
from dlm_git.layout import DocLayout
from dlm_git.manifest.schema import SegmentsRecord
from dlm_git.safeparse import load_json
from dlm_git.train.background import BackgroundWriter

if TYPE_CHECKING:
    import torch

    from dlm_git.train.loop import LoopResult, Trainer

SEGMENT_VERSION = 1
DEFAULT_SEGMENTS = 4


def resolve_every(requested: int | None, total: int) -> int:
    """`segment_every`: None → about four segments; 0 → no snapshots."""
    if requested is None:
        return max(1, -(-total // DEFAULT_SEGMENTS))
    return requested


def genesis(config_sha256: str, tokens_root: str, base_tensor_root: str) -> str:
    return canonical_json_sha256(
        {
            "segments": SEGMENT_VERSION,
            "config": config_sha256,
            "tokens": tokens_root,
            "base": base_tensor_root,
        }
    )


def boundary_name(step: int) -> str:
    return f"boundary-{step:07d}"


def adapter_name(param_name: str) -> str:
    """peft's in-memory parameter name → the name it saves in adapter_model.safetensors."""
    return param_name.replace(".default.", ".")


def capture(model: torch.nn.Module, trainer: Trainer) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors, scalars) of the full state between optimizer steps."""
    import numpy as np
    import torch

    tensors: dict[str, Any] = {}
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for name, param in named:
        tensors[f"param/{name}"] = param.detach().cpu().numpy().copy()
        state = trainer.optimizer.state.get(param) or {}
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                tensors[f"adam/{key}/{name}"] = state[key].detach().cpu().numpy().copy()
        if "step" in state:
            tensors[f"adam/step/{name}"] = np.asarray(
                float(state["step"]), dtype=np.float32
            ).reshape(1)
    tensors["rng/torch"] = torch.get_rng_state().numpy().copy()
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        for i, st in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = st.numpy().copy()
    np_state: tuple[Any, ...] = np.random.get_state()  # type: ignore[assignment]
    tensors["rng/numpy/keys"] = np.asarray(np_state[1], dtype=np.uint32)
    py_version, py_state, py_gauss = random.getstate()
    scalars = {
        "step": trainer.step,
        "cursor": {"epoch": trainer.cursor.epoch, "group": trainer.cursor.group},
        "scheduler_last_epoch": int(trainer.scheduler.last_epoch),
        "rng_numpy": {
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float_hex(float(np_state[4])),
        },
        "rng_python": {
            "version": py_version,
            "state": list(py_state),
            "gauss_next": None if py_gauss is None else float_hex(py_gauss),
        },
    }
    return tensors, scalars


def restore(
    model: torch.nn.Module, trainer: Trainer, tensors: dict[str, Any], scalars: dict[str, Any]
) -> None:
    """Put a captured state back (into a freshly built model + trainer)."""
    import numpy as np
    import torch

    from dlm_git.train.loop import Cursor

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with torch.no_grad():
        for name, param in named:
            param.copy_(torch.from_numpy(np.array(tensors[f"param/{name}"])))
    for name, param in named:
        if f"adam/step/{name}" in tensors:
            trainer.optimizer.state[param] = {
                "step": torch.tensor(float(tensors[f"adam/step/{name}"][0]), dtype=torch.float32),
                "exp_avg": torch.from_numpy(np.array(tensors[f"adam/exp_avg/{name}"])),
                "exp_avg_sq": torch.from_numpy(np.array(tensors[f"adam/exp_avg_sq/{name}"])),
            }
    import warnings

    with warnings.catch_warnings():  # stepping the schedule without optimizer steps is the point
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(int(scalars["scheduler_last_epoch"])):
            trainer.scheduler.step()
    trainer.step = int(scalars["step"])
    trainer.cursor = Cursor(int(scalars["cursor"]["epoch"]), int(scalars["cursor"]["group"]))
    torch.set_rng_state(torch.from_numpy(np.array(tensors["rng/torch"], dtype=np.uint8)))
    np_s = scalars["rng_numpy"]
    np.random.set_state(
        (
            "MT19937",
            np.array(tensors["rng/numpy/keys"], dtype=np.uint32),
            np_s["pos"],
            np_s["has_gauss"],
            float.fromhex(np_s["cached_gaussian"]),
        )
    )
    py = scalars["rng_python"]
    gauss = None if py["gauss_next"] is None else float.fromhex(py["gauss_next"])
    random.setstate((py["version"], tuple(py["state"]), gauss))


def encode_boundary(
    tensors: dict[str, Any], scalars: dict[str, Any], losses: list[float], prev: str
) -> tuple[bytes, bytes, str]:
    """(tensors file bytes, JSON bytes, digest) of one boundary."""
    from safetensors.numpy import save

    # one metadata key only: safetensors writes __metadata__ from a hash map (random order)
    blob = save(tensors, metadata={"format": "np"})
    meta = {
        "version": SEGMENT_VERSION,
        **scalars,
        "losses_hex": [float_hex(v) for v in losses],
        "tensors_sha256": sha256_bytes(blob),
        "prev": prev,
    }
    data = canonical_json(meta)
    return blob, data, sha256_bytes(data)


@dataclass
class SegmentWriter:
    """Training-side: captures each boundary at its step and hands it to a background
    writer (`dlm_git.train.background`: in order, a bounded queue) that encodes it and
    writes it into a staging dir; `wait` returns once every boundary is written and
    durable (or raises the writer's error), `finish` then installs them.

    The capture copies every tensor to host memory at the step, so training mutates on
    while the copy is written; the bytes are those a write on the training thread gave.
    """

    layout: DocLayout
    every: int
    prev: str
    staging: Path
    count: int = 0
    last_step: int = 0
    seconds: float = 0.0
    """Time the training thread spent on snapshots (captures, and `wait`): run.json."""
    writer: BackgroundWriter = field(default_factory=lambda: BackgroundWriter("dlm-segments"))

    @classmethod
    def create(cls, layout: DocLayout, every: int, genesis_digest: str) -> SegmentWriter:
        from dlm_git.train.adapter import staging_dir

        return cls(layout, every, genesis_digest, staging_dir(layout.segments))

    def on_boundary(
        self, step: int, model: torch.nn.Module, trainer: Trainer, result: LoopResult
    ) -> None:
        started = time.perf_counter()
        tensors, scalars = capture(model, trainer)
        losses = (
            result.losses[self.last_step - (result.steps - len(result.losses)) :] if step else []
        )
        kept = list(losses)
        self.writer.submit(lambda: self._write(step, tensors, scalars, kept))
        self.count += 1
        self.last_step = step
        self.seconds += time.perf_counter() - started

    def _write(
        self, step: int, tensors: dict[str, Any], scalars: dict[str, Any], losses: list[float]
    ) -> None:
        """On the writer thread, in step order: encode, write and fsync both files (the
        staging dir itself is made durable once, by `wait`)."""
        blob, data, digest = encode_boundary(tensors, scalars, losses, self.prev)
        name = boundary_name(step)
        atomic_write_bytes(self.staging / f"{name}.safetensors", blob, sync_dir=False)
        atomic_write_bytes(self.staging / f"{name}.json", data, sync_dir=False)
        self.prev = digest

    def wait(self) -> None:
        """Every boundary captured so far written, fsynced and named durably in the
        staging dir; the writer's error, if a write failed."""
        started = time.perf_counter()
        self.writer.wait()
        fsync_dir(self.staging)
        self.seconds += time.perf_counter() - started

    def finish(self) -> SegmentsRecord:
        from dlm_git.train.adapter import install_dir

        self.wait()
        install_dir(self.staging, self.layout.segments)
        return SegmentsRecord(every=self.every, count=self.count, chain_root=self.prev)

    def abort(self) -> None:
        self.writer.cancel()
        shutil.rmtree(self.staging, ignore_errors=True)


Boundary = tuple[int, bytes, bytes]
"""One boundary as read back: its step, its JSON bytes, its tensors file's bytes."""


def read_boundaries(directory: Path) -> list[Boundary]:
    """(step, json bytes, tensors bytes) of every boundary in step order."""
    out = []
    for meta in sorted(directory.glob("boundary-*.json")):
        step = int(meta.stem.split("-")[1])
        blob = meta.with_suffix(".safetensors")
        out.append((step, meta.read_bytes(), blob.read_bytes() if blob.is_file() else b""))
    return out


def parse_meta(data: bytes) -> dict[str, Any]:
    """A boundary's JSON record (hostile bytes from the DVC cache, read through
    `safeparse`); a `ValueError` when it is not one of a known version, nests too deeply
    or is not UTF-8."""
    obj = load_json(data.decode("utf-8"))
    if not isinstance(obj, dict) or obj.get("version") != SEGMENT_VERSION:
        raise ValueError("not a segment boundary of a known version")
    return obj
