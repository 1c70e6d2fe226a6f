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
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.cli import COMMANDS
from tests.support.cli import imports_of


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_nothing_heavy_and_no_other_command(name: str, tmp_path: Path) -> None:
    run = imports_of(tmp_path, name, "--help")
    assert run.code == 0, run.stdout
    assert run.heavy == [], f"dlm-git {name} imports {run.heavy} before it runs"
    own = COMMANDS[name][0]
    others = sorted(({module for module, _ in COMMANDS.values()} - {own}) & run.modules)
    assert others == [], f"dlm-git {name} imports other commands' modules: {others}"
