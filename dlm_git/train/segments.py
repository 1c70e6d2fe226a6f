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
- Boundaries read back are hostile bytes: `read_boundaries` takes only canonical names,
  whole pairs and well-formed safetensors of the dtypes `capture` writes;
  `record_problem` refuses a JSON record of other kinds, RNG state sizes or positions
  past its step; `restore` refuses a state this model and trainer could not have
  captured, before it changes anything. A refusal is a `BoundaryError` (one line).
"""

from __future__ import annotations

import random
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes, fsync_dir
from dlm_git.hashing import (
    canonical_json,
    canonical_json_sha256,
    float_hex,
    parse_float_hex,
    sha256_bytes,
)
from dlm_git.layout import DocLayout
from dlm_git.manifest.schema import SegmentsRecord
from dlm_git.safeparse import load_json
from dlm_git.train.background import BackgroundWriter

if TYPE_CHECKING:
    import torch

    from dlm_git.train.loop import LoopResult, Trainer

SEGMENT_VERSION = 1
DEFAULT_SEGMENTS = 4
BOUNDARY_FILE = re.compile(r"boundary-([0-9]+)\.(json|safetensors)")
TENSOR_DTYPES = frozenset({"F32", "U8", "U32"})
"""The dtypes `capture` writes: float32 weights, moments and step counts, byte RNG
states, numpy's uint32 keys."""
MT_WORDS = 624
"""Words of a Mersenne Twister state (numpy's keys; Python's state holds one more: its
position)."""


class BoundaryError(DlmGitError):
    """A segment boundary that is not one training writes (subject: `boundary N`, or
    `segments` for a file that names no boundary)."""


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
    """Put a captured state back (into a freshly built model + trainer); a state training
    could not have captured for them (`record_problem`, `_fit_problem`) is a
    `BoundaryError`, raised before anything changes."""
    import numpy as np
    import torch

    from dlm_git.train.loop import Cursor

    problem = record_problem(scalars) or _fit_problem(model, trainer, tensors, scalars)
    if problem is not None:
        raise BoundaryError(f"boundary {scalars.get('step')!r}", problem)
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
    """(step, json bytes, tensors bytes) of every boundary in step order; a file that is
    no boundary's (another name, a step not written as `boundary_name` writes it, not a
    regular file), half a pair, or a tensors file that is not well-formed safetensors of
    `TENSOR_DTYPES` is a `BoundaryError`."""
    if not directory.is_dir():
        return []
    pairs: dict[int, dict[str, Path]] = {}
    for path in sorted(directory.iterdir()):
        pairs.setdefault(_boundary_step(path), {})[path.suffix] = path
    out = []
    for step in sorted(pairs):
        pair = pairs[step]
        for suffix in (".json", ".safetensors"):
            if suffix not in pair:
                raise BoundaryError(f"boundary {step}", f"no {suffix} file")
        _check_tensors_file(step, pair[".safetensors"])
        out.append((step, pair[".json"].read_bytes(), pair[".safetensors"].read_bytes()))
    return out


def _boundary_step(path: Path) -> int:
    """The step `path` is a boundary file of (see `read_boundaries`)."""
    match = BOUNDARY_FILE.fullmatch(path.name)
    canonical = match is not None and match[0] == f"{boundary_name(int(match[1]))}.{match[2]}"
    if match is None or not canonical or path.is_symlink() or not path.is_file():
        raise BoundaryError("segments", f"{path.name!r} is not a boundary file")
    return int(match[1])


def _check_tensors_file(step: int, path: Path) -> None:
    from dlm_git.safetensors_header import SafetensorsFormatError, read_safetensors_header

    try:
        header, _ = read_safetensors_header(path)
    except SafetensorsFormatError as exc:
        raise BoundaryError(f"boundary {step}", f"tensors file: {exc.message}") from None
    dtypes = {entry["dtype"] for name, entry in header.items() if name != "__metadata__"}
    if not dtypes <= TENSOR_DTYPES:
        other = ", ".join(sorted(dtypes - TENSOR_DTYPES))
        raise BoundaryError(f"boundary {step}", f"tensors of dtype {other}: not a snapshot's")


