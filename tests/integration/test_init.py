"""`dlm-git init`: idempotent, merges into the user's own DVC files, refuses bad input.

The end-to-end "init then `dvc repro`" path is in test_pipeline.py; these tests only set
repositories up (in-process, through `run_cli`), so they are fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dlm_git.pipeline.templates import DEFAULT_PIPELINE_PARAMS, STAGES
from tests.support.cli import RunCli


def inputs_stage(doc: str) -> dict:
    """The `inputs` stage for the starter document `doc` (it reads `<doc>/notes`)."""
    return {
        "cmd": "dlm-git inputs",
        "deps": [f"{doc}/notes", f"{doc}/{doc}.dlm"],  # sorted
        "params": ["documents", "docs"],
        "outs": [{f"{doc}/dlm.inputs.json": {"cache": False, "persist": True}}],
    }


# `run_cli` and `git_repo` come from the conftest files.
DOC = "notes-doc"

USER_DVC_YAML = """\
# my own pipeline: keep this comment
stages:
  prepare:  # the user's stage
    cmd: python prep.py --ratio ${prep.ratio}
    deps:
      - raw.csv
    params:
      - prep.ratio
    outs:
      - clean.csv
"""

USER_PARAMS = """\
# user params: keep this comment
prep:
  ratio: 0.5  # keep half
