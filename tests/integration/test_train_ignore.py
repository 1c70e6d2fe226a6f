"""A training's outputs are ignored by git from the moment they are written.

`dlm-git train` on a new document, in a plain git repository and in a DVC project that
`dlm-git init` never touched: `git add -A` then stages the records and the document
directory's `.gitignore`, never `adapter/` (a weight file), `segments/`, `tokens/` or
`run.json`. The lines are DVC's own form, so a later `dvc repro` of the document adds
none of its own; outputs git already ignores get no line.

The trainings by hand and the replay are the CLI in this process (tests/support/verdicts.py:
no fresh interpreter importing torch for each); a refusal, whose exit and one stderr line
are what a user sees, and the hash-level verdict line are the real executable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.demo import write_fast_demo
from tests.support.env import run
from tests.support.gitrepo import git, init_repo
from tests.support.verdicts import main_captured
from tests.support.verified import copy_repo

pytestmark = pytest.mark.slow

DOC = "demo"
LINES = ["/adapter", "/segments", "/tokens", "/run.json", "/.adapter.*", "/.segments.*"]
NEVER_STAGED = ("adapter/", "segments/", "tokens/", "run.json", ".safetensors")


def staged_after_add_all(repo: Path) -> list[str]:
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--name-only").split()


def outputs_in(paths: list[str]) -> list[str]:
    return [p for p in paths if any(bit in p for bit in NEVER_STAGED)]


def train(repo: Path, *flags: str) -> str:
    """`dlm-git train demo` by hand in `repo` (in this process), which must succeed; its
    stderr."""
    result = main_captured(repo, ["train", DOC, "-q", "--device", "cpu", *flags])
    assert result.code == 0, result.stdout + result.stderr
    return result.stderr


@pytest.fixture
def plain_repo(tmp_path: Path, base_cache: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    write_fast_demo(repo / DOC)
    return repo


@pytest.fixture(scope="module")
def trained_once_by_hand(
    tmp_path_factory: pytest.TempPathFactory, base_cache: Path
) -> tuple[Path, str]:
    """`plain_repo` after its first `dlm-git train demo` by hand, and that training's
    stderr: trained once for this module. Never modified: `trained_by_hand` copies it."""
    repo = init_repo(tmp_path_factory.mktemp("trained-by-hand") / "repo")
    write_fast_demo(repo / DOC)
    return repo, train(repo)


@pytest.fixture
def trained_by_hand(tmp_path: Path, trained_once_by_hand: tuple[Path, str]) -> tuple[Path, str]:
    """A private copy of `trained_once_by_hand` (work tree and `.git`), and its stderr."""
    repo, err = trained_once_by_hand
    return copy_repo(repo, tmp_path / "repo"), err


def test_outputs_are_never_staged_outside_a_dvc_project(
    trained_by_hand: tuple[Path, str],
) -> None:
    plain_repo, err = trained_by_hand
    assert (plain_repo / DOC / "adapter" / "adapter_model.safetensors").is_file()
    assert f"{DOC}/.gitignore: added {', '.join(LINES)}" in err
    assert (plain_repo / DOC / ".gitignore").read_text().splitlines() == LINES
    staged = staged_after_add_all(plain_repo)
    assert outputs_in(staged) == [], staged
    assert {f"{DOC}/.gitignore", f"{DOC}/dlm.lock", f"{DOC}/manifest.json"} <= set(staged)


def test_a_second_training_adds_nothing(trained_by_hand: tuple[Path, str]) -> None:
    plain_repo, _ = trained_by_hand
    before = (plain_repo / DOC / ".gitignore").read_bytes()
    err = train(plain_repo, "--max-steps", "1")
    assert "added" not in err
    assert (plain_repo / DOC / ".gitignore").read_bytes() == before


def test_outputs_are_never_staged_in_a_dvc_project(plain_repo: Path) -> None:
    run(["dvc", "init", "-q"], plain_repo)
    train(plain_repo)
    staged = staged_after_add_all(plain_repo)
    assert outputs_in(staged) == [], staged


def test_outputs_git_already_ignores_get_no_line(plain_repo: Path) -> None:
    (plain_repo / ".gitignore").write_text(
        "adapter/\nsegments/\ntokens/\nrun.json\n.adapter.*\n.segments.*\n"
    )
    (plain_repo / DOC / ".gitignore").write_text("# mine\n/tokens")  # no final newline
    err = train(plain_repo)
    assert "added" not in err
    assert (plain_repo / DOC / ".gitignore").read_text() == "# mine\n/tokens"
    assert outputs_in(staged_after_add_all(plain_repo)) == []


def test_an_existing_gitignore_keeps_its_lines(plain_repo: Path) -> None:
    (plain_repo / DOC / ".gitignore").write_text("# mine\n/adapter")  # no final newline
    train(plain_repo)
    lines = (plain_repo / DOC / ".gitignore").read_text().splitlines()
    assert lines == ["# mine", "/adapter", *LINES[1:]]


def test_dvc_repro_after_a_training_by_hand_writes_no_rule_of_its_own(
    tmp_path: Path, base_cache: Path
) -> None:
    """`dlm-git init` (a pipeline, no ignore lines for the outs), a training by hand, then
    `dvc repro`: DVC finds each of its outs ignored already, so the document's .gitignore
    holds each line once, and nothing it wrote is staged."""
    repo = init_repo(tmp_path / "repo")
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    doc = repo / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text().replace("max_steps: 20", "max_steps: 2"))
    assert "added /adapter, /segments, /tokens" in train(repo)
    run(["dvc", "repro", "-q"], repo)
    lines = (repo / DOC / ".gitignore").read_text().splitlines()
    assert sorted(lines) == sorted(set(lines)), lines
    assert {"/adapter", "/segments", "/tokens"} <= set(lines)
    assert outputs_in(staged_after_add_all(repo)) == []


def test_a_gitignore_that_is_a_link_is_refused_never_followed(
    plain_repo: Path, tmp_path: Path
) -> None:
    """A cloned `.gitignore -> <file outside>` must not be read and copied into the work
    tree (where `git add -A` would stage it): one line, exit 1, nothing written."""
    secret = tmp_path / "secret"
    secret.write_text("SECRET=hunter2\n")
    link = plain_repo / DOC / ".gitignore"
    link.symlink_to(secret)
    proc = run(["dlm-git", "train", DOC, "-q", "--device", "cpu"], plain_repo, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ".gitignore" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert link.is_symlink() and secret.read_text() == "SECRET=hunter2\n"
    assert not (plain_repo / DOC / "adapter").exists()
    assert not (plain_repo / DOC / "dlm.lock").exists()


def test_a_document_trained_outside_dvc_verifies_as_cannot_verify_never_failed(
    trained_by_hand: tuple[Path, str],
) -> None:
    """No dvc.lock binds the adapter's bytes: nothing compared failed, so the verdict says
    what is missing (a forged commit that drops dvc.lock gains nothing: it never passes)."""
    plain_repo, _ = trained_by_hand
    git(plain_repo, "add", "-A")
    git(plain_repo, "commit", "-q", "-m", "trained by hand")
    cmd = ["dlm-git", "verify", "HEAD", "--doc", DOC, "--level", "hash"]
    proc = run(cmd, plain_repo, check=False)
    replay = main_captured(plain_repo, ["verify", "HEAD", "--doc", DOC, "--level", "replay"])
    # a replay has the adapter's bytes: dvc.binding runs
    for out, err in ((proc.stdout, proc.stderr), (replay.stdout, replay.stderr)):
        verdict = out.strip().splitlines()[-1].split()
        assert verdict[1:] == ["verdict", "CANNOT_VERIFY"], out + err
        assert "FAILED" not in out, out
