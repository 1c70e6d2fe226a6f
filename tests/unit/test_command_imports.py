"""A command's start pays only for what the command needs (issue 28).

For every command of the CLI's own table (`dlm_git.cli.COMMANDS`, so a new command is
covered when it is added there), a fresh interpreter runs `dlm-git <command> --help`
through `dlm_git.cli.main`, which imports the command's module and builds its parser
as every run of it does. Then:
- no heavy library has come along (the training stack, the evaluation stack, DVC):
  commands import them inside their bodies, where they are needed;
- no other command's module has been imported: `main` builds only the command asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dlm_git.cli import COMMANDS
from tests.support.env import subprocess_env

HEAVY = (
    "torch",
    "transformers",
    "peft",
    "dvc",
    "numpy",
    "safetensors",
    "tokenizers",
    "lm_eval",
    "datasets",
    "jinja2",
)

SCRIPT = """
import contextlib, io, json, sys
from dlm_git.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main([sys.argv[1], "--help"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def modules_after_help(name: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, name],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["code"] == 0
    modules: list[str] = found["modules"]
    return modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_nothing_heavy_and_no_other_command(name: str) -> None:
    modules = set(modules_after_help(name))
    heavy = sorted(m for m in HEAVY if m in modules)
    assert heavy == [], f"dlm-git {name} imports {heavy} before it runs"
    own = COMMANDS[name][0]
    others = sorted(({module for module, _ in COMMANDS.values()} - {own}) & modules)
    assert others == [], f"dlm-git {name} imports other commands' modules: {others}"