"""

USER_GITIGNORE = "*.pyc\n/build\n"


def files_of(repo: Path, *names: str) -> dict[str, bytes | None]:
    """Bytes of each named file (None when absent)."""
    return {n: (repo / n).read_bytes() if (repo / n).is_file() else None for n in names}


TRACKED = (
    "dvc.yaml",
    "params.yaml",
    ".gitignore",
    ".dvc/config",
    f"{DOC}/{DOC}.dlm",
    f"{DOC}/notes/README.md",
    ".git/hooks/pre-commit",
    ".git/hooks/pre-merge-commit",
    ".git/hooks/pre-push",
)


def test_init_scaffolds_and_second_run_changes_nothing(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    code, out, err = run_cli("init", "--doc", DOC)
    assert code == 0, err
    assert "added stages base, tokenize, train, eval, verify" in out
    assert f"{DOC}/{DOC}.dlm: created" in out

    stages = yaml.safe_load((git_repo / "dvc.yaml").read_text("utf-8"))["stages"]
    assert stages == {"inputs": inputs_stage(DOC), **STAGES}
    assert list(stages)[0] == "inputs"
    params = yaml.safe_load((git_repo / "params.yaml").read_text("utf-8"))
    assert params == {
        "documents": [DOC],
        "pipeline": DEFAULT_PIPELINE_PARAMS,
        "docs": {DOC: {"training": {}}},  # train@<doc> depends on docs.<doc>
    }
    ignored = (git_repo / ".gitignore").read_text("utf-8").splitlines()
    assert ".dlm-git/" in ignored and "run.json" in ignored
    assert (git_repo / ".dvc").is_dir()
    for hook in ("pre-commit", "pre-merge-commit", "pre-push"):
        path = git_repo / ".git" / "hooks" / hook
        assert "dlm-git hook" in path.read_text("utf-8")
        assert os.access(path, os.X_OK)
    # The scaffolded document parses (and is what test_pipeline.py trains).
    code, out, err = run_cli("show", str(git_repo / DOC))
    assert code == 0, err

    before = files_of(git_repo, *TRACKED)
    assert all(v is not None for v in before.values()), before.keys()
    # Again, from the root and then from a subdirectory: nothing to do, no byte changes.
    for cwd in (git_repo, git_repo / DOC / "notes"):
        monkeypatch.chdir(cwd)
        code, out, err = run_cli("init", "--doc", DOC)
        assert code == 0, err
        assert "nothing to do" in out
        assert err == ""
        assert files_of(git_repo, *TRACKED) == before
    # Without --doc too (the document is already listed).
    code, out, _ = run_cli("init")
    assert code == 0 and "nothing to do" in out
    assert files_of(git_repo, *TRACKED) == before


def test_no_hooks_installs_no_hook(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    code, out, err = run_cli("init", "--doc", DOC, "--no-hooks")
    assert code == 0, err
    hooks = git_repo / ".git" / "hooks"
    assert not (hooks / "pre-commit").exists()
    assert not (hooks / "pre-merge-commit").exists()
    assert not (hooks / "pre-push").exists()
    assert "pre-commit" not in out
    assert (git_repo / "dvc.yaml").is_file()


@pytest.mark.slow  # runs `dvc stage list` on the merged dvc.yaml
def test_init_merges_into_existing_dvc_files(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    (git_repo / "dvc.yaml").write_text(USER_DVC_YAML, "utf-8")
    (git_repo / "params.yaml").write_text(USER_PARAMS, "utf-8")
    (git_repo / ".gitignore").write_text(USER_GITIGNORE, "utf-8")
    monkeypatch.chdir(git_repo)
    code, out, err = run_cli("init", "--doc", DOC, "--no-hooks")
    assert code == 0, err

    dvc_text = (git_repo / "dvc.yaml").read_text("utf-8")
    assert "# my own pipeline: keep this comment" in dvc_text
    assert "# the user's stage" in dvc_text
    stages = yaml.safe_load(dvc_text)["stages"]
    assert stages["prepare"] == yaml.safe_load(USER_DVC_YAML)["stages"]["prepare"]
    assert list(stages) == ["inputs", "prepare", *STAGES]
    assert {k: stages[k] for k in STAGES} == STAGES

    params_text = (git_repo / "params.yaml").read_text("utf-8")
    assert "# user params: keep this comment" in params_text
    assert "# keep half" in params_text
    params = yaml.safe_load(params_text)
    assert params["prep"] == {"ratio": 0.5}
    assert params["documents"] == [DOC]
    assert params["pipeline"] == DEFAULT_PIPELINE_PARAMS

    gitignore = (git_repo / ".gitignore").read_text("utf-8")
    assert gitignore.startswith(USER_GITIGNORE)
    assert ".dlm-git/" in gitignore.splitlines()

    # DVC itself accepts the merged file: the user's stage and every expanded stage of ours.
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", "stage", "list", "--name-only"],
        cwd=git_repo,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "inputs",
        "prepare",
        f"base@{DOC}",
        f"tokenize@{DOC}",
        f"train@{DOC}",
        f"eval@{DOC}",
        f"verify@{DOC}",
    ]

    # Merged files are stable under a second run, and a second document is one more line.
    before = files_of(git_repo, "dvc.yaml", "params.yaml", ".gitignore")
    code, out, _ = run_cli("init", "--doc", DOC, "--no-hooks")
    assert code == 0 and "nothing to do" in out
    assert files_of(git_repo, "dvc.yaml", "params.yaml", ".gitignore") == before
    code, out, err = run_cli("init", "--doc", "second", "--no-hooks")
    assert code == 0, err
    params = yaml.safe_load((git_repo / "params.yaml").read_text("utf-8"))
    assert params["documents"] == [DOC, "second"]
    assert params["docs"] == {DOC: {"training": {}}, "second": {"training": {}}}
    # the second document's inputs join the one `inputs` stage; nothing else changes
    now = yaml.safe_load((git_repo / "dvc.yaml").read_text("utf-8"))["stages"]
    was = yaml.safe_load(before["dvc.yaml"])["stages"]
    assert {k: v for k, v in now.items() if k != "inputs"} == {
        k: v for k, v in was.items() if k != "inputs"
    }
    assert now["inputs"]["deps"] == sorted(
        inputs_stage(DOC)["deps"] + inputs_stage("second")["deps"]
    )
    assert "# my own pipeline: keep this comment" in (git_repo / "dvc.yaml").read_text("utf-8")
    assert "# keep half" in (git_repo / "params.yaml").read_text("utf-8")


def test_user_modified_stage_is_left_as_is_with_a_warning(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    assert run_cli("init", "--doc", DOC, "--no-hooks")[0] == 0
    dvc_yaml = git_repo / "dvc.yaml"
    text = dvc_yaml.read_text("utf-8")
    assert text.count(" --quiet") == 1
    dvc_yaml.write_text(text.replace(" --quiet", " --quiet --no-cache"), "utf-8")
    modified = dvc_yaml.read_bytes()

    code, out, err = run_cli("init", "--doc", DOC, "--no-hooks")
    assert code == 0, err
    assert "warning" in err and "'train'" in err and "left as is" in err
    assert "'tokenize'" not in err and "'verify'" not in err
    assert dvc_yaml.read_bytes() == modified


def test_init_outside_a_git_repo_fails_with_one_line(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(plain)
    code, out, err = run_cli("init", "--doc", DOC)
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "not inside a git work tree" in lines[0], err
    assert "Traceback" not in err
    assert list(plain.iterdir()) == []


@pytest.mark.parametrize("name", ["bad/name", "../escape", ".hidden", "with space", "-dash"])
def test_invalid_doc_name_is_refused(
    name: str, git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    code, out, err = run_cli("init", f"--doc={name}")
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "not a valid document name" in lines[0], err
    # Refused before anything was written.
    assert sorted(p.name for p in git_repo.iterdir()) == [".git"]


def test_init_replaces_an_earlier_releases_stage_and_keeps_a_users(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dlm_git.pipeline.templates import SUPERSEDED

    monkeypatch.chdir(git_repo)
    assert run_cli("init", "--doc", DOC, "--no-hooks")[0] == 0
    path = git_repo / "dvc.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    data["stages"]["base"] = SUPERSEDED["base"][0]  # as an earlier `init` wrote it
    data["stages"]["tokenize"] = {**SUPERSEDED["tokenize"][0], "frozen": True}  # the user's
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")

    code, out, err = run_cli("init", "--no-hooks")
    assert code == 0, err
    assert "dvc.yaml: updated stages base (not always_changed)" in out
    assert "stage 'tokenize' differs from dlm-git's; left as is" in err
    stages = yaml.safe_load(path.read_text("utf-8"))["stages"]
    assert stages["base"] == STAGES["base"]
    assert stages["tokenize"]["frozen"] is True


def test_a_document_name_with_a_dot_is_set_up_and_the_dvc_key_limit_is_said(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(git_repo)
    code, out, err = run_cli("init", "--doc", "notes.v2", "--no-hooks")
    assert code == 0, err
    assert (
        "dlm-git init: 'notes.v2' holds a '.': `dvc exp run -S docs.notes.v2.…` cannot"
        " address it (DVC splits keys at dots); edit params.yaml instead, or rename the"
        " directory"
    ) in out
    assert (git_repo / "notes.v2" / "notes.v2.dlm").is_file()
