"""A segment boundary read back is hostile bytes: `read_boundaries` takes canonical boundary
files only, `record_problem` refuses a JSON record training does not write, and `restore`
refuses a state the model and trainer could not have captured (a `BoundaryError`, one
line) before it changes anything, however large a position it names (a scheduler
position of 10**12 once stepped the schedule that many times). A state `capture` took
comes back whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.manifest.schema import SegmentsRecord
from dlm_git.train.loop import LoopConfig, Trainer, make_trainer
from dlm_git.train.segments import (
    BoundaryError,
    boundary_name,
    capture,
    encode_boundary,
    read_boundaries,
    record_problem,
    restore,
)
from dlm_git.verify.segments import check_chain
from tests.support.tensorfiles import st_join, st_split

STEPS = 4
CFG = LoopConfig(
    learning_rate=0.1,
    lr_scheduler="linear",
    warmup_ratio=0.0,
    num_epochs=1,
    max_steps=STEPS,
    micro_batch_size=1,
    grad_accum=1,
    seed=0,
    device="cpu",
    precision="fp32",
    pad_id=0,
)


def _fresh() -> tuple[torch.nn.Module, Trainer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    return model, make_trainer(model, STEPS, CFG)


def _state_after(steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tensors, scalars) `capture` takes after `steps` optimizer steps of a real AdamW."""
    model, trainer = _fresh()
    for _ in range(steps):
        model(torch.ones(1, 3)).sum().backward()
        trainer.optimizer.step()
        trainer.scheduler.step()
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.step += 1
    return capture(model, trainer)


