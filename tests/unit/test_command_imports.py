"""A command's start pays only for what the command needs (issue 28).

For every command of the CLI's own table (`dlm_git.cli.COMMANDS`, so a new command is
covered when it is added there), a fresh interpreter runs `dlm-git <command> --help`
through `dlm_git.cli.main`, which imports the command's module and builds its parser
as every run of it does. Then:
- no heavy library has come along (the training stack, the evaluation stack, DVC):
  commands import them inside their bodies, where they are needed;
- no other command's module has been imported: `main` builds only the command asked for.
A command's body, run on real records, is held to the same list where its tests build
them (`log`: tests/integration/test_log.py, test_history_scores.py), through the same
helper (`tests.support.cli.imports_of`, `HEAVY`).

No command's parse path imports typer or pydantic (the parser is plain click,
`dlm_git.clidecl`): not its `--help`, and not `log --json`, `diff` or `verify` (hash level)
run on a committed repository up to where they read documents. pydantic loads where a
command builds a document's model (`show`, `verify` and `diff` on a commit with
documents: `dlm_git.doc.parser`), never to read the command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.cli import COMMANDS
from tests.support.cli import imports_of
from tests.support.gitrepo import commit_all, init_repo

FRAMEWORKS = ("typer", "pydantic")
"""What reading the command line once cost, before the CLI moved to plain click."""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_nothing_heavy_and_no_other_command(name: str, tmp_path: Path) -> None:
    run = imports_of(tmp_path, name, "--help")
    assert run.code == 0, run.stdout
    assert run.heavy == [], f"dlm-git {name} imports {run.heavy} before it runs"
    own = COMMANDS[name][0]
    others = sorted(({module for module, _ in COMMANDS.values()} - {own}) & run.modules)
    assert others == [], f"dlm-git {name} imports other commands' modules: {others}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_reads_its_command_line_with_typer_or_pydantic(
    name: str, tmp_path: Path
) -> None:
    run = imports_of(tmp_path, name, "--help")
    assert run.code == 0, run.stdout
    assert sorted(set(FRAMEWORKS) & run.modules) == [], f"dlm-git {name} --help"


@pytest.mark.parametrize(
    "args", [["log", "--json"], ["diff", "HEAD", "HEAD"], ["verify", "HEAD", "--level", "hash"]]
)
def test_the_commands_people_wait_for_start_without_typer_or_pydantic(
    args: list[str], tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    commit_all(repo, "a commit without documents")
    run = imports_of(repo, *args)
    assert run.code in (0, 1), run.stdout  # verify: no documents to verify is a failure
    assert sorted(set(FRAMEWORKS) & run.modules) == [], f"dlm-git {' '.join(args)}"
