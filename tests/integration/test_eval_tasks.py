"""`dlm-git eval` runs the lm-evaluation-harness tasks a document names (docs/eval.md,
"Tasks"): local task YAML and JSONL, offline, on the base with the trained adapter;
every score with its bits, the digests of the task's files, the harness and its settings,
the same bytes from two fresh processes; bad or code-running task files refused in one
line with the old record kept."""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.support.cli import RunCli, one_line_error
from tests.support.cli import cli as fresh_cli
from tests.support.evaltasks import GEN_TASK, GEN_YAML, MC_TASK, MC_YAML, name_tasks, write_tasks

pytestmark = pytest.mark.slow


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_json(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def with_tasks(doc_dir: Path) -> Path:
    name_tasks(doc_dir / "demo.dlm", write_tasks(doc_dir))
    return doc_dir


def test_each_task_records_its_scores_digests_harness_and_settings(
    trained_repo: Path, run_cli: RunCli
) -> None:
    code, out, err = run_cli("eval", with_tasks(trained_repo))
    assert code == 0, err
    tasks = read_json(trained_repo / "eval.json")["tasks"]
    assert sorted(tasks) == [GEN_TASK, MC_TASK]
    evals = trained_repo / "evals"

    mc, gen = tasks[MC_TASK], tasks[GEN_TASK]
    assert (mc["task_file"], gen["task_file"]) == ("demo/evals/mc.yaml", "demo/evals/gen.yaml")
    assert mc["task_sha256"] == sha256_file(evals / "mc.yaml")
    assert mc["data_sha256"] == {"demo/evals/mc.jsonl": sha256_file(evals / "mc.jsonl")}
    assert gen["data_sha256"] == {"demo/evals/gen.jsonl": sha256_file(evals / "gen.jsonl")}
    assert mc["include_sha256"] == {} == gen["include_sha256"]
    assert mc["harness"] == {"name": "lm-eval", "version": version("lm_eval")} == gen["harness"]
    base = {"batch_size": 1, "num_fewshot": 0, "seed": 42, "limit": None, "bootstrap_iters": 0}
    assert mc["settings"] == {**base, "max_gen_toks": None}
    assert gen["settings"] == {**base, "max_gen_toks": 16}
    assert (mc["samples"], gen["samples"]) == (8, 6)

    assert sorted(mc["metrics"]) == ["acc,none", "acc_norm,none"]
    assert sorted(gen["metrics"]) == ["exact_match,none"]
    for entry, rows in ((mc, 8), (gen, 6)):
        for score in entry["metrics"].values():
            assert float.fromhex(score["hex"]) == score["value"]
            assert (score["value"] * rows).is_integer() and 0 <= score["value"] <= 1

    numbers = read_json(trained_repo / "eval_metrics.json")["tasks"]
    assert numbers[MC_TASK] == {k: v["value"] for k, v in mc["metrics"].items()}


def test_two_fresh_processes_write_the_same_tasks_bytes(trained_repo: Path) -> None:
    with_tasks(trained_repo)
    first = fresh_cli("eval", trained_repo)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""  # no progress bars or library noise
    written = (trained_repo / "eval.json").read_bytes()
    assert read_json(trained_repo / "eval.json")["tasks"]
    (trained_repo / "eval.json").unlink()
    again = fresh_cli("eval", trained_repo)
    assert again.returncode == 0, again.stderr
    assert (trained_repo / "eval.json").read_bytes() == written


def test_params_yaml_names_the_tasks_instead_of_the_document(
    trained_repo: Path, run_cli: RunCli
) -> None:
    with_tasks(trained_repo)
    params = trained_repo.parent / "params.yaml"
    params.write_text("docs:\n  demo:\n    eval:\n      tasks: [evals/gen.yaml]\n", "utf-8")
    code, _, err = run_cli("eval", trained_repo)
    assert code == 0, err
    assert sorted(read_json(trained_repo / "eval.json")["tasks"]) == [GEN_TASK]


def _rename_task(doc_file: Path) -> None:
    text = doc_file.read_text("utf-8")
    doc_file.write_text(text.replace("- evals/mc.yaml", "- evals/none.yaml"), "utf-8")


def _mc(doc_dir: Path, text: str) -> None:
    (doc_dir / "evals" / "mc.yaml").write_text(text, "utf-8")


BAD_INPUT = {
    "unknown-task-file": (
        lambda d: _rename_task(d / "demo.dlm"),
        ("demo/demo.dlm: eval.tasks", "no such file"),
    ),
    "yaml-does-not-parse": (
        lambda d: _mc(d, MC_YAML.replace("test_split: test", "test: [")),
        ("demo/evals/mc.yaml:", "does not parse"),
    ),
    "missing-data-file": (
        lambda d: (d / "evals" / "mc.jsonl").unlink(),
        ("demo/evals/mc.yaml: data_files", "no such file"),
    ),
    "data-not-matching-the-task": (
        lambda d: (d / "evals" / "mc.jsonl").write_text('{"question": "q"}\n', "utf-8"),
        ("demo/evals/mc.jsonl:1", "no column 'choices'"),
    ),
    "function-tag": (
        lambda d: _mc(d, MC_YAML + "process_results: !function utils.process_results\n"),
        ("demo/evals/mc.yaml:20", "runs code"),
    ),
    "remote-dataset": (
        lambda d: _mc(d, MC_YAML.replace("dataset_path: json", "dataset_path: allenai/ai2_arc")),
        ("demo/evals/mc.yaml:2", "no download"),
    ),
    "template-outside-the-rules": (  # a 10 GB text: refused before anything loads
        lambda d: _mc(d, MC_YAML.replace("{{question}}", "{{question * 10**10}}")),
        ("demo/evals/mc.yaml:8", "does not render", "the operator *"),
    ),
    "template-over-its-bounds": (  # 4e8 loop steps from a row's size: stopped at render
        lambda d: _long_rows(
            d, "{% for a in question %}{% for b in question %}.{% endfor %}{% endfor %}"
        ),
        ("demo/evals/mc.yaml", "over its bounds", "loops run over"),
    ),
}


def _long_rows(doc_dir: Path, template: str) -> None:
    _mc(doc_dir, MC_YAML.replace("Question: {{question}}\\nAnswer:", template))
    row = {"question": "q" * 20_000, "choices": ["a", "b"], "label": 0}
    (doc_dir / "evals" / "mc.jsonl").write_text(json.dumps(row) + "\n", "utf-8")


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_task_input_is_one_line_and_the_old_record_stays(
    trained_repo: Path, run_cli: RunCli, case: str
) -> None:
    code, _, err = run_cli("eval", trained_repo)  # a record without tasks
    assert code == 0, err
    old = (
        (trained_repo / "eval.json").read_bytes(),
        (trained_repo / "eval_metrics.json").read_bytes(),
    )
    with_tasks(trained_repo)
    spoil, names = BAD_INPUT[case]
    spoil(trained_repo)
    proc = fresh_cli("eval", trained_repo)
    line = one_line_error(proc, 1, *names)
    assert "hint:" in line
    now = (
        (trained_repo / "eval.json").read_bytes(),
        (trained_repo / "eval_metrics.json").read_bytes(),
    )
    assert now == old


def test_a_template_cannot_reach_python(trained_repo: Path) -> None:
    with_tasks(trained_repo)
    marker = trained_repo / "PWNED"
    payload = "{{ lipsum.__globals__['os'].system('touch " + str(marker) + "') }}"
    text = GEN_YAML.replace('doc_to_text: "Q: {{question}}\\nA:"', f'doc_to_text: "{payload}"')
    assert payload in text
    (trained_repo / "evals" / "gen.yaml").write_text(text, "utf-8")
    proc = fresh_cli("eval", trained_repo)
    one_line_error(proc, 1, "demo/evals/gen.yaml", "unsafe")
    assert not marker.exists()
    assert not (trained_repo / "eval.json").exists()