def test_a_captured_state_comes_back_whole() -> None:
    tensors, scalars = _state_after(2)
    model, trainer = _fresh()
    restore(model, trainer, tensors, scalars)
    again, rescalars = capture(model, trainer)
    assert rescalars == scalars
    assert {k: v.tobytes() for k, v in again.items()} == {
        k: v.tobytes() for k, v in tensors.items()
    }
    assert record_problem(scalars) is None


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(scalars: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        node = scalars
        for part in parents:
            node = node[part]
        node[key] = value

    return edit


SCALAR_EDITS = {
    "scheduler far past the training": _set("scheduler_last_epoch", 10**12),
    "scheduler past its step": _set("scheduler_last_epoch", 3),
    "step past the training": _set("step", STEPS + 1),
    "step as text": _set("step", "2"),
    "cursor epoch negative": _set("cursor.epoch", -1),
    "cursor missing": lambda s: s.pop("cursor"),
    "python RNG of three words": _set("rng_python.state", [1, 2, 3]),
    "python RNG position past its words": _set("rng_python.state", [0] * 624 + [625]),
    "python RNG version 2": _set("rng_python.version", 2),
    "numpy RNG position past its words": _set("rng_numpy.pos", 10**6),
    "numpy gaussian not float hex": _set("rng_numpy.cached_gaussian", "nan-ish"),
    "losses not float hex": _set("losses_hex", [1.5]),
    "a loss past any float": _set("losses_hex", ["0x1p+99999"]),
    "numpy gaussian past any float": _set("rng_numpy.cached_gaussian", "-0x1p+4096"),
}


def _params(model: torch.nn.Module) -> list[bytes]:
    return [p.detach().numpy().tobytes() for p in model.parameters()]


def _refused(tensors: dict[str, Any], scalars: dict[str, Any]) -> str:
    model, trainer = _fresh()
    before = _params(model)
    with pytest.raises(BoundaryError) as caught:
        restore(model, trainer, tensors, scalars)
    assert _params(model) == before and trainer.scheduler.last_epoch == 0, "changed"
    assert trainer.step == 0 and not trainer.optimizer.state
    return caught.value.one_line()


@pytest.mark.parametrize("edit", list(SCALAR_EDITS.values()), ids=list(SCALAR_EDITS))
def test_a_record_training_does_not_write_is_refused_before_anything_changes(
    edit: Callable[[dict[str, Any]], None],
) -> None:
    tensors, scalars = _state_after(2)
    scalars = json.loads(json.dumps(scalars))
    scalars["losses_hex"] = []
    edit(scalars)
    assert "\n" not in _refused(tensors, scalars)


def _drop(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda t: t.pop(name)


def _put(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(tensors: dict[str, Any]) -> None:
        tensors[name] = value

    return edit


TENSOR_EDITS = {
    "a parameter missing": _drop("param/weight"),
    "a parameter of another shape": _put("param/weight", np.zeros((3, 2), np.float32)),
    "a parameter of another dtype": _put("param/weight", np.zeros((2, 3), np.float64)),
    "an unknown tensor": _put("payload", np.zeros(1, np.float32)),
    "moments without their step": _drop("adam/step/weight"),
    "an optimizer step that is no count": _put("adam/step/weight", np.full(1, 1.5, np.float32)),
    "a torch RNG state of another size": _put("rng/torch", np.zeros(7, np.uint8)),
    "a torch RNG state torch refuses": lambda t: t["rng/torch"].fill(255),
    "numpy RNG keys of another size": _put("rng/numpy/keys", np.zeros(3, np.uint32)),
}


@pytest.mark.parametrize("edit", list(TENSOR_EDITS.values()), ids=list(TENSOR_EDITS))
def test_tensors_the_model_could_not_have_given_are_refused_before_anything_changes(
    edit: Callable[[dict[str, Any]], None],
) -> None:
    tensors, scalars = _state_after(2)
    tensors = {k: v.copy() for k, v in tensors.items()}
    edit(tensors)
    assert "\n" not in _refused(tensors, scalars)


# --------------------------------------------------------------------------- the files


def _write_chain(directory: Path, steps: list[int]) -> list[tuple[int, bytes, bytes]]:
    directory.mkdir()
    tensors, scalars = _state_after(0)
    out, prev = [], "g" * 64
    for step in steps:
        blob, data, prev = encode_boundary(tensors, {**scalars, "step": step}, [], prev)
        (directory / f"{boundary_name(step)}.safetensors").write_bytes(blob)
        (directory / f"{boundary_name(step)}.json").write_bytes(data)
        out.append((step, data, blob))
    return out


def test_boundary_files_read_back_in_step_order(tmp_path: Path) -> None:
    written = _write_chain(tmp_path / "segments", [0, 1, 10])
    assert read_boundaries(tmp_path / "segments") == written


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("boundary-x.json", b"{}"),  # int() of the name raised ValueError
        ("boundary-1.json", b"{}"),  # a second name for step 1
        ("boundary-0000002.json", b"{}"),  # half a pair
        ("payload.py", b"print()"),
        ("boundary-0000001.safetensors", b"\xff" * 16),
    ],
    ids=["not a step", "not canonical", "no tensors file", "another file", "not safetensors"],
)
def test_a_file_that_is_no_boundary_is_refused(tmp_path: Path, name: str, data: bytes) -> None:
    _write_chain(tmp_path / "segments", [0, 1])
    (tmp_path / "segments" / name).write_bytes(data)
    with pytest.raises(BoundaryError):
        read_boundaries(tmp_path / "segments")


@pytest.mark.parametrize("dtype", ["BF16", "F8_E4M3"])
def test_tensors_of_a_dtype_no_snapshot_has_are_refused(tmp_path: Path, dtype: str) -> None:
    """numpy has no such dtype: loading the file raised KeyError."""
    _write_chain(tmp_path / "segments", [0, 1])
    path = tmp_path / "segments" / f"{boundary_name(1)}.safetensors"
    header, data = st_split(path.read_bytes())
    header["param/bias"] = {**header["param/bias"], "dtype": dtype, "shape": [4]}
    path.write_bytes(st_join(header, data))
    with pytest.raises(BoundaryError, match=dtype):
        read_boundaries(tmp_path / "segments")


def test_a_chain_that_does_not_start_at_step_0_is_refused(tmp_path: Path) -> None:
    """A start other than the training's could be any state: the chain is refused."""
    from safetensors.numpy import save_file

    written = _write_chain(tmp_path / "segments", [1, 2])
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    save_file({"weight": np.zeros((2, 3), np.float32)}, str(adapter / "adapter_model.safetensors"))
    root = sha256_bytes(written[-1][1])
    record = SegmentsRecord(every=1, count=2, chain_root=root)
    _, problem = check_chain(written, "g" * 64, record, adapter)
    assert problem is not None and "starts at step 1" in problem, problem


def test_a_record_past_its_step_fails_the_chain(tmp_path: Path) -> None:
    written = _write_chain(tmp_path / "segments", [0, 1])
    meta = json.loads(written[0][1])
    meta["scheduler_last_epoch"] = 10**12
    first = canonical_json(meta)
    record = SegmentsRecord(every=1, count=2, chain_root="r" * 64)
    _, problem = check_chain([(0, first, written[0][2]), written[1]], "g" * 64, record, tmp_path)
    assert problem == "boundary 0: scheduler position is not a count within its step", problem
