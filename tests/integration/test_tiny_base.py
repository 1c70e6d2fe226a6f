"""The built-in tiny base is byte-identical across processes, loads, and is cached once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dlm_git.base.resolve import base_identity
from dlm_git.base.tiny import (
    CHAT_TEMPLATE,
    SPEC_FILE,
    ensure_tiny_base,
    tiny_dir,
    tiny_spec_hash,
)
from tests.support.env import subprocess_env
from tests.support.files import snapshot

pytestmark = pytest.mark.slow

BUILD = "import sys, pathlib; from dlm_git.base.tiny import build_tiny_base; " + (
    "build_tiny_base(pathlib.Path(sys.argv[1]))"
)


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Build the tiny base in two fresh processes at once, with different hash seeds and cwds."""
    root = tmp_path_factory.mktemp("tiny-builds")
    procs = []
    dests = []
    for i, seed in enumerate(["0", "12345"]):
        cwd = root / f"cwd{i}" / ("nested" * i)
        cwd.mkdir(parents=True)
        dest = root / f"out{i}" / "tiny"
        env = subprocess_env(PYTHONHASHSEED=seed, OMP_NUM_THREADS=str(i + 1))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", BUILD, str(dest)],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
        dests.append(dest)
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode(errors="replace")
    return dests[0], dests[1]


def test_two_builds_are_byte_identical(two_builds: tuple[Path, Path]) -> None:
    a, b = two_builds
    ta, tb = snapshot(a), snapshot(b)
    assert sorted(ta) == [
        "config.json",
        SPEC_FILE,
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert sorted(ta) == sorted(tb)
    for name in ta:
        assert ta[name] == tb[name], f"{name} differs between builds"
    # no temp directories left beside the result
    assert [p.name for p in a.parent.iterdir()] == ["tiny"]


def test_base_identity_equal(two_builds: tuple[Path, Path]) -> None:
    a, b = two_builds
    ia, ib = base_identity(a, None), base_identity(b, None)
    assert ia == ib
    assert ia.weight_files == ("model.safetensors",)
    assert len(ia.tensor_root) == 64 and len(ia.tokenizer_sha256) == 64


def test_built_base_loads_with_transformers(two_builds: tuple[Path, Path]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = str(two_builds[0])
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    assert tok.chat_template == CHAT_TEMPLATE
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is a lock?"},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is a lock?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tok("hello world")["input_ids"]
    assert tok.decode(ids) == "hello world"
    for special in ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|pad|>"]:
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1

    model = AutoModelForCausalLM.from_pretrained(path)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.vocab_size == len(tok)
    assert model.config.eos_token_id == tok.eos_token_id
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), model.config.vocab_size)
    assert torch.isfinite(logits).all()


def test_ensure_tiny_base_builds_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_builds: tuple[Path, Path]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    assert tiny_dir() == cache / f"tiny-{tiny_spec_hash()}"
    first = ensure_tiny_base()
    assert first == tiny_dir()
    stamps = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    dir_ino = first.stat().st_ino
    second = ensure_tiny_base()
    assert second == first
    assert {p.name: p.stat().st_mtime_ns for p in second.iterdir()} == stamps
    assert second.stat().st_ino == dir_ino
    # built in this process, it is byte-identical to the subprocess builds
    assert snapshot(first) == snapshot(two_builds[0])
    # only the base and its lock file sit in the cache
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, first.name + ".lock"])
