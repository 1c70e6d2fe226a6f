"""The trust boundary of lm-eval tasks (docs/eval.md, "Tasks"): a task file is read as
hostile bytes, and anything that would run code, read outside the repository or
download is refused in one line naming the file (and line), before lm-eval sees it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from dlm_git.doc.errors import FrontmatterError
from dlm_git.errors import DlmGitError
from dlm_git.eval.record import EvalError
from dlm_git.eval.taskdef import load_tasks, worktree
from dlm_git.train.doc_params import read_doc_params
from tests.support.docs import DLM_ID
from tests.support.evaltasks import GEN_YAML, MC_YAML, write_tasks
from tests.support.parsing import HEAD, error, parse

DOC = "demo"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write_tasks(root / DOC)
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(repo: Path, entry: str) -> str:
    with pytest.raises(EvalError) as caught:
        load_tasks(worktree(repo), DOC, (entry,), "demo/demo.dlm: eval.tasks")
    line = caught.value.one_line()
    assert "\n" not in line and "(hint: " in line, line
    return line


def write(repo: Path, name: str, text: str) -> str:
    (repo / DOC / "evals" / name).write_text(text, "utf-8")
    return f"evals/{name}"


def test_a_task_names_its_file_its_includes_and_its_data_by_repository_path(repo: Path) -> None:
    write(repo, "base.yaml", MC_YAML.split("output_type:")[0])
    child = "include: base.yaml\ntask: demo_mc2\noutput_type:" + MC_YAML.split("output_type:")[1]
    entry = write(repo, "child.yaml", child)
    (task,) = load_tasks(worktree(repo), DOC, (entry,))
    evals = repo / DOC / "evals"
    assert (task.name, task.path) == ("demo_mc2", "demo/evals/child.yaml")
    assert task.sha256 == sha(evals / "child.yaml")
    assert task.includes == {"demo/evals/base.yaml": sha(evals / "base.yaml")}
    assert task.data == {"demo/evals/mc.jsonl": sha(evals / "mc.jsonl")}
    assert task.config["output_type"] == "multiple_choice"
    assert task.config["dataset_kwargs"] == {"data_files": {"test": "demo/evals/mc.jsonl"}}


def test_the_two_example_tasks_pass(repo: Path) -> None:
    tasks = load_tasks(worktree(repo), DOC, ("evals/mc.yaml", "evals/gen.yaml"))
    assert [t.name for t in tasks] == ["demo_mc", "demo_gen"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        pytest.param(
            MC_YAML + "process_results: !function utils.process_results\n",
            20,
            "runs code",
            id="function-tag",
        ),
        pytest.param(
            MC_YAML.replace("doc_to_text: ", "doc_to_text: !function utils.text #"),
            8,
            "runs code",
            id="function-tag-in-a-template",
        ),
        pytest.param(
            MC_YAML + "process_results: utils.process_results\n",
            20,
            "Python hook",
            id="process-results",
        ),
        pytest.param(MC_YAML + "class: mymod.Task\n", 20, "Python task class", id="class"),
        pytest.param(
            MC_YAML + "filter_list:\n  - name: f\n    filter:\n      - function: custom\n",
            20,
            "runs code",
            id="filters",
        ),
        pytest.param(
            MC_YAML.replace("metric: acc_norm", "metric: my_metrics.score"),
            11,
            "built-in",
            id="custom-metric",
        ),
        pytest.param(
            MC_YAML.replace("metric: acc_norm", "metric: bleu"),
            11,
            "built-in",
            id="hub-metric",
        ),
        pytest.param(
            MC_YAML.replace("dataset_path: json", "dataset_path: allenai/ai2_arc"),
            2,
            "no download",
            id="remote-dataset",
        ),
        pytest.param(
            MC_YAML.replace("    test: mc.jsonl", "    test: mc.jsonl\n  revision: main"),
            3,
            "local data only",
            id="dataset-kwargs",
        ),
        pytest.param(
            GEN_YAML.replace("do_sample: false", "do_sample: true"),
            10,
            "greedy",
            id="sampling",
        ),
        pytest.param(MC_YAML + "unsafe_code: true\n", 20, "not a task setting", id="unknown"),
    ],
)
def test_a_task_that_would_run_code_or_download_is_refused_at_its_line(
    repo: Path, text: str, line: int, words: str
) -> None:
    got = refused(repo, write(repo, "bad.yaml", text))
    assert got.startswith(f"demo/evals/bad.yaml:{line}: "), got
    assert words in got


@pytest.mark.parametrize(
    ("include", "words"),
    [
        ("../../outside.yaml", "outside"),
        ("/etc/passwd", "relative"),
        ("https://example.com/task.yaml", "remote"),
        ("missing.yaml", "no such file"),
    ],
)
def test_an_include_outside_the_repository_or_missing_is_refused(
    repo: Path, include: str, words: str
) -> None:
    (repo.parent / "outside.yaml").write_text(MC_YAML, "utf-8")
    got = refused(repo, write(repo, "inc.yaml", f"include: {include}\n"))
    assert got.startswith("demo/evals/inc.yaml: include"), got
    assert words in got


def test_an_include_through_a_symlink_is_refused(repo: Path) -> None:
    (repo.parent / "outside.yaml").write_text(MC_YAML, "utf-8")
    (repo / DOC / "evals" / "link.yaml").symlink_to(repo.parent / "outside.yaml")
    got = refused(repo, write(repo, "inc.yaml", "include: link.yaml\n"))
    assert "is a symbolic link or lies under one (demo/evals/link.yaml)" in got, got
    assert "commit the file itself in place of the link" in got, got


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_include_that_is_no_regular_file_is_refused_as_such(repo: Path, kind: str) -> None:
    target = repo / DOC / "evals" / "odd.yaml"
    target.mkdir() if kind == "directory" else os.mkfifo(target)  # a FIFO is never opened
    got = refused(repo, write(repo, "inc.yaml", "include: odd.yaml\n"))
    assert "is not a regular file (a directory, FIFO or device) (demo/evals/odd.yaml)" in got


def test_an_include_cycle_is_refused(repo: Path) -> None:
    write(repo, "b.yaml", "include: a.yaml\n")
    got = refused(repo, write(repo, "a.yaml", "include: b.yaml\n"))
    assert "cycle" in got


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ("https://example.com/x.jsonl", "remote"),
        ("../../../outside.jsonl", "outside"),
        ("nope.jsonl", "no such file"),
        ("'*.jsonl'", "pattern character"),  # `datasets` would glob it: unbound files
        ("mc[1].jsonl", "pattern character"),
    ],
)
def test_data_that_is_remote_outside_or_missing_is_refused(
    repo: Path, files: str, words: str
) -> None:
    got = refused(repo, write(repo, "d.yaml", MC_YAML.replace("test: mc.jsonl", f"test: {files}")))
    assert got.startswith("demo/evals/d.yaml: data_files"), got
    assert words in got


def test_an_unknown_task_file_is_one_line_naming_where_it_is_named(repo: Path) -> None:
    got = refused(repo, "evals/nope.yaml")
    assert got.startswith("demo/demo.dlm: eval.tasks 'evals/nope.yaml': no such file"), got


def test_a_task_file_that_does_not_parse_is_one_line_with_its_line(repo: Path) -> None:
    got = refused(repo, write(repo, "bad.yaml", MC_YAML.replace("test_split: test", "test: [")))
    assert got.startswith("demo/evals/bad.yaml:") and "does not parse" in got


def test_a_key_twice_is_refused(repo: Path) -> None:
    got = refused(repo, write(repo, "twice.yaml", MC_YAML + "task: other\n"))
    assert "does not parse" in got


def test_two_tasks_of_one_name_are_refused(repo: Path) -> None:
    write(repo, "again.yaml", MC_YAML)
    with pytest.raises(EvalError) as caught:
        load_tasks(worktree(repo), DOC, ("evals/mc.yaml", "evals/again.yaml"))
    assert "demo_mc" in caught.value.one_line()


def test_params_yaml_names_a_documents_tasks(tmp_path: Path) -> None:
    text = "documents: [a]\ndocs:\n  a:\n    eval:\n      tasks: [evals/gen.yaml]\n"
    (tmp_path / "params.yaml").write_text(text, "utf-8")
    assert read_doc_params(tmp_path, "a").eval_tasks == ("evals/gen.yaml",)
    (tmp_path / "params.yaml").write_text("documents: [a]\ndocs:\n  a: {}\n", "utf-8")
    assert read_doc_params(tmp_path, "a").eval_tasks is None  # the document's own list


@pytest.mark.parametrize(
    "value", ["[]", "{tasks: evals/gen.yaml}", "{tasks: [1]}", "{tasks: ['']}", "{task: []}"]
)
def test_a_malformed_eval_entry_in_params_yaml_is_one_line(tmp_path: Path, value: str) -> None:
    text = f"documents: [a]\ndocs:\n  a:\n    eval: {value}\n"
    (tmp_path / "params.yaml").write_text(text, "utf-8")
    with pytest.raises(DlmGitError) as caught:
        read_doc_params(tmp_path, "a")
    assert caught.value.one_line().startswith("params.yaml: docs.a.eval: ")


def test_the_frontmatter_names_tasks_under_eval(tmp_path: Path) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {DLM_ID}\neval:\n  tasks: [evals/mc.yaml]\n---\n")
    assert doc.frontmatter.eval.tasks == ("evals/mc.yaml",)
    assert parse(tmp_path, HEAD).frontmatter.eval.tasks == ()


@pytest.mark.parametrize(
    ("body", "words"),
    [("  task: [x.yaml]\n", "unknown key 'eval.task'"), ("  tasks: ['']\n", "eval.tasks")],
)
def test_a_malformed_eval_block_names_its_line(tmp_path: Path, body: str, words: str) -> None:
    text = error(tmp_path, f"---\ndlm_id: {DLM_ID}\neval:\n{body}---\n", FrontmatterError, 4)
    assert words in text


def test_a_row_without_the_choices_column_is_refused_at_its_line(repo: Path) -> None:
    rows = (repo / DOC / "evals" / "mc.jsonl").read_text("utf-8")
    (repo / DOC / "evals" / "mc.jsonl").write_text(rows + '{"question": "q"}\n', "utf-8")
    got = refused(repo, "evals/mc.yaml")
    assert got.startswith("demo/evals/mc.jsonl:9: the row has no column 'choices'"), got
    (repo / DOC / "evals" / "mc.jsonl").write_text(rows + "[1, 2]\n", "utf-8")
    assert "demo/evals/mc.jsonl:9: is not a JSON object" in refused(repo, "evals/mc.yaml")
