"""The `dlm-git` (and `git dlm`) command line.

Invariant: user errors (`DlmGitError`) print one line `subject: message (hint: ...)` to
stderr and exit with the error's code (1 for failed checks, 2 for misuse); CLI misuse
caught by the parser exits 2; an `OSError` (disk full, permission denied, a file removed
mid-run) is the machine's refusal, printed the same way with exit 1. A command that needs
the training stack, run on a core install (`pip install dlm-git`), fails where it first
imports torch, dvc, ...: `main` is the one place that turns that `ModuleNotFoundError`
into `dlm-git <command>: needs the training stack (<module> is not installed) (hint: pip
install 'dlm-git[train]')`, exit 1. Only bugs show a traceback. Each command lives in its
own module under `dlm_git/commands/` and imports heavy libraries only inside its body.
"""

from __future__ import annotations

import sys

import typer

from dlm_git import __version__
from dlm_git.commands import diff as diff_cmd
from dlm_git.commands import doctor as doctor_cmd
from dlm_git.commands import eval as eval_cmd
from dlm_git.commands import fsck as fsck_cmd
from dlm_git.commands import init as init_cmd
from dlm_git.commands import inputs as inputs_cmd
from dlm_git.commands import log as log_cmd
from dlm_git.commands import new as new_cmd
from dlm_git.commands import show as show_cmd
from dlm_git.commands import sign as sign_cmd
from dlm_git.commands import tokenize as tokenize_cmd
from dlm_git.commands import train as train_cmd
from dlm_git.commands import verify as verify_cmd
from dlm_git.commands.base import base_app
from dlm_git.commands.cache import cache_app
from dlm_git.commands.hooks import hooks_app
from dlm_git.errors import DlmGitError, EnvironmentFailure, TrainingStackMissing
from dlm_git.output import echo, error_line

app = typer.Typer(
    name="dlm-git",
    help="Git-native data-and-model versioning for .dlm documents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        echo(f"dlm-git {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Git-native data-and-model versioning for .dlm documents."""


app.command("show")(show_cmd.show)
app.command("train")(train_cmd.train)
app.command("doctor")(doctor_cmd.doctor)
app.add_typer(cache_app, name="cache")
app.add_typer(base_app, name="base")
app.add_typer(hooks_app, name="hooks")
app.command("tokenize")(tokenize_cmd.tokenize)
app.command("inputs")(inputs_cmd.inputs)
app.command("verify")(verify_cmd.verify)
app.command("eval")(eval_cmd.eval_doc)
app.command("fsck")(fsck_cmd.fsck)
app.command("diff")(diff_cmd.diff)
app.command("log")(log_cmd.log)
app.command("init")(init_cmd.init)
app.command("new")(new_cmd.new)
app.command("sign")(sign_cmd.sign)
app.command("keygen")(sign_cmd.keygen)


GROUPS = ("base", "cache", "hooks")


def command_name(argv: list[str]) -> str:
    """`dlm-git train`, `dlm-git base build`: the command `argv` runs, for error lines."""
    words = [a for a in argv if not a.startswith("-")]
    take = 2 if words and words[0] in GROUPS else 1
    return " ".join(["dlm-git", *words[:take]])


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="dlm-git", standalone_mode=True)
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
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