def read_tensors(step: int, blob: bytes) -> dict[str, Any]:
    """Boundary `step`'s tensors file as numpy arrays; one that does not load is a
    `BoundaryError`."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        return load(blob)
    except (SafetensorError, KeyError):  # KeyError: a dtype numpy does not have
        raise BoundaryError(f"boundary {step}", "tensors file does not load") from None


def record_problem(meta: Mapping[str, Any]) -> str | None:
    """Why a boundary's JSON record is not one `capture` and `encode_boundary` write
    (its fields' kinds, the RNG states' sizes, positions past its step), or None."""
    step = meta.get("step")
    if not _count(step, None):
        return f"step {step!r} is not a count"
    cursor = meta.get("cursor")
    if not isinstance(cursor, dict) or not all(_count(cursor.get(k), step) for k in _CURSOR):
        return "cursor is not an epoch and a group within its step"
    if not _count(meta.get("scheduler_last_epoch"), step):
        return "scheduler position is not a count within its step"
    losses = meta.get("losses_hex", [])  # encode_boundary's: not part of a captured state
    if not isinstance(losses, list) or not all(_float_hex(v) for v in losses):
        return "losses_hex is not a list of float hex strings"
    return _numpy_rng_problem(meta.get("rng_numpy")) or _python_rng_problem(meta.get("rng_python"))


_CURSOR = ("epoch", "group")


def _numpy_rng_problem(state: Any) -> str | None:
    if (
        not isinstance(state, dict)
        or not _count(state.get("pos"), MT_WORDS)
        or state.get("has_gauss") not in (0, 1)
        or isinstance(state.get("has_gauss"), bool)
        or not _float_hex(state.get("cached_gaussian"))
    ):
        return "rng_numpy is not a numpy RNG position"
    return None


def _python_rng_problem(state: Any) -> str | None:
    words = state.get("state") if isinstance(state, dict) else None
    if (
        not isinstance(state, dict)
        or state.get("version") != 3
        or isinstance(state.get("version"), bool)
        or not isinstance(words, list)
        or len(words) != MT_WORDS + 1
        or not all(_count(w, 2**32 - 1) for w in words[:-1])
        or not _count(words[-1], MT_WORDS)
        or not (state.get("gauss_next") is None or _float_hex(state.get("gauss_next")))
    ):
        return f"rng_python is not a Python RNG state ({MT_WORDS + 1} words)"
    return None


def _count(value: Any, most: int | None) -> bool:
    """`value` is an int (not a bool) from 0 to `most` (None: unbounded)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return False
    return most is None or value <= most


def _float_hex(value: Any) -> bool:
    """`value` is a float as `hashing.float_hex` writes one (short enough to parse)."""
    return parse_float_hex(value, 32) is not None


def _fit_problem(
    model: torch.nn.Module, trainer: Trainer, tensors: Mapping[str, Any], scalars: Mapping[str, Any]
) -> str | None:
    """Why `tensors` and `scalars` are not a state `capture` takes of `model` and
    `trainer` (a tensor missing, unknown, of another shape or dtype; moments without
    their step; a step past the trainer's total), or None."""
    if scalars["step"] > trainer.total:
        return f"step {scalars['step']} is past the training's {trainer.total} steps"
    expected = _expected_tensors(model)
    found = {k: (tuple(v.shape), str(v.dtype)) for k, v in tensors.items()}
    for name, like in expected.items():
        if name.startswith("adam/") and name not in found:
            continue  # an optimizer with no state yet for it (checked below)
        if found.get(name) != like:
            return f"tensor {name!r} is {found.get(name) or 'missing'}, expected {like}"
    unknown = [k for k in found if k not in expected and not _cuda_rng(k, found[k])]
    if unknown:
        return f"tensor {unknown[0]!r} is not a snapshot's"
    if not _torch_rng_state(tensors["rng/torch"]):
        return "rng/torch is not a state torch's generator takes"
    named = [n for n, p in model.named_parameters() if p.requires_grad]
    for name in named:
        moments = [f"adam/{key}/{name}" in found for key in ("step", "exp_avg", "exp_avg_sq")]
        if any(moments) and not all(moments):
            return f"optimizer state of {name!r} is incomplete"
        if moments[0]:
            count = float(tensors[f"adam/step/{name}"][0])
            if not (count.is_integer() and 0 <= count <= scalars["step"]):
                return f"optimizer step of {name!r} is {count}, not a count within the step"
    return None


def _torch_rng_state(array: Any) -> bool:
    """Whether a fresh CPU generator takes `array` as its state (the global one is left
    alone)."""
    import numpy as np
    import torch

    try:
        torch.Generator().set_state(torch.from_numpy(np.array(array, dtype=np.uint8)))
    except RuntimeError:
        return False
    return True


def _cuda_rng(name: str, like: tuple[tuple[int, ...], str]) -> bool:
    """A GPU's RNG state, as `capture` takes it when CUDA is initialised."""
    return (
        re.fullmatch(r"rng/cuda/[0-9]+", name) is not None
        and len(like[0]) == 1
        and like[1] == "uint8"
    )


def _expected_tensors(model: torch.nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every tensor `capture` may take of `model` (moments only after a step), as
    (shape, numpy dtype)."""
    import torch

    out: dict[str, tuple[tuple[int, ...], str]] = {
        "rng/torch": ((int(torch.get_rng_state().numel()),), "uint8"),
        "rng/numpy/keys": ((MT_WORDS,), "uint32"),
    }
    for name, param in model.named_parameters():
        if param.requires_grad:
            like = (tuple(param.shape), str(torch.empty(0, dtype=param.dtype).numpy().dtype))
            out[f"param/{name}"] = like
            out[f"adam/exp_avg/{name}"] = like
            out[f"adam/exp_avg_sq/{name}"] = like
            out[f"adam/step/{name}"] = ((1,), "float32")
    return out


def parse_meta(data: bytes) -> dict[str, Any]:
    """A boundary's JSON record (hostile bytes from the DVC cache, read through
    `safeparse`); a `ValueError` when it is not one of a known version, nests too deeply
    or is not UTF-8."""
    obj = load_json(data.decode("utf-8"))
    if not isinstance(obj, dict) or obj.get("version") != SEGMENT_VERSION:
        raise ValueError("not a segment boundary of a known version")
    return obj
