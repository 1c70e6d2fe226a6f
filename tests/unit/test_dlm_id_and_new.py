"""`docset.dlm_id` (no two `.dlm` files of a tree share a `dlm_id`), `dlm-git new` (a
starter document with a fresh one, never over an existing file), and which
`.pre-commit-config.yaml` makes `dlm-git init` leave the hooks to the framework."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlm_git.cli import main
from dlm_git.contract.dlm_ids import dlm_id_of, id_check, shared_ids
from dlm_git.contract.outcome import Outcome
from dlm_git.doc.starter import starter_text
from dlm_git.doc.ulid import is_ulid
from dlm_git.hooks.install import framework_declares_ours, framework_note, install_hooks

A, B = "01J9ZQ4X7T8V6N2K5M3H1C0D9E", "01J9ZQ4X7T8V6N2K5M3H1C0D9F"


def dlm(dlm_id: str) -> bytes:
    return starter_text("x", dlm_id).encode("utf-8")


# --------------------------------------------------------------------------- docset.dlm_id


def test_shared_ids_names_every_document_of_a_group_and_only_those() -> None:
    shared = shared_ids(
        {
            "a": ("a/a.dlm", dlm(A)),
            "b": ("b/b.dlm", dlm(A.lower())),  # one ULID, either case
            "c": ("c/c.dlm", dlm(B)),
            "d": ("d/d.dlm", b"no frontmatter"),
            "e": ("e/e.dlm", None),
        }
    )
    assert shared == {"a": (A, ["b/b.dlm"]), "b": (A, ["a/a.dlm"])}
    failed = id_check("a", shared, hint=True)
    assert failed.state is Outcome.FAILED
    assert failed.detail.startswith(f"dlm_id {A} is also the dlm_id of b/b.dlm (hint: give")
    assert id_check("c", shared).state is Outcome.OK


def test_an_id_that_is_not_a_ulid_is_compared_as_written() -> None:
    assert dlm_id_of(b"---\ndlm_id: notes-1\n---\n") == "notes-1"
    assert dlm_id_of(b"---\ndlm_id: 7\n---\n") is None
    assert (
        shared_ids(
            {"a": ("a/a.dlm", b"---\ndlm_id: n\n---\n"), "b": ("b/b.dlm", b"---\ndlm_id: N\n---\n")}
        )
        == {}
    )


# --------------------------------------------------------------------------- dlm-git new


def test_new_writes_a_starter_with_a_fresh_id_and_never_overwrites(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "docs/notes.dlm"]) == 0
    text = (tmp_path / "docs" / "notes.dlm").read_text("utf-8")
    ulid = dlm_id_of(text.encode("utf-8"))
    assert ulid is not None and is_ulid(ulid)
    assert capfd.readouterr().out == f"dlm-git new: created docs/notes.dlm (dlm_id {ulid})\n"
    assert text == starter_text("notes", ulid)  # init --doc's text, without its sources

    assert main(["new", "docs/notes.dlm"]) == 1
    err = capfd.readouterr().err
    assert err == "docs/notes.dlm: already exists (hint: choose another name; nothing written)\n"
    assert (tmp_path / "docs" / "notes.dlm").read_text("utf-8") == text
    assert main(["new", "docs/other.dlm"]) == 1  # one document per directory
    assert "docs already holds notes.dlm" in capfd.readouterr().err
    assert main(["new", "docs/notes.txt"]) == 2
    assert "is not a .dlm file name" in capfd.readouterr().err
    assert sorted(os.listdir(tmp_path / "docs")) == ["notes.dlm"]  # no temp file left


def test_new_refuses_a_dangling_symlink_at_the_name(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.dlm").symlink_to(tmp_path / "elsewhere.dlm")
    assert main(["new", "x.dlm"]) == 1
    assert not (tmp_path / "elsewhere.dlm").exists()


def test_two_starters_get_two_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "a/a.dlm"]) == 0 and main(["new", "b/b.dlm"]) == 0
    ids = {dlm_id_of((tmp_path / p).read_bytes()) for p in ("a/a.dlm", "b/b.dlm")}
    assert len(ids) == 2


# --------------------------------------------------------------------------- the framework


FRAMEWORK = """repos:
  - repo: https://example.invalid/dlm-git
    rev: 0123456789abcdef0123456789abcdef01234567
    hooks:
      - id: {id}
"""


@pytest.mark.parametrize(
    ("config", "declares"),
    [
        (FRAMEWORK.format(id="dlm-git"), True),
        (FRAMEWORK.format(id="dlm-git-pre-push"), True),
        (FRAMEWORK.format(id="ruff"), False),
        ("repos: [", False),  # does not parse: the framework says so, we install
        ("- just a list\n", False),
        (None, False),
    ],
)
def test_which_framework_config_runs_our_hooks(
    git_repo: Path, config: str | None, declares: bool
) -> None:
    if config is not None:
        (git_repo / ".pre-commit-config.yaml").write_text(config, "utf-8")
    assert framework_declares_ours(git_repo) is declares
    assert (framework_note(git_repo) is not None) is declares


def test_the_note_says_when_our_shims_are_installed_too(git_repo: Path) -> None:
    (git_repo / ".pre-commit-config.yaml").write_text(FRAMEWORK.format(id="dlm-git"), "utf-8")
    note = framework_note(git_repo)
    assert note is not None and "--uninstall" not in note
    install_hooks(git_repo)
    note = framework_note(git_repo)
    assert note is not None
    assert "dlm-git's own pre-commit, pre-merge-commit, pre-push hook(s) are installed" in note
    assert "`dlm-git hooks install --uninstall`" in note
