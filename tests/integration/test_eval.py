"""`dlm-git eval DOC`: the record of a trained document, reproducible to the byte, and bad
input refused in one line with the old record kept (docs/eval.md)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlm_git.doc.parser import parse_document
from tests.support.cli import RunCli, one_line_error
from tests.support.cli import cli as fresh_cli
from tests.support.demo import DEVICE_ARGS
from tests.support.env import subprocess_env
from tests.support.gitrepo import init_repo

pytestmark = pytest.mark.slow

WEIGHTS = "adapter/adapter_model.safetensors"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def test_the_record_names_what_it_evaluated_and_answers_the_sampled_probes(
    trained_repo: Path, run_cli: RunCli
) -> None:
    code, out, err = run_cli("eval", trained_repo)
    assert code == 0, err
    assert "eval.json: written" in out

    record = read_json(trained_repo / "eval.json")
    lock = read_json(trained_repo / "dlm.lock")
    assert record["eval_version"] == 1
    assert record["adapter_sha256"] == sha256_file(trained_repo / WEIGHTS)
    assert record["manifest_sha256"] == sha256_file(trained_repo / "manifest.json")
    flags = lock["determinism_flags"]
    assert record["numerics"]["profile"] == flags["numerics"]
    assert record["numerics"]["threads"] == flags["threads"]
    assert record["settings"] == {
        "batch_size": 1,
        "max_new_tokens": 32,
        "seed": 42,
        "probe_sample": 3,
        "decoding": "greedy",
        "exact_match": "strip",
    }
    assert record["val"] is None  # no held-out fraction: nothing held out
    assert record["tasks"] == {}

    pairs = [s for s in parse_document(trained_repo / "demo.dlm").sections if s.question]
    assert len(pairs) == 2  # fewer than the sample: every pair, by seeded hash
    key = lambda s: hashlib.sha256(f"42\x00{s.question}".encode()).hexdigest()  # noqa: E731
    expected = sorted(pairs, key=key)
    probes = record["probes"]
    assert [p["section_id"] for p in probes] == [s.section_id for s in expected]
    for probe, section in zip(probes, expected, strict=True):
        assert (probe["question"], probe["reference"]) == (section.question, section.answer)
        assert probe["marked"] is False
        assert 1 <= len(probe["generated_ids"]) <= 32
        assert probe["exact_match"] == (probe["generated"].strip() == section.answer.strip())

    metrics = read_json(trained_repo / "eval_metrics.json")
    matched = sum(p["exact_match"] for p in probes)
    assert metrics == {"probes": {"count": 2, "exact_match": matched / 2}}


def test_two_fresh_processes_write_the_same_bytes_and_leave_an_unchanged_record(
    trained_repo: Path, run_cli: RunCli
) -> None:
    first = fresh_cli("eval", trained_repo)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""  # no library noise
    written = (trained_repo / "eval.json").read_bytes()
    numbers = (trained_repo / "eval_metrics.json").read_bytes()
    os.utime(trained_repo / "eval.json", (1, 1))

    again = fresh_cli("eval", trained_repo)
    assert again.returncode == 0, again.stderr
    assert "eval.json: unchanged" in again.stdout
    assert (trained_repo / "eval.json").stat().st_mtime == 1  # not rewritten

    (trained_repo / "eval.json").unlink()
    (trained_repo / "eval_metrics.json").unlink()
    third = fresh_cli("eval", trained_repo)
    assert third.returncode == 0, third.stderr
    assert (trained_repo / "eval.json").read_bytes() == written
    assert (trained_repo / "eval_metrics.json").read_bytes() == numbers

    # and in this process, where torch already runs (here, or in the evaluation child)
    (trained_repo / "eval.json").unlink()
    code, _, err = run_cli("eval", trained_repo)
    assert code == 0, err
    assert (trained_repo / "eval.json").read_bytes() == written

    # and from a process that runs torch under no pinned profile: the evaluation child
    (trained_repo / "eval.json").unlink()
    script = (
        "import sys, torch\n"
        "from dlm_git.numerics.activate import can_run_in_process\n"
        "from dlm_git.cli import main\n"
        "assert not can_run_in_process({'ATEN_CPU_CAPABILITY': 'default'})\n"
        "sys.exit(main(['eval', sys.argv[1]]))\n"
    )
    proc = run_python(script, trained_repo)
    assert proc.returncode == 0, proc.stderr
    assert (trained_repo / "eval.json").read_bytes() == written


def run_python(script: str, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


KEPT = b'{"an": "older record"}\n'


def _keep_old_record(doc_dir: Path) -> None:
    (doc_dir / "eval.json").write_bytes(KEPT)


def test_an_untrained_document_is_one_line_and_writes_nothing(trained_repo: Path) -> None:
    shutil.rmtree(trained_repo / "adapter")
    _keep_old_record(trained_repo)
    proc = fresh_cli("eval", trained_repo)
    line = one_line_error(proc, 1, "adapter_model.safetensors", "not trained", "dlm-git train")
    assert "hint:" in line
    assert (trained_repo / "eval.json").read_bytes() == KEPT
    assert not (trained_repo / "eval_metrics.json").exists()


def test_an_adapter_the_manifest_does_not_record_is_refused(trained_repo: Path) -> None:
    weights = trained_repo / WEIGHTS
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.unlink()
    weights.write_bytes(bytes(data))
    _keep_old_record(trained_repo)
    proc = fresh_cli("eval", trained_repo)
    one_line_error(proc, 1, "adapter_model.safetensors", "manifest.json records", "hint:")
    assert (trained_repo / "eval.json").read_bytes() == KEPT


@pytest.mark.parametrize("field", ["determinism_flags", "threads"])
def test_a_lock_without_a_numerics_record_is_refused(trained_repo: Path, field: str) -> None:
    lock = read_json(trained_repo / "dlm.lock")
    if field == "threads":
        lock["determinism_flags"]["threads"] = "many"
    else:
        lock["determinism_flags"] = "fast"
    (trained_repo / "dlm.lock").write_text(json.dumps(lock), "utf-8")
    _keep_old_record(trained_repo)
    proc = fresh_cli("eval", trained_repo)
    one_line_error(proc, 1, "dlm.lock")
    assert (trained_repo / "eval.json").read_bytes() == KEPT


def test_a_path_that_is_no_document_is_one_line(tmp_path: Path) -> None:
    proc = fresh_cli("eval", tmp_path)
    one_line_error(proc, 1, str(tmp_path), "no .dlm file")


HELD_OUT_DOC = """---
dlm_id: 01M86RSW7Y0302GRBP20C2X76R
dlm_version: 1
base_model: builtin:tiny
training:
  sequence_len: 64
  micro_batch_size: 2
  max_steps: 3
  seed: 42
  val_fraction: 0.5
