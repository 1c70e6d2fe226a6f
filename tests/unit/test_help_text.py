"""Every command's `--help` reads as a user expects (issue 25): usage lines show an
optional argument once bracketed (`[COMMIT]`, never `[[COMMIT]]`), an option's value by
what it is (`<path>`), never a Python type (`<list[Path]>`), and `base --help` speaks of
every base, not of the tiny one only."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from dlm_git.cli import build_app

PYTHON_TYPE = re.compile(r"<(?:list|tuple|dict|set|Optional|Union)\[|<[A-Z]\w*\[")


def root_command() -> click.Group:
    """The whole CLI (every command of the table), the click group it runs as."""
    return build_app()


def command_paths() -> list[list[str]]:
    """Every command and subcommand of the CLI, as its words."""
    paths: list[list[str]] = []

    def walk(command: click.Command, words: list[str]) -> None:
        paths.append(words)
        subcommands: dict[str, click.Command] = getattr(command, "commands", {})
        for name, sub in sorted(subcommands.items()):
            walk(sub, [*words, name])

    walk(root_command(), [])
    return paths


@pytest.mark.parametrize("words", command_paths(), ids=lambda w: " ".join(w) or "dlm-git")
def test_help_shows_no_doubled_brackets_and_no_python_types(words: list[str]) -> None:
    result = CliRunner().invoke(root_command(), [*words, "--help"])
    assert result.exit_code == 0, result.output
    assert "[[" not in result.output, result.output
    assert not PYTHON_TYPE.search(result.output), result.output


def test_the_commands_a_user_met_show_their_arguments_once_bracketed() -> None:
    cli = root_command()
    usage = {
        " ".join(words): CliRunner().invoke(cli, [*words, "--help"]).output.splitlines()[0]
        for words in (["verify"], ["diff"], ["base", "build"])
    }
    assert usage["verify"].endswith("verify [OPTIONS] [COMMIT]")
    assert usage["diff"].endswith("diff [OPTIONS] [A] [B]")
    assert usage["base build"].endswith("base build [OPTIONS] [NAME]")
    assert "--doc <path>" in CliRunner().invoke(root_command(), ["sign", "--help"]).output


def test_base_help_speaks_of_every_base() -> None:
    text = " ".join(CliRunner().invoke(root_command(), ["base", "--help"]).output.split())
    for form in ("builtin:tiny", "hf:<org>/<name>@<rev>", "registry key", "local directory"):
        assert form in text
    assert "base list" in text
