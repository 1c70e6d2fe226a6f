"""The GPU training stage: what can be checked without a GPU runs everywhere; what needs
one is marked `cuda` and skipped where torch sees no CUDA device.

Specification:
- A CUDA run records its precision (fp32 or bf16) in `dlm.lock`'s determinism flags,
  beside the kernel facts; a CPU run records none (its precision is always fp32), so CPU
  locks made before the field existed read the same.
- `pipeline.device: cuda` reaches `dlm-git train --device cuda`; on a machine without
  CUDA that is one line, exit 1, naming why.
- On a GPU: the demo trained twice in fresh processes under the deterministic set gives
  the same adapter bytes, and bf16 is recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlm_git.doc.schema import TrainingConfig
from dlm_git.train.assemble import resolve_precision
from dlm_git.train.options import TrainError
from dlm_git.train.records import training_flags
from tests.support.cli import cli
from tests.support.demo import write_fast_demo
from tests.support.gitrepo import init_repo


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")


def test_a_gpu_run_records_its_precision_and_a_cpu_run_none() -> None:
    bf16 = TrainingConfig(precision="bf16")
    assert training_flags(bf16, "cuda") == {"precision": "bf16"}
    assert training_flags(TrainingConfig(), "cuda:0") == {"precision": "fp32"}  # auto
    assert training_flags(TrainingConfig(), "cpu") == {}
    assert training_flags(TrainingConfig(gradient_checkpointing=True), "cpu") == {
        "gradient_checkpointing": True
    }
    assert resolve_precision("auto", "cuda") == "fp32"
    with pytest.raises(TrainError, match="bf16 is not supported on CPU"):
        resolve_precision("bf16", "cpu")


@pytest.mark.skipif(_cuda(), reason="checks the refusal on a machine without CUDA")
def test_the_pipeline_device_cuda_without_cuda_is_one_line(tmp_path: Path) -> None:
    doc_dir = init_repo(tmp_path / "repo") / "demo"
    write_fast_demo(doc_dir)
    proc = cli("train", doc_dir, "--quiet", "--device", "cuda", "--numerics", "auto")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cuda requested but" in proc.stderr, proc.stderr


@pytest.mark.slow
@cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_on_a_gpu_two_fresh_runs_give_the_same_bytes(tmp_path: Path, precision: str) -> None:
    shas = []
    for i in range(2):
        doc_dir = init_repo(tmp_path / f"repo-{i}") / "demo"
        doc = write_fast_demo(doc_dir)
        text = doc.read_text("utf-8").replace(
            "  seed: 42\n", f"  seed: 42\n  precision: {precision}\n"
        )
        doc.write_text(text, "utf-8")
        proc = cli("train", doc_dir, "--quiet", "--device", "cuda", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        flags = out["lock"]["determinism_flags"]
        assert flags["device"] == "cuda" and flags["precision"] == precision
        assert flags["deterministic_algorithms"] and not flags["tf32_matmul"]
        shas.append(out["adapter_sha256"])
    assert shas[0] == shas[1]