---

# Doc

First prose paragraph about the project.

Second prose paragraph, about something else entirely.

::instruction::
### Q
What is one?

### A
One.

::instruction::
### Q !probe
What is two?

### A
Two.

::instruction::
### Q
What is three?

### A
Three.

::instruction::
### Q
What is four?

### A
Four.
"""


def test_held_out_rows_are_scored_by_mode_and_marked_probes_come_first(
    tmp_path: Path, run_cli: RunCli
) -> None:
    from dlm_git.train.heldout import ROW_INDEX, is_held_out

    doc_dir = init_repo(tmp_path / "repo") / "doc"
    doc_dir.mkdir()
    (doc_dir / "doc.dlm").write_text(HELD_OUT_DOC, "utf-8")
    code, _, err = run_cli("train", doc_dir, "-q", *DEVICE_ARGS)
    assert code == 0, err
    code, _, err = run_cli("eval", doc_dir)
    assert code == 0, err
    record = read_json(doc_dir / "eval.json")

    sections = parse_document(doc_dir / "doc.dlm").sections
    held = [s for s in sections if is_held_out(s.section_id, ROW_INDEX, 42, 0.5)]
    val = record["val"]
    assert val["val_fraction"] == 0.5
    for mode, kind in (("prose", "prose"), ("instruction", "instruction")):
        rows = sum(1 for s in held if s.kind == kind)
        entry = val[mode]
        assert (entry["rows"] if entry else 0) == rows, (mode, held)
    overall = val["overall"]
    parts = [val[m] for m in ("prose", "instruction") if val[m]]
    assert overall["rows"] == len(held) and overall["tokens"] == sum(p["tokens"] for p in parts)
    for entry in (overall, *parts):
        assert float.fromhex(entry["loss_hex"]) == entry["loss"] > 0
        assert (
            float.fromhex(entry["perplexity_hex"]) == entry["perplexity"] == math.exp(entry["loss"])
        )
    nll = sum(p["loss"] * p["tokens"] for p in parts)
    assert overall["loss"] == pytest.approx(nll / overall["tokens"], rel=1e-12)

    probes = record["probes"]
    assert [(p["question"], p["marked"]) for p in probes][0] == ("What is two?", True)
    assert len(probes) == 3 and not any(p["marked"] for p in probes[1:])
    metrics = read_json(doc_dir / "eval_metrics.json")
    assert metrics["val"]["overall"] == {
        "loss": overall["loss"],
        "perplexity": overall["perplexity"],
    }


def test_the_held_out_loss_is_the_models_own_loss_on_those_rows(
    tmp_path: Path, run_cli: RunCli
) -> None:
    """The recorded instruction loss, against transformers' own mean loss of each held-out
    instruction row (labels masked as training masks them)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from dlm_git.doc.load import load_document
    from dlm_git.train.pipeline import load_or_tokenize
    from dlm_git.train.rows import section_rows

    doc_dir = init_repo(tmp_path / "repo") / "doc"
    doc_dir.mkdir()
    (doc_dir / "doc.dlm").write_text(HELD_OUT_DOC, "utf-8")
    assert run_cli("train", doc_dir, "-q", *DEVICE_ARGS)[0] == 0
    assert run_cli("eval", doc_dir)[0] == 0
    recorded = read_json(doc_dir / "eval.json")["val"]["instruction"]

    from dlm_git.base.resolve import resolve_base

    loaded = load_document(doc_dir / "doc.dlm")
    fm = loaded.doc.frontmatter
    resolved = resolve_base(fm.base_model, doc_dir, loaded.repo_root)
    tok = load_or_tokenize(loaded, resolved, use_cache=False)
    rows, _ = section_rows(
        loaded.doc.sections, fm.system_prompt, tok.template_kind == "chat_template"
    )
    chat = {r.row_id for r in rows if r.kind == "chat"}
    base = AutoModelForCausalLM.from_pretrained(str(resolved.path), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(doc_dir / "adapter")).eval()
    total, tokens = 0.0, 0
    for seq in tok.held_out or []:
        if seq.row_id not in chat:
            continue
        ids = torch.as_tensor(seq.input_ids, dtype=torch.long).unsqueeze(0)
        labels = torch.as_tensor(seq.labels, dtype=torch.long).unsqueeze(0)
        n = int((labels[0, 1:] != -100).sum())
        with torch.no_grad():
            total += float(model(input_ids=ids, labels=labels).loss) * n
        tokens += n
    assert recorded["tokens"] == tokens > 0
    assert recorded["loss"] == pytest.approx(total / tokens, rel=1e-5)
