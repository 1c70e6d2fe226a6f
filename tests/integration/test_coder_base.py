"""The base most real DLM documents name, `qwen2.5-coder-1.5b`, built and trained offline.

Specification:
- `dlm-git base build qwen2.5-coder-1.5b` makes the published Qwen2 shape (28 layers,
  hidden 1536, 12/2 heads, intermediate 8960, vocab 151936, tied embeddings: 1.54B
  parameters) with random weights, byte-identical in fresh processes; a reduced shape of
  the same family (`--layers`, `--vocab`) for quick runs.
- A document naming the registry key trains offline against that build standing in for
  the key's pinned snapshot, bit-exact in fresh processes, and records the pin.
"""

from __future__ import annotations

import json
import resource
import struct
from pathlib import Path

import pytest

from dlm_git.base.registry import REGISTRY
from tests.support.cli import cli
from tests.support.demo import write_demo
from tests.support.gitrepo import init_repo
from tests.support.hub import repo_dir, stand_in
from tests.support.verdicts import call_main_in

pytestmark = pytest.mark.slow

KEY = "qwen2.5-coder-1.5b"
QUICK = {"max_steps": "2", "sequence_len": "64", "micro_batch_size": "2"}


def file_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_document_naming_the_key_trains_offline_on_a_reduced_build(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    quick = ("--layers", "2", "--vocab", "4096")
    for out in ("a", "b"):
        proc = cli("base", "build", KEY, *quick, "--out", tmp_path / out)
        assert proc.returncode == 0, proc.stderr
    first = file_bytes(tmp_path / "a")
    assert first == file_bytes(tmp_path / "b")
    config = json.loads(first["config.json"])
    assert (config["model_type"], config["hidden_size"], config["intermediate_size"]) == (
        "qwen2",
        1536,
        8960,
    )
    assert (config["num_hidden_layers"], config["vocab_size"]) == (2, 4096)

    hub = tmp_path / "hub"
    repo_id = REGISTRY[KEY].repo_id
    # the trainings' base: built in this process (tests/support/verdicts.py)
    build = ["base", "build", KEY, *quick, "--hf-cache", str(hub), "--repo-id", repo_id]
    built = call_main_in(tmp_path, capfd)(build)
    assert built.code == 0, built.stderr
    pin = stand_in(hub, KEY)
    shas = set()
    for run in ("one", "two"):
        doc_dir = init_repo(tmp_path / run) / "code"
        write_demo(doc_dir, base_model=KEY, **QUICK)
        proc = cli("train", doc_dir, "-q", "--device", "cpu", "--json", env={"HF_HUB_CACHE": hub})
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        shas.add(out["adapter_sha256"])
        assert out["lock"]["base_model_revision"] == pin
        manifest = json.loads((doc_dir / "manifest.json").read_text("utf-8"))
        assert (manifest["base"]["spec"], manifest["base"]["revision"]) == (KEY, pin)
    assert len(shas) == 1  # fresh processes, one adapter


def _available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text("ascii").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


WEIGHTS_FP32 = 1_543_714_304 * 4


@pytest.mark.skipif(
    _available_bytes() < 2 * WEIGHTS_FP32, reason="the 1.5B build needs ~12 GB of free memory"
)
def test_the_full_published_shape_builds_in_bounded_memory(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = cli("base", "build", KEY, "--hf-cache", hub)
    assert proc.returncode == 0, proc.stderr
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    repo = repo_dir(hub, f"dlm-git-random/{KEY}")
    snap = repo / "snapshots" / (repo / "refs" / "main").read_text("ascii")
    config = json.loads((snap / "config.json").read_text("utf-8"))
    assert (config["num_hidden_layers"], config["num_attention_heads"]) == (28, 12)
    assert (config["num_key_value_heads"], config["vocab_size"]) == (2, 151936)
    assert config["tie_word_embeddings"] is True
    # the parameters, from the safetensors header alone: the tied head is stored once
    with open(snap / "model.safetensors", "rb") as fh:
        header = json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0]))
    shapes = [v["shape"] for k, v in header.items() if k != "__metadata__"]
    count = 0
    for shape in shapes:
        n = 1
        for dim in shape:
            n *= dim
        count += n
    assert count == 1_543_714_304
    assert "lm_head.weight" not in header
    assert all(v["dtype"] == "F32" for k, v in header.items() if k != "__metadata__")
    # one copy of the fp32 weights resident, with room for the writer (measured: 7.3 GB)
    if peak > before * 1024:  # ru_maxrss of children is the largest child's
        assert peak < 1.6 * WEIGHTS_FP32, f"peak RSS {peak / 1e9:.2f} GB"
