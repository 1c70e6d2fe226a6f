"""What the command line prints is a contract (issue 28): every command's and
subcommand's `--help`, and every misuse of the parser (a bad value for each kind of
parameter, a missing argument, an unknown option or command), print byte for byte what
`tests/golden/cli/cli.json` holds, with its exit code, through the real console entry
(`dlm_git.cli.main`, in-process with the terminal 80 columns wide; a few through the
venv's `dlm-git` executable). The golden was taken from the CLI as it was declared with
typer, before it moved to plain click: the move changed no byte a user sees.

Regenerate (only for a deliberate change of what the CLI prints; review the diff):
    .venv/bin/python -m tests.unit.test_cli_golden
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import click
import pytest

from dlm_git.cli import main
from tests.support.cli import dlm_git

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cli" / "cli.json"
WIDTH = {"COLUMNS": "80", "LINES": "24"}

MISUSE: list[list[str]] = [
    [],  # no command: the help, as misuse
    ["--version"],
    ["--json", "log"],  # --json before a command goes with --version
    ["--nope"],
    ["lgo"],  # an unknown command, with the one it resembles
    ["zzz"],
    ["log", "--nope"],
    ["log", "-h"],
    ["log", "--jsn"],  # an unknown option like a known one
    ["verify", "--levle", "hash"],
    ["log", "--max-count=x"],
    ["log", "-n", "x"],
    ["log", "-nx"],
    ["log", "--max-count", "1", "--max-count", "x"],
    ["verify", "--tolerance", "nope", "--sample", "x"],  # the first bad value is said
    ["log", "--no\x1b[2Jpe"],  # a terminal control in what the user typed: escaped
    ["verify", "a", "b\x07c"],
    ["l\x1bg"],
    ["log", "--max-count", "x"],  # int
    ["log", "--max-count"],  # an option without its value
    ["log", "--doc"],  # path without its value
    ["log", "--json=1"],  # a flag given a value
    ["log", "--json", "extra"],
    ["verify", "--level", "nope"],  # str, checked by the command
    ["verify", "--level"],
    ["verify", "--sample", "x"],
    ["verify", "--sample", "1.5"],
    ["verify", "--sample", "0"],  # an int the command receives and refuses
    ["verify", "--seed", "x"],  # int | None
    ["verify", "--tolerance", "x"],  # float
    ["verify", "--tolerance", "0.25"],  # a float the command receives
    ["verify", "--report", "/"],  # a Path the command receives
    ["verify", "a", "b"],  # an optional argument given twice
    ["verify", "--worktree"],
    ["diff", "a", "b", "c"],
    ["show"],  # a missing argument
    ["show", "--json"],
    ["new"],
    ["keygen"],  # a missing required option
    ["keygen", "--out"],
    ["sign", "--doc"],  # a repeatable option without its value
    ["sign", "--if-configured=no"],
    ["train"],
    ["train", "d.dlm", "--threads", "x"],
    ["train", "d.dlm", "--nproc", "x"],
    ["train", "d.dlm", "--device", "nope"],
    ["train", "d.dlm", "--lock-mode", "nope"],
    ["train", "d.dlm", "--segment-every", "-1"],
    ["train", "d.dlm", "--strict-lock", "--ignore-lock"],
    ["doctor", "--threads", "x"],
    ["base"],  # a group alone: its help, as misuse
    ["base", "nope"],
    ["base", "biuld"],
    ["base", "build", "--layers", "x"],
    ["base", "build", "--vocab", "1.5"],
    ["base", "build", "a", "b"],
    ["base", "show", "a", "b"],
    ["base", "resolve"],
    ["cache"],
    ["cache", "show"],
    ["cache", "prune"],
    ["cache", "clear", "--force=1"],
    ["hooks"],
    ["hooks", "install", "--uninstall", "x"],
    ["self-verify", "--key"],
    ["tokenize"],
    ["eval"],
    ["inputs", "x"],
    ["init", "--doc"],
    ["fsck", "--full", "x"],
]
"""Misuse, at least once for each kind of parameter: path, int, int | None, float, str,
flag, optional argument, required argument, required option, repeatable option."""

SUBPROCESS = [["verify", "--help"], ["log", "--max-count", "x"], ["lgo"], []]
"""Run through the venv's `dlm-git` executable too: the console entry as users run it."""


def command_paths(command: click.Command, words: list[str]) -> list[list[str]]:
    """Every command and subcommand under `command`, as its words."""
    paths = [words]
    subcommands: dict[str, click.Command] = getattr(command, "commands", {})
    for name, sub in sorted(subcommands.items()):
        paths.extend(command_paths(sub, [*words, name]))
    return paths


def invocations() -> list[list[str]]:
    """Each command path's `--help`, then the misuse."""
    from tests.unit.test_help_text import root_command

    return [[*words, "--help"] for words in command_paths(root_command(), [])] + MISUSE


def run(argv: list[str], cwd: Path) -> dict[str, object]:
    """`dlm-git ARGV` through `main` in `cwd`: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    here, saved = Path.cwd(), {k: os.environ.get(k) for k in WIDTH}
    os.environ.update(WIDTH)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(here)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def key(argv: list[str]) -> str:
    return " ".join(["dlm-git", *argv])


def golden() -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("argv", invocations(), ids=key)
def test_the_cli_prints_what_it_printed(argv: list[str], tmp_path: Path) -> None:
    assert run(argv, tmp_path) == golden()[key(argv)]


def test_every_golden_is_still_asked_for() -> None:
    """A command removed or renamed shows here, not as a golden silently unused."""
    assert sorted(golden()) == sorted(key(argv) for argv in invocations())


@pytest.mark.parametrize("argv", SUBPROCESS, ids=key)
def test_the_console_script_prints_the_same(argv: list[str], tmp_path: Path) -> None:
    ran = dlm_git(tmp_path, *argv, **WIDTH)
    expected = golden()[key(argv)]
    assert (ran.code, ran.stdout, ran.stderr) == (
        expected["code"],
        expected["stdout"],
        expected["stderr"],
    )


def regenerate() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        found = {key(argv): run(argv, Path(where)) for argv in invocations()}
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    regenerate()
