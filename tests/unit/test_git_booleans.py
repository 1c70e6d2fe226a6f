"""dlm-git's git booleans (`dlm-git.strict`, `dlm-git.requireSignature`) mean what they mean
to git (`git config --type=bool`): every spelling git takes, a key with no value, any
case; a value git refuses is one line naming the key and the fix, never a silent false.
Real repositories, real `git config`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.errors import DlmGitError
from dlm_git.hooks.findings import require_signature, strict_mode
from tests.support.env import run
from tests.support.gitrepo import git

NO_VALUE = None
"""`[dlm-git] strict` with no `=`: true to git."""

FORMS = [
    ("true", True),
    ("TRUE", True),
    ("yes", True),
    ("On", True),
    ("1", True),
    ("2", True),
    ("-1", True),
    (NO_VALUE, True),
    ("false", False),
    ("No", False),
    ("off", False),
    ("0", False),
    ("", False),
]


def set_key(repo: Path, key: str, value: str | None) -> None:
    """`key` in the repository's own config: `git config`, or by hand for a key with no
    value (which `git config` cannot write)."""
    if value is not None:
        git(repo, "config", key, value)
        return
    section, name = key.rsplit(".", 1)
    with (repo / ".git" / "config").open("a", encoding="utf-8") as fh:
        fh.write(f"[{section}]\n\t{name}\n")


@pytest.mark.parametrize(("value", "expected"), FORMS, ids=lambda v: repr(v))
def test_config_bool_reads_every_form_as_git_does(
    git_repo: Path, value: str | None, expected: bool
) -> None:
    set_key(git_repo, "dlm-git.strict", value)
    assert gitio.config_bool("dlm-git.strict", git_repo) is expected


def test_an_unset_boolean_is_none(git_repo: Path) -> None:
    assert gitio.config_bool("dlm-git.strict", git_repo) is None
    assert not strict_mode(git_repo) and not require_signature(git_repo)


@pytest.mark.parametrize(("value", "expected"), FORMS, ids=lambda v: repr(v))
def test_strict_mode_and_require_signature_follow_git(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    monkeypatch.delenv("DLM_GIT_STRICT", raising=False)
    set_key(git_repo, "dlm-git.strict", value)
    set_key(git_repo, "dlm-git.requireSignature", value)
    assert strict_mode(git_repo) is expected
    assert require_signature(git_repo) is expected


@pytest.mark.parametrize("key", ["dlm-git.strict", "dlm-git.requireSignature"])
def test_a_value_git_refuses_is_one_line_naming_the_key(git_repo: Path, key: str) -> None:
    git(git_repo, "config", key, "maybe")
    reader = strict_mode if key == "dlm-git.strict" else require_signature
    with pytest.raises(DlmGitError) as info:
        reader(git_repo)
    line = info.value.one_line()
    assert line == (
        f"git config {key}: 'maybe' is not a boolean"
        f" (hint: set it to true or false: git config {key} true)"
    )
    assert info.value.exit_code == 1


def test_the_environment_flag_still_wins(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(git_repo, "config", "dlm-git.strict", "false")
    monkeypatch.setenv("DLM_GIT_STRICT", "1")
    assert strict_mode(git_repo)


def test_the_pre_push_hook_refuses_a_bad_boolean_in_one_line(git_repo: Path) -> None:
    """Through the hook: a `dlm-git.strict` git cannot read stops the push with one line
    naming the key, instead of silently running without strict mode."""
    (git_repo / "f").write_text("f\n")
    git(git_repo, "add", "f")
    git(git_repo, "commit", "-qm", "f")
    sha = git(git_repo, "rev-parse", "HEAD").strip()
    git(git_repo, "config", "dlm-git.strict", "sometimes")
    line = f"refs/heads/master {sha} refs/heads/master {'0' * 40}\n"
    proc = run(
        ["python", "-m", "dlm_git.hooks.pre_push", "origin", "x"],
        git_repo,
        check=False,
        input=line,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "dlm-git: ERROR git config dlm-git.strict: 'sometimes' is not a boolean"
        " (hint: set it to true or false: git config dlm-git.strict true)"
    ]
