"""What `train` writes: byte-reproducible, path- and time-free, loadable, and self-consistent."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import canonical_json, canonical_json_sha256, digest_safetensors
from tests.support.cli import RunCli
from tests.support.demo import DEVICE_ARGS, Trained
from tests.support.env import subprocess_env
from tests.support.gitrepo import git

pytestmark = pytest.mark.slow

# The fixtures `trained_once`, `trained_repo`, `train` and `run_cli` come from conftest.py.
DOC_NAME = "demo.dlm"
COMMITTED = ("dlm.lock", "manifest.json", "metrics.json", "train_loss.tsv")
ADAPTER_FILES = ("README.md", "adapter_config.json", "adapter_model.safetensors")
TEXT_OUTPUTS = (*COMMITTED, "adapter/adapter_config.json")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def json_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *json_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []


# --------------------------------------------------------------------------- reproducibility


def test_retraining_in_a_fresh_process_is_byte_identical(
    trained_once: Trained, tmp_path: Path, base_cache: Path
) -> None:
    # Same document at a different absolute path, outputs removed, trained by a new
    # interpreter with another hash seed and another working directory.
    repo = tmp_path / "elsewhere" / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    doc_dir = repo / "demo"
    shutil.copytree(trained_once.doc_dir, doc_dir)
    for name in (*COMMITTED, "run.json"):
        (doc_dir / name).unlink()
    shutil.rmtree(doc_dir / "adapter")
    env = subprocess_env()
    env["PYTHONHASHSEED"] = "1" if os.environ.get("PYTHONHASHSEED") == "4242" else "4242"
    proc = subprocess.run(
        [sys.executable, "-m", "dlm_git", "train", "demo", "--no-progress", *DEVICE_ARGS],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr

    expected = trained_once.files
    adapter_sha = sha256_file(doc_dir / "adapter" / "adapter_model.safetensors")
    assert adapter_sha == hashlib.sha256(expected["adapter/adapter_model.safetensors"]).hexdigest()
    assert f"adapter sha256   {adapter_sha}" in proc.stdout
    # tok/s is printed beside the span it was measured over: the training loop's seconds
    run = json.loads((doc_dir / "run.json").read_bytes())
    training = f"  training         {run['train_seconds']} s ({run['tokens_per_second']} tok/s)"
    assert training in proc.stdout.splitlines(), proc.stdout
    assert f"  wall             {run['wall_seconds']} s" in proc.stdout.splitlines()
    for name in TEXT_OUTPUTS:
        assert (doc_dir / name).read_bytes() == expected[name], f"{name} differs"
    assert sorted(p.name for p in (doc_dir / "adapter").iterdir()) == list(ADAPTER_FILES)


def test_retraining_leaves_git_status_clean(trained_repo: Path, train: RunCli) -> None:
    repo = trained_repo.parent
    # adapter/ is DVC's, run.json is machine-specific; the token cache is in .git/dlm-git/.
    (repo / ".gitignore").write_text("adapter/\nrun.json\n", "utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "trained")
    tracked = set(git(repo, "ls-files").split())
    assert {f"demo/{name}" for name in COMMITTED} <= tracked
    assert not any(p.startswith("demo/adapter/") or p.endswith("run.json") for p in tracked)

    # cache miss (fresh repo), cache hit, and no cache at all: all leave git clean
    for flags in ((), (), ("--no-cache",)):
        code, _, err = train(trained_repo, *flags)
        assert code == 0, err
        assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    ignored = git(repo, "status", "--porcelain", "--ignored").splitlines()
    # (segments/, empty without snapshots, is ignored by the document's .gitignore that
    # the first training wrote: tests/integration/test_train_ignore.py)
    assert sorted(ignored) == ["!! demo/adapter/", "!! demo/run.json", "!! demo/segments/"]


# --------------------------------------------------------------------------- the adapter


def test_adapter_directory_and_config(trained_once: Trained) -> None:
    adapter = trained_once.doc_dir / "adapter"
    assert sorted(p.name for p in adapter.iterdir()) == list(ADAPTER_FILES)
    data = (adapter / "adapter_config.json").read_bytes()
    config = json.loads(data)
    assert data == canonical_json(config)
    # builtin:tiny is not on the Hub: the config names no base (load it by directory)
    assert config["base_model_name_or_path"] is None and config["revision"] is None
    modules = config["target_modules"]
    assert isinstance(modules, list) and len(modules) > 1
    assert modules == sorted(modules)
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    for text in json_strings(config):
        assert not text.startswith(("/", "~")) and not re.match(r"^[A-Za-z]:\\", text), text
    assert str(trained_once.repo).encode() not in data


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_adapter_loads_with_peft_and_changes_the_logits(
    trained_once: Trained, base_cache: Path
) -> None:
    import torch
    from peft import PeftModel, get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from dlm_git.base.tiny import ensure_tiny_base

    adapter = trained_once.doc_dir / "adapter"
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    lora_b = {k: v for k, v in saved.items() if ".lora_B." in k}
    assert lora_b and len(lora_b) == len(saved) // 2
    assert any(bool(v.abs().sum() > 0) for v in lora_b.values()), "LoRA B is still zero"

    base_dir = ensure_tiny_base()
    ids = torch.tensor([[5, 17, 42, 99, 123, 7, 64, 200]])
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        base_logits = base(input_ids=ids).logits.clone()
    model = PeftModel.from_pretrained(base, str(adapter)).eval()
    loaded = get_peft_model_state_dict(model, save_embedding_layers=False)
    assert sorted(loaded) == sorted(saved)
    for name, tensor in saved.items():
        assert torch.equal(loaded[name].cpu(), tensor), name
    with torch.no_grad():
        tuned = model(input_ids=ids).logits
        with model.disable_adapter():
            again = model(input_ids=ids).logits
    assert torch.equal(again, base_logits)
    assert tuned.shape == base_logits.shape
    assert not torch.allclose(tuned, base_logits)


# --------------------------------------------------------------------------- manifest.json


def test_manifest_binds_inputs_and_outputs(trained_once: Trained) -> None:
    from dlm_git.doc.load import load_document
    from dlm_git.manifest.records import sources_record

    doc_dir = trained_once.doc_dir
    files = trained_once.files
    manifest = json.loads(files["manifest.json"])
    assert files["manifest.json"] == canonical_json(manifest)
    assert manifest["schema_version"] == 1
    assert manifest["dlm_sha256"] == hashlib.sha256(files[DOC_NAME]).hexdigest()
    assert manifest["lock_sha256"] == hashlib.sha256(files["dlm.lock"]).hexdigest()

    # sections: the document's own, in file order, then source files by relpath
    loaded = load_document(doc_dir)
    own = [s.section_id for s in loaded.doc.sections]
    from_sources = [s.section_id for s in loaded.sources.sections()]
    assert len(own) >= 3 and len(from_sources) == 2
    assert manifest["section_ids"] == own + from_sources

    # sources: each entry is the file's real hash and size
    entries = manifest["sources"]["files"]
    assert [e["relpath"] for e in entries] == ["notes/hashing.md", "notes/verify.txt"]
    for e in entries:
        data = files[e["relpath"]]
        assert e["sha256"] == hashlib.sha256(data).hexdigest()
        assert e["size"] == len(data)
    recomputed = sources_record((e["relpath"], e["sha256"], e["size"]) for e in entries)
    assert manifest["sources"]["merkle_root"] == recomputed.merkle_root

    # adapter: files and every tensor, recomputed independently
    record = manifest["adapter"]
    for name in ADAPTER_FILES:
        data = files[f"adapter/{name}"]
        assert record["files"][name] == {
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        }
    digest = digest_safetensors(doc_dir / "adapter" / "adapter_model.safetensors")
    assert record["tensor_root"] == digest.tensor_root
    assert record["tensors"] == [
        {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "digest": t.digest}
        for t in digest.tensors
    ]
    assert len(record["tensors"]) == 2 * 7 * 2  # A and B, 7 modules, 2 layers

    lock = json.loads(files["dlm.lock"])
    assert manifest["base"]["tensor_root"] == lock["base_model_sha256"]
    assert manifest["base"]["spec"] == lock["base_model"] == "builtin:tiny"
    assert manifest["config_sha256"] == canonical_json_sha256(manifest["training_config"])
    cfg = manifest["training_config"]
    assert (cfg["max_steps"], cfg["sequence_len"], cfg["micro_batch_size"]) == (3, 64, 2)
    assert cfg["target_modules"] == sorted(cfg["target_modules"])

    metrics = json.loads(files["metrics.json"])
    assert manifest["training"]["steps"] == metrics["steps"] == 3
    # the exact bits live in the records; the metrics file holds what `dvc metrics` shows
    assert "final_loss_hex" not in metrics
    assert float.fromhex(manifest["training"]["final_loss_hex"]) == metrics["final_loss"]
    loss_lines = files["train_loss.tsv"].decode().splitlines()
    assert loss_lines[0] == "step\tloss" and len(loss_lines) == 4
    assert float(loss_lines[-1].split("\t")[1]) == metrics["final_loss"]


def test_committed_outputs_hold_no_paths_or_timestamps(trained_once: Trained) -> None:
    year = f"{datetime.date.today().year}-".encode()
    needles = {
        str(trained_once.repo).encode(),
        str(trained_once.doc_dir).encode(),
        str(Path.cwd()).encode(),
        str(Path.home()).encode(),
        str(Path(sys.executable).parent).encode(),
        b"/tmp/",
        b"2026-",
        year,
    }
    for name in TEXT_OUTPUTS:
        data = trained_once.files[name]
        for needle in needles:
            assert needle not in data, f"{name} contains {needle!r}"
        assert not re.search(rb"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}", data), name
    lock = json.loads(trained_once.files["dlm.lock"])
    assert not any(s.startswith("/") for s in json_strings(lock))


def test_wall_times_live_only_in_run_json(trained_once: Trained) -> None:
    files = trained_once.files
    run = json.loads(files["run.json"])
    for key in ("wall_seconds", "tokenize_seconds", "train_seconds"):
        assert isinstance(run[key], float | int) and run[key] >= 0
    metrics = json.loads(files["metrics.json"])
    assert not [k for k in metrics if re.search(r"second|wall|time|per_s", k)]
    for name, data in files.items():
        if name == "run.json" or name.endswith(".safetensors"):
            continue
        for word in (b"seconds", b"wall", b"tokens_per_second", b"elapsed"):
            assert word not in data, f"{name} contains {word!r}"
