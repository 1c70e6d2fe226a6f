"""The `inputs` stage: what each pipeline document reads, written where DVC can compare
it, so that `dvc status` is clean after `dvc repro` (docs/pipeline.md).

Each test is a real git work tree with real `.dlm` documents; the stage is what
`dlm_git.pipeline.inputs.plan` computes and what `dlm-git init` writes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dlm_git.errors import DlmGitError
from dlm_git.pipeline.inputs import listed_documents, plan, run, write_records
from tests.support.docs import WriteDoc

PINNED = "hf:example-org/example-model@" + "ab" * 20


def _doc(
    write_doc: WriteDoc, repo: Path, rel: str, *sources: str, base: str = "builtin:tiny"
) -> None:
    lines = [f"base_model: '{base}'", "training:", "  sources_policy: permissive", "  sources:"]
    lines += [f"    - path: '{s}'" for s in sources]
    frontmatter = "\n".join(lines) if sources else f"base_model: '{base}'"
    write_doc(repo / rel, "# Notes\n\nSome prose.\n", frontmatter=frontmatter)


def _params(repo: Path, *documents: str) -> None:
    (repo / "params.yaml").write_text(yaml.safe_dump({"documents": list(documents)}), "utf-8")


def _dvc_yaml(repo: Path, stage: dict) -> None:
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"inputs": stage}}), "utf-8")


def test_every_input_inside_the_repository_is_a_dep_of_one_stage(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "a" / "notes").mkdir(parents=True)
    (git_repo / "shared").mkdir()
    _doc(write_doc, git_repo, "a", "notes", "../shared")
    _doc(write_doc, git_repo, "b", base=PINNED)  # a pinned Hub base: needs no cache here
    stage = plan(git_repo, ["a", "b"]).stage()
    assert stage == {
        "cmd": "dlm-git inputs",
        "deps": ["a/doc.dlm", "a/notes", "b/doc.dlm", "shared"],
        "params": ["documents", "docs"],
        "outs": [
            {"a/dlm.inputs.json": {"cache": False, "persist": True}},
            {"b/dlm.inputs.json": {"cache": False, "persist": True}},
        ],
    }


def test_an_input_dvc_cannot_watch_makes_the_stage_always_changed_and_says_why(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo.parent / "elsewhere").mkdir()
    _doc(write_doc, git_repo, "a", ".", "../../elsewhere")
    inputs = plan(git_repo, ["a"])
    assert inputs.stage()["always_changed"] is True
    assert inputs.stage()["deps"] == ["a/doc.dlm"]
    assert inputs.untracked == [
        "a: training.sources '.' covers pipeline outputs (a)",
        "a: training.sources '../../elsewhere' is outside the repository",
    ]


def test_the_record_follows_what_the_document_reads_and_nothing_else(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "a" / "notes").mkdir(parents=True)
    (git_repo / "a" / "notes" / "n.md").write_text("one\n", "utf-8")
    (git_repo / "unrelated.txt").write_text("x\n", "utf-8")
    _doc(write_doc, git_repo, "a", "notes")
    first = plan(git_repo, ["a"]).docs[0].record

    (git_repo / "unrelated.txt").write_text("y\n", "utf-8")
    assert plan(git_repo, ["a"]).docs[0].record == first
    (git_repo / "a" / "notes" / "n.md").write_bytes(b"one\r\n")  # a CRLF checkout: same text
    assert plan(git_repo, ["a"]).docs[0].record == first
    (git_repo / "a" / "notes" / "n.md").write_text("two\n", "utf-8")
    assert plan(git_repo, ["a"]).docs[0].record != first


def test_the_command_refuses_a_stage_that_misses_a_new_source_root(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "a" / "notes").mkdir(parents=True)
    (git_repo / "a" / "more").mkdir(parents=True)
    _doc(write_doc, git_repo, "a", "notes")
    _params(git_repo, "a")
    _dvc_yaml(git_repo, plan(git_repo, ["a"]).stage())
    run(git_repo)
    assert (git_repo / "a" / "dlm.inputs.json").is_file()

    _doc(write_doc, git_repo, "a", "notes", "more")  # a directive added to the .dlm
    (git_repo / "a" / "dlm.inputs.json").unlink()
    with pytest.raises(DlmGitError) as err:
        run(git_repo)
    assert err.value.one_line() == (
        "dvc.yaml: stage 'inputs' is not what the documents read now (not a dep: a/more)"
        " (hint: run `dlm-git init` to write the stage again)"
    )
    assert not (git_repo / "a" / "dlm.inputs.json").exists()  # nothing written


def test_records_are_rewritten_only_when_they_change(git_repo: Path, write_doc: WriteDoc) -> None:
    _doc(write_doc, git_repo, "a")
    inputs = plan(git_repo, ["a"])
    assert write_records(git_repo, inputs) == ["a"]
    assert write_records(git_repo, inputs) == []


def test_a_documents_list_that_is_not_a_list_of_directories_is_one_line(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents: {a: 1}\n", "utf-8")
    with pytest.raises(DlmGitError, match=r"'documents' is not a list of directories"):
        listed_documents(git_repo)


@pytest.mark.parametrize("rel", ["../outside", "/tmp/x", "a/../../b", "a/.git"])
def test_a_listed_document_outside_the_work_tree_is_refused_before_anything_is_written(
    git_repo: Path, rel: str
) -> None:
    _params(git_repo, rel)
    with pytest.raises(DlmGitError, match=r"^params.yaml: documents: '") as err:
        listed_documents(git_repo)
    assert "relative to the repository root" in err.value.one_line()


def test_a_document_directory_reached_through_a_link_is_refused(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path
) -> None:
    _doc(write_doc, tmp_path, "elsewhere")
    (git_repo / "a").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DlmGitError, match=r"^a: is reached through a symbolic link"):
        plan(git_repo, ["a"])
    assert not (tmp_path / "elsewhere" / "dlm.inputs.json").exists()


def test_a_document_at_the_repository_root_lists_its_inputs_as_repository_paths(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "notes").mkdir()
    (git_repo / "adapter").mkdir()
    _doc(write_doc, git_repo, ".", "notes", "adapter")
    inputs = plan(git_repo, ["."])
    assert inputs.stage()["deps"] == ["doc.dlm", "notes"]
    assert inputs.stage()["outs"] == [{"dlm.inputs.json": {"cache": False, "persist": True}}]
    assert inputs.untracked == [".: training.sources 'adapter' covers pipeline outputs (adapter)"]


def test_the_command_names_an_input_dvc_cannot_watch_when_the_stage_does_not_say_so(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "a" / "notes").mkdir(parents=True)
    (git_repo.parent / "elsewhere").mkdir()
    _doc(write_doc, git_repo, "a", "notes")
    _params(git_repo, "a")
    _dvc_yaml(git_repo, plan(git_repo, ["a"]).stage())
    _doc(write_doc, git_repo, "a", "notes", "../../elsewhere")
    with pytest.raises(DlmGitError) as err:
        run(git_repo)
    assert (
        "(DVC cannot watch a: training.sources '../../elsewhere' is outside the repository)"
    ) in err.value.one_line()


def test_a_local_base_is_a_dep_before_it_is_built(git_repo: Path, write_doc: WriteDoc) -> None:
    _doc(write_doc, git_repo, "a", base="../bases/x")  # `init` may run before the build
    assert plan(git_repo, ["a"], records=False).stage()["deps"] == ["a/doc.dlm", "bases/x"]
    _doc(write_doc, git_repo, "b", base="/elsewhere/base")
    inputs = plan(git_repo, ["b"], records=False)
    assert inputs.untracked == ["b: base_model '/elsewhere/base' is outside the repository"]


def test_a_source_root_holding_a_name_dvc_cannot_hash_is_not_watched(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    notes = git_repo / "a" / "notes"
    notes.mkdir(parents=True)
    (notes / "ok.md").write_text("fine\n", "utf-8")
    with open(bytes(notes) + b"/caf\xe9.md", "wb") as fh:
        fh.write(b"# a name that is not UTF-8\n")
    _doc(write_doc, git_repo, "a", "notes")
    inputs = plan(git_repo, ["a"], records=False)
    assert inputs.stage()["deps"] == ["a/doc.dlm"]
    assert inputs.untracked == [
        "a: training.sources 'notes' holds a name that is not UTF-8 (notes/caf\\xe9.md)"
    ]


def test_the_task_files_a_document_names_are_deps_and_recorded(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    from tests.support.evaltasks import name_tasks, write_tasks

    (git_repo / "a" / "notes").mkdir(parents=True)
    _doc(write_doc, git_repo, "a", "notes")
    without = plan(git_repo, ["a"]).docs[0].record
    name_tasks(git_repo / "a" / "doc.dlm", write_tasks(git_repo / "a"))
    inputs = plan(git_repo, ["a"])
    assert inputs.stage()["deps"] == [
        "a/doc.dlm",
        "a/evals/gen.jsonl",
        "a/evals/gen.yaml",
        "a/evals/mc.jsonl",
        "a/evals/mc.yaml",
        "a/notes",
    ]
    record = json.loads(inputs.docs[0].record)
    assert sorted(record["tasks"]) == ["demo_gen", "demo_mc"]
    assert list(record["tasks"]["demo_mc"]["data"]) == ["a/evals/mc.jsonl"]
    assert "tasks" not in json.loads(without)  # a document without tasks: as before
    (git_repo / "a" / "evals" / "mc.jsonl").write_text('{"question": "q"}\n', "utf-8")
    with pytest.raises(DlmGitError):  # swapped data the trust rule refuses: one line
        plan(git_repo, ["a"])


def test_what_dvc_would_read_otherwise_is_not_watched_and_said(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    (git_repo / "a" / "notes${x}").mkdir(parents=True)  # DVC interpolates `${x}` in dvc.yaml
    _doc(write_doc, git_repo, "a", "notes${x}")
    inputs = plan(git_repo, ["a"])
    assert inputs.stage()["deps"] == ["a/doc.dlm"]
    assert inputs.untracked == ["a: 'a/notes${x}' holds '${', which DVC interpolates"]
    (git_repo / ".dvcignore").write_text("# comments only, as dvc init writes\n", "utf-8")
    assert "always_changed" not in plan(git_repo, []).stage()
    (git_repo / ".dvcignore").write_text("*.md\n", "utf-8")  # a rule: DVC hides inputs
    (git_repo / "b" / "notes").mkdir(parents=True)
    _doc(write_doc, git_repo, "b", "notes")
    assert plan(git_repo, ["b"]).untracked == [
        "b: .dvcignore has rules: DVC may not see every input"
    ]


def _dvc(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=repo, capture_output=True, text=True
    )


def _watch(repo: Path, dep: str) -> subprocess.CompletedProcess[str]:
    """`dvc repro` of a stage that depends on `dep` alone: what DVC sees of it is recorded."""
    (repo / "dvc.yaml").write_text(
        yaml.safe_dump({"stages": {"watch": {"cmd": "true", "deps": [dep]}}}), "utf-8"
    )
    return _dvc(repo, "repro")


def _ignoring_repo(repo: Path, write_doc: WriteDoc) -> Path:
    """Document `a` reading `a/notes` (`seen.md`, `sub/hidden.md`) in a DVC repository,
    with a `.dvcignore` rule DVC never reads for it; the hidden file."""
    notes = repo / "a" / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "sub" / "hidden.md").write_text("one\n", "utf-8")
    (notes / "seen.md").write_text("two\n", "utf-8")
    _doc(write_doc, repo, "a", "notes")
    assert _dvc(repo, "init", "-q").returncode == 0
    (repo / "unrelated").mkdir()
    (repo / "unrelated" / ".dvcignore").write_text("*.md\n", "utf-8")
    assert plan(repo, ["a"]).untracked == []
    return notes / "sub" / "hidden.md"


@pytest.mark.parametrize("where", ["a", "."])
def test_a_dvcignore_above_an_input_directory_is_said(
    git_repo: Path, write_doc: WriteDoc, where: str
) -> None:
    hidden = _ignoring_repo(git_repo, write_doc)
    rules = git_repo / where / ".dvcignore"
    rules.write_text("hidden.md\n", "utf-8")
    # DVC reads it: an edit of the hidden input leaves `dvc status` clean
    assert _watch(git_repo, "a/notes").returncode == 0
    hidden.write_text("one, edited\n", "utf-8")
    assert "up to date" in _dvc(git_repo, "status").stdout
    (git_repo / "a" / "notes" / "seen.md").write_text("two, edited\n", "utf-8")
    assert "modified:" in _dvc(git_repo, "status").stdout  # the stage does watch a/notes

    name = ".dvcignore" if where == "." else f"{where}/.dvcignore"
    inputs = plan(git_repo, ["a"])
    assert inputs.stage()["always_changed"] is True
    assert "a/notes" in inputs.stage()["deps"]
    assert inputs.untracked == [f"a: {name} has rules: DVC may not see every input"]
    rules.unlink()
    rules.symlink_to(git_repo / "unrelated" / ".dvcignore")  # DVC reads what it points to
    assert plan(git_repo, ["a"]).untracked == [
        f"a: {name} is a symbolic link: DVC may not see every input"
    ]


def test_an_input_directory_holding_a_dvcignore_is_not_a_dep_and_is_said(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    _ignoring_repo(git_repo, write_doc)
    (git_repo / "a" / "notes" / "sub" / ".dvcignore").write_text("# comments only\n", "utf-8")
    refused = _watch(git_repo, "a/notes")  # DVC will not hash such a directory at all
    assert refused.returncode != 0
    assert ".dvcignore file should not be in collected dir path" in refused.stdout + refused.stderr

    inputs = plan(git_repo, ["a"])
    assert inputs.stage()["always_changed"] is True
    assert inputs.stage()["deps"] == ["a/doc.dlm"]
    assert inputs.untracked == [
        "a: 'a/notes' holds a/notes/sub/.dvcignore, which DVC refuses in a directory it hashes"
    ]


@pytest.mark.parametrize(
    ("listed", "problem"),
    [(["a", "a"], "listed twice"), (["a/doc.dlm"], "is not a directory"), (["a${x}"], "'${'")],
)
def test_a_documents_list_dvc_cannot_use_as_written_is_refused(
    git_repo: Path, write_doc: WriteDoc, listed: list[str], problem: str
) -> None:
    _doc(write_doc, git_repo, "a")
    _params(git_repo, *listed)
    with pytest.raises(DlmGitError, match=re.escape(problem)):
        plan(git_repo, listed_documents(git_repo))
