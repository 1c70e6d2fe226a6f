"""The `dlm-git` (and `git dlm`) command line.

Invariant: user errors (`DlmGitError`) print one line `subject: message (hint: ...)` to
stderr and exit with the error's code (1 for failed checks, 2 for misuse); CLI misuse
caught by the parser exits 2; an `OSError` (disk full, permission denied, a file removed
mid-run) is the machine's refusal, printed the same way with exit 1. A command that needs
the training stack, run on a core install (`pip install dlm-git`), fails where it first
imports torch, dvc, ...: `main` is the one place that turns that `ModuleNotFoundError`
into `dlm-git <command>: needs the training stack (<module> is not installed) (hint: pip
install 'dlm-git[train]')`, exit 1. Only bugs show a traceback. Each command lives in its
own module under `dlm_git/commands/`, named in one table (`COMMANDS`), and imports heavy
libraries only inside its body; a run imports and builds only the command it names
(`build_app`), so no command's start pays for another's imports
(tests/unit/test_command_imports.py checks every command of the table). The parser is
plain click, built from each command's own declarations by `dlm_git.clidecl`: no typer
and no pydantic on any command's parse path.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import click

from dlm_git import __version__
from dlm_git.clidecl import Exit, Group, Option, command, group, root, run
from dlm_git.errors import DlmGitError, EnvironmentFailure, TrainingStackMissing, UsageError
from dlm_git.output import echo, emit_json, error_line

COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("dlm_git.commands.show", "show"),
    "train": ("dlm_git.commands.train", "train"),
    "doctor": ("dlm_git.commands.doctor", "doctor"),
    "tokenize": ("dlm_git.commands.tokenize", "tokenize"),
    "inputs": ("dlm_git.commands.inputs", "inputs"),
    "verify": ("dlm_git.commands.verify", "verify"),
    "eval": ("dlm_git.commands.eval", "eval_doc"),
    "fsck": ("dlm_git.commands.fsck", "fsck"),
    "diff": ("dlm_git.commands.diff", "diff"),
    "log": ("dlm_git.commands.log", "log"),
    "init": ("dlm_git.commands.init", "init"),
    "new": ("dlm_git.commands.new", "new"),
    "sign": ("dlm_git.commands.sign", "sign"),
    "keygen": ("dlm_git.commands.sign", "keygen"),
    "self-verify": ("dlm_git.commands.self_verify", "self_verify"),
    "cache": ("dlm_git.commands.cache", "cache_app"),
    "base": ("dlm_git.commands.base", "base_app"),
    "hooks": ("dlm_git.commands.hooks", "hooks_app"),
}
"""The command table: each command's name, the module that defines it and its function
(or, for a group of subcommands, its `clidecl.Group`), in the order `--help` lists them.
Only the module of the command being run is imported (`build_app`): a command's start
never pays for another's imports."""

HELP = "Git-native data-and-model versioning for .dlm documents."


def _version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    _settle(ctx, "version", value)


def _version_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    _settle(ctx, "json", value)


def _settle(ctx: click.Context, flag: str, value: bool) -> None:
    """`--version [--json]`: both options are eager, so click runs their callbacks in the
    order given, then the one not given (its callback runs too); the second acts on both."""
    asked = ctx.meta.setdefault("dlm_git.root", {})
    asked[flag] = value
    if len(asked) < 2:
        return
    if asked["version"]:
        if asked["json"]:
            from dlm_git.selfid import identity

            emit_json(identity().to_json())
        else:
            echo(f"dlm-git {__version__}")
        raise Exit(0)
    if asked["json"]:
        raise UsageError(
            "dlm-git", "--json before the command goes with --version", "put --json after it"
        )


_Version = Annotated[
    bool, Option("--version", help="Print the version and exit.", callback=_version, eager=True)
]
_VersionJson = Annotated[
    bool,
    Option(
        "--json",
        help="With --version: the verifier's identity (version, digest, commit) as JSON.",
        callback=_version_json,
        eager=True,
    ),
]


def root_options(version: _Version = False, as_json: _VersionJson = False) -> None:
    """The options before the command (their callbacks act; this is never called)."""


def build_app(names: list[str] | None = None) -> click.Group:
    """The CLI with the commands `names` of the table (None: all of them), in its order;
    a command's module is imported only here, only when it is one of `names`."""
    commands: list[click.Command] = []
    for name, (module, attribute) in COMMANDS.items():
        if names is not None and name not in names:
            continue
        found = getattr(importlib.import_module(module), attribute)
        commands.append(group(name, found) if isinstance(found, Group) else command(name, found))
    return root("dlm-git", root_options, HELP, commands)


def __getattr__(name: str) -> Any:
    """`dlm_git.cli.app`: the whole CLI (every command imported), built when asked for."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


GROUPS = ("base", "cache", "hooks")


def command_name(argv: list[str]) -> str:
    """`dlm-git train`, `dlm-git base build`: the command `argv` runs, for error lines."""
    words = [a for a in argv if not a.startswith("-")]
    take = 2 if words and words[0] in GROUPS else 1
    return " ".join(["dlm-git", *words[:take]])


def asked_for(argv: list[str]) -> list[str] | None:
    """The command `argv` names, as the only one to build (the root takes no option with
    a value, so it is the first word); None (all of them) for `--help`, no command or a
    name that is not one, so that the parser lists them or says which is unknown."""
    words = [a for a in argv if not a.startswith("-")]
    return [words[0]] if words and words[0] in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(build_app(asked_for(args)), args, "dlm-git")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except DlmGitError as exc:
        error_line(exc.one_line())
        return exc.exit_code
    except OSError as exc:  # the machine refused (disk full, permissions, a file gone)
        failure = EnvironmentFailure.from_os_error(exc)
        error_line(failure.one_line())
        return failure.exit_code
    except ImportError as exc:  # torch, dvc, ... on a core install: one line, else a bug
        missing = TrainingStackMissing.from_import_error(exc, command_name(args))
        if missing is None:
            raise
        error_line(missing.one_line())
        return missing.exit_code
    except KeyboardInterrupt:
        error_line("dlm-git: interrupted")
        return 130


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
