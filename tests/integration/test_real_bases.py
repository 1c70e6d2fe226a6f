"""Real architectures at real scale, built locally: SmolLM2-135M-, Qwen2.5- and Pythia-shaped.

Specification:
- `dlm-git base build NAME` gives byte-identical files in fresh processes, in a directory
  and in a Hugging Face cache layout (`models--org--name/{blobs,snapshots,refs/main}`), so
  `./bases/x`, `hf:org/name@<rev>` and a registry key resolve offline.
- The 135M-parameter SmolLM2 shape (reached through its registry key) trains bit-exact in
  fresh processes, replays BITWISE from the commit, and its adapter loads with
  `PeftModel.from_pretrained`.
- LoRA targets are each family's own linear modules (GPT-NeoX's fused `query_key_value`).
- No pickle is loaded and no code shipped with a base runs: a pickle-only base, a
  custom-code-only architecture or tokenizer is refused in one line; a native
  `model_type` with an `auto_map` trains with the native class.

What a test asserts of a fresh process (a build's or a training's bytes run to run, a
refusal's one line) runs in one; the other builds, trainings and the replay are the CLI
in this process (tests/support/verdicts.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlm_git.base.registry import REGISTRY
from tests.support.cli import cli, imports_of, one_line_error
from tests.support.demo import write_demo
from tests.support.env import subprocess_env
from tests.support.gitrepo import git, init_repo
from tests.support.hub import stand_in
from tests.support.verdicts import Result, call_main_in, main_captured

pytestmark = pytest.mark.slow

QUICK = {"max_steps": "2", "sequence_len": "64", "micro_batch_size": "2"}


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face cache holding the three families (Qwen2.5 and Pythia cut to 2 layers)."""
    root = tmp_path_factory.mktemp("hub")
    for args in (
        ("smollm2-135m", "--repo-id", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        ("qwen2.5-0.5b", "--layers", "2", "--vocab", "4096"),
        ("pythia-70m", "--layers", "2"),
    ):
        built = main_captured(root, ["base", "build", *args, "--hf-cache", str(root)])
        assert built.code == 0, built.stderr
    stand_in(root, "smollm2-135m")  # the key resolves to its pin only
    return root


def snapshot_of(hub: Path, repo_id: str) -> tuple[str, Path]:
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    revision = (repo / "refs" / "main").read_text("ascii")
    return revision, repo / "snapshots" / revision


def file_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def train_here(doc_dir: Path, capfd: pytest.CaptureFixture[str], *flags: str) -> Result:
    """`dlm-git train DOC_DIR -q --device cpu FLAGS` in this process, from its repository."""
    argv = ["train", str(doc_dir), "-q", "--device", "cpu", *flags]
    return call_main_in(doc_dir.parent, capfd)(argv)


def test_a_build_is_byte_identical_in_fresh_processes_and_in_the_cache_layout(
    tmp_path: Path, hub: Path
) -> None:
    # "b" is built in a temp directory on another file system where the machine has one:
    # its files are then copied into place, where "a"'s were moved
    build = ("base", "build", "pythia-70m", "--layers", "2", "--out")
    assert cli(*build, tmp_path / "a").returncode == 0
    with other_file_system(tmp_path) as env:
        proc = cli(*build, tmp_path / "b", env=env)
    assert proc.returncode == 0, proc.stderr
    first = file_bytes(tmp_path / "a")
    assert first == file_bytes(tmp_path / "b")
    assert "pytorch_model.bin" not in first and "model.safetensors" in first
    # the cache layout: refs/main names a snapshot of relative links to sha256-named blobs
    revision, snap = snapshot_of(hub, "dlm-git-random/pythia-70m-L2")
    assert re.fullmatch(r"[0-9a-f]{40}", revision)
    for link in snap.iterdir():
        target = os.readlink(link)
        assert target.startswith("../../blobs/") and not os.path.isabs(target)
        assert link.read_bytes() == first[link.name]
        import hashlib

        assert target.rsplit("/", 1)[1] == hashlib.sha256(first[link.name]).hexdigest()
    # the published shape, with the tokenizer's own vocabulary documented beside it
    config = json.loads(first["config.json"])
    assert config["model_type"] == "gpt_neox" and config["hidden_size"] == 512
    assert config["vocab_size"] == 50304 and config["num_hidden_layers"] == 2


@contextlib.contextmanager
def other_file_system(tmp_path: Path) -> Iterator[dict[str, str]]:
    """TMPDIR on a file system other than `tmp_path`'s (a tmpfs `/dev/shm`), or nothing
    where the machine has none."""
    shm = Path("/dev/shm")
    if not os.access(shm, os.W_OK) or shm.stat().st_dev == tmp_path.stat().st_dev:
        yield {}
        return
    elsewhere = tempfile.mkdtemp(dir=shm)
    try:
        yield {"TMPDIR": elsewhere}
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def pipeline_repo(tmp_path: Path, doc: str, base_model: str) -> Path:
    """`git init` + `dlm-git init --doc DOC`, the document put on `base_model`."""
    repo = init_repo(tmp_path / "repo")
    proc = cli("init", "--doc", doc, "--no-hooks", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    shutil.rmtree(repo / doc)
    write_demo(repo / doc, name=f"{doc}.dlm", base_model=base_model, **QUICK)
    return repo


def dvc(repo: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args],
        cwd=repo,
        env=subprocess_env(**(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )


def test_smollm2_135m_shape_trains_bit_exact_replays_bitwise_and_loads_in_peft(
    tmp_path: Path, hub: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"HF_HUB_CACHE": str(hub)}
    _, snap = snapshot_of(hub, "HuggingFaceTB/SmolLM2-135M-Instruct")
    revision = REGISTRY["smollm2-135m"].revision
    config = json.loads((snap / "config.json").read_text("utf-8"))
    assert (config["hidden_size"], config["num_hidden_layers"]) == (576, 30)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (9, 3)
    assert config["intermediate_size"] == 1536 and config["tie_word_embeddings"] is True

    # the registry key resolves to its pinned snapshot in the local cache; `dvc repro` trains
    repo = pipeline_repo(tmp_path, "smol", "smollm2-135m")
    proc = dvc(repo, "repro", env=env)
    assert proc.returncode == 0, proc.stdout
    assert not (repo / "bases" / "tiny").exists()  # no document uses the tiny base
    record = json.loads((repo / "smol" / "base.json").read_text("utf-8"))
    assert record["revision"] == revision and record["spec"] == "smollm2-135m"
    lock = json.loads((repo / "smol" / "dlm.lock").read_text("utf-8"))
    assert lock["base_model_revision"] == revision
    assert lock["determinism_class"] == "strong"
    weights = repo / "smol" / "adapter" / "adapter_model.safetensors"
    from dlm_git.hashing import sha256_file

    first = sha256_file(weights)
    run = json.loads((repo / "smol" / "run.json").read_text("utf-8"))
    assert run["peak_rss_bytes"] > 540_000_000  # at least the fp32 weights were resident
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "trained on the 135M shape")

    # run to run, in a fresh process: the same bytes, and the records unchanged
    proc = cli("train", repo / "smol", "-q", "--device", "cpu", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["adapter_sha256"] == first
    assert git(repo, "status", "--porcelain") == ""

    monkeypatch.setenv("HF_HUB_CACHE", env["HF_HUB_CACHE"])  # read when the base resolves
    replay = call_main_in(repo, capfd)(["verify", "HEAD", "--level", "replay", "--json"])
    assert replay.code == 0, replay.stdout + replay.stderr
    report = replay.payload
    assert report["verdict"] == "VERIFIED", report
    checks = {c["name"]: c for c in report["documents"][0]["checks"]}
    assert checks["replay"]["ok"] and "bitwise" in checks["replay"]["detail"], checks

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(str(snap)), str(weights.parent)
    )
    names = {n for n, _ in model.named_parameters() if "lora_A" in n}
    assert len(names) == 30 * 7  # every projection of every layer


def test_swapping_the_base_reruns_training(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = pipeline_repo(tmp_path, "d", "../bases/pythia")
    # the document was rewritten after `init`: init again (as `dvc repro` would hint), before
    # the base is built: the inputs stage lists a local base that is not there yet
    assert cli("init", "--no-hooks", cwd=repo).returncode == 0
    here = call_main_in(repo, capfd)
    build = ["base", "build", "pythia-70m", "--out", str(repo / "bases" / "pythia")]
    assert here([*build, "--layers", "1"]).code == 0
    proc = dvc(repo, "repro")
    assert proc.returncode == 0, proc.stdout
    assert not (repo / "bases" / "tiny").exists()
    assert dvc(repo, "repro").stdout.count("didn't change, skipping") >= 2  # train, verify
    assert here([*build, "--layers", "2"]).code == 0  # another base, same path
    proc = dvc(repo, "repro")
    assert "Running stage 'train@d'" in proc.stdout, proc.stdout
    assert proc.returncode != 0 and "base_model_sha256" in proc.stdout  # the lock refuses


@pytest.mark.parametrize(
    ("repo_id", "targets", "template"),
    [
        (
            "dlm-git-random/qwen2.5-0.5b-L2-V4096",
            ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"],
            "chat_template",
        ),
        (
            "dlm-git-random/pythia-70m-L2",
            ["dense", "dense_4h_to_h", "dense_h_to_4h", "query_key_value"],
            "plain",
        ),
    ],
)
def test_each_family_trains_on_its_own_module_names(
    tmp_path: Path,
    hub: Path,
    repo_id: str,
    targets: list[str],
    template: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    revision, snap = snapshot_of(hub, repo_id)
    doc_dir = init_repo(tmp_path / "repo") / "d"
    write_demo(doc_dir, base_model=f"hf:{repo_id}@{revision}", **QUICK)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))  # read when the base resolves
    trained = train_here(doc_dir, capfd, "--accept-license")
    assert trained.code == 0, trained.stderr
    config = json.loads((doc_dir / "adapter" / "adapter_config.json").read_text("utf-8"))
    assert config["target_modules"] == targets
    manifest = json.loads((doc_dir / "manifest.json").read_text("utf-8"))
    assert manifest["training_config"]["template"] == template
    assert manifest["base"]["revision"] == revision


# --------------------------------------------------------------- what is never loaded or run

MARKER = "code-ran"


class _Explode:
    """Unpickling this creates the marker file: proof that a pickle was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def tiny_copy(tmp_path: Path, name: str = "base") -> Path:
    from dlm_git.base.tiny import ensure_tiny_base

    dest = tmp_path / "repo" / name
    shutil.copytree(ensure_tiny_base(), dest)
    return dest


def test_a_pickle_only_base_is_refused_without_loading_it(tmp_path: Path) -> None:
    base = tiny_copy(tmp_path)
    marker = tmp_path / MARKER
    (base / "model.safetensors").unlink()
    (base / "pytorch_model.bin").write_bytes(pickle.dumps(_Explode(str(marker))))
    doc_dir = tmp_path / "repo" / "d"
    write_demo(doc_dir, base_model="../base", **QUICK)
    line = one_line_error(cli("train", doc_dir, "-q", "--device", "cpu", "--accept-license"), 1)
    assert "pytorch_model.bin" in line and "safetensors" in line, line
    assert not marker.exists()


def _ship_code(base: Path, marker: Path) -> None:
    code = f"open({str(marker)!r}, 'w').close()\n"
    for module in ("modeling_x.py", "configuration_x.py", "tokenization_x.py"):
        (base / module).write_text(code, "utf-8")


def test_an_architecture_only_custom_code_provides_is_refused(tmp_path: Path) -> None:
    base = tiny_copy(tmp_path)
    marker = tmp_path / MARKER
    _ship_code(base, marker)
    config = json.loads((base / "config.json").read_text("utf-8"))
    config["model_type"] = "x-model"
    config["auto_map"] = {
        "AutoConfig": "configuration_x.XConfig",
        "AutoModelForCausalLM": "modeling_x.XForCausalLM",
    }
    (base / "config.json").write_text(json.dumps(config), "utf-8")
    doc_dir = tmp_path / "repo" / "d"
    write_demo(doc_dir, base_model="../base", **QUICK)
    line = one_line_error(cli("train", doc_dir, "-q", "--device", "cpu", "--accept-license"), 1)
    assert "config.json" in line and "modeling_x.py" in line and "x-model" in line, line
    assert not marker.exists()


def test_a_tokenizer_only_custom_code_provides_is_refused(tmp_path: Path) -> None:
    base = tiny_copy(tmp_path)
    marker = tmp_path / MARKER
    _ship_code(base, marker)
    tok = json.loads((base / "tokenizer_config.json").read_text("utf-8"))
    tok["tokenizer_class"] = "XTokenizer"
    tok["auto_map"] = {"AutoTokenizer": ["tokenization_x.XTokenizer", None]}
    (base / "tokenizer_config.json").write_text(json.dumps(tok), "utf-8")
    doc_dir = tmp_path / "repo" / "d"
    write_demo(doc_dir, base_model="../base", **QUICK)
    line = one_line_error(cli("train", doc_dir, "-q", "--device", "cpu", "--accept-license"), 1)
    assert "tokenizer_config.json" in line and "XTokenizer" in line, line
    assert not marker.exists()


def test_a_native_model_type_trains_natively_despite_an_auto_map(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    base = tiny_copy(tmp_path)
    marker = tmp_path / MARKER
    _ship_code(base, marker)
    config = json.loads((base / "config.json").read_text("utf-8"))
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}
    (base / "config.json").write_text(json.dumps(config), "utf-8")
    doc_dir = tmp_path / "repo" / "d"
    write_demo(doc_dir, base_model="../base", **QUICK)
    trained = train_here(doc_dir, capfd, "--accept-license")  # shipped code would run here
    assert trained.code == 0, trained.stderr
    assert not marker.exists()


# --------------------------------------------------------------------------- options


def test_gradient_checkpointing_is_recorded_and_gives_the_same_bits_on_cpu(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    shas = {}
    for on in (False, True):
        doc_dir = init_repo(tmp_path / f"repo-{on}") / "d"
        extra = {"gradient_checkpointing": "true"} if on else {}
        write_demo(doc_dir, base_model="builtin:tiny", **QUICK, **extra)
        trained = train_here(doc_dir, capfd, "--json")
        assert trained.code == 0, trained.stderr
        out = trained.payload
        shas[on] = out["adapter_sha256"]
        flags = out["lock"]["determinism_flags"]
        manifest = json.loads((doc_dir / "manifest.json").read_text("utf-8"))
        if on:
            assert flags["gradient_checkpointing"] is True
            assert manifest["training_config"]["gradient_checkpointing"] is True
        else:  # off is the default: records made before the option read the same
            assert "gradient_checkpointing" not in flags
            assert "gradient_checkpointing" not in manifest["training_config"]
    assert shas[False] == shas[True]


def test_base_build_misuse_is_one_line(tmp_path: Path) -> None:
    proc = cli("base", "build", "gpt-9", "--out", tmp_path / "x")
    assert "unknown architecture 'gpt-9'" in one_line_error(proc, 1)
    proc = cli("base", "build", "pythia-70m")
    assert proc.returncode == 2 and "nothing to build into" in proc.stderr
    proc = cli("base", "build", "pythia-70m", "--out", tmp_path / "x", "--layers", "0")
    assert "--layers 0" in one_line_error(proc, 1)
    proc = cli("base", "build", "pythia-70m", "--hf-cache", tmp_path, "--repo-id", "../../etc")
    assert "org/name" in one_line_error(proc, 1)


def test_base_build_never_replaces_a_directory_it_did_not_build(tmp_path: Path) -> None:
    mine = tmp_path / "my-model"
    mine.mkdir()
    (mine / "model.safetensors").write_bytes(b"precious")
    for args in (("pythia-70m", "--layers", "1"), ()):
        line = one_line_error(cli("base", "build", *args, "--out", mine), 1)
        assert "refusing to replace it" in line, line
    assert (mine / "model.safetensors").read_bytes() == b"precious"


@pytest.mark.parametrize(
    "config", [b"{", b"[1]", b"[" * 100_000, b"\xff\xfe", b'{"model_type": 7}']
)
def test_a_malformed_base_config_is_one_line(tmp_path: Path, config: bytes) -> None:
    base = tiny_copy(tmp_path)
    (base / "config.json").write_bytes(config)
    doc_dir = tmp_path / "repo" / "d"
    write_demo(doc_dir, base_model="../base", **QUICK)
    line = one_line_error(cli("train", doc_dir, "-q", "--device", "cpu", "--accept-license"), 1)
    assert "config.json" in line, line
    # refused before the training stack loads, and before anything is written
    run = imports_of(doc_dir, "train", ".", "-q", "--device", "cpu", "--accept-license")
    assert run.code == 1 and run.heavy == [], run.heavy
    assert sorted(p.name for p in doc_dir.iterdir()) == ["demo.dlm", "notes"]
