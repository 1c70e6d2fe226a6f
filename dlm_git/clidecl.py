"""The command line, declared with click alone: no typer and no pydantic on any command's
parse path (issue 28: a command's start is the interpreter's plus what it needs).

Invariant: each parameter is declared once, in its command function's signature, beside
the function: `name: Annotated[T, Option("--flag", help=...)] = default` or
`name: Annotated[T, Argument(metavar="DOC", help=...)]`, no default meaning required.
`command` is the one place that turns such a function into a `click.Command` (`group`,
a `Group` of them into a `click.Group`), and the function receives exactly its annotated
types: `str`, `int`, `float`, `bool` (a flag), `pathlib.Path`, `list[Path]` (a repeatable
option), None for an `X | None` (or repeatable) parameter not given. What a user reads
is what the CLI printed when typer declared it, byte for byte (tests/golden/cli): values
shown by type (`<path>`, `<int>`), an `Arguments:` section, `[default: ...]` and
`[required]` markers, `{DOC}` for a required argument in the usage line, subcommands in
the order declared, integers and numbers read as pydantic read them (ASCII digits, `_`
between digits, `1.0` an integer), parse errors worded as typer's click worded them, and
what the user typed shown through `output.printable`. `run` runs the CLI as typer's
entry did: each outcome an exit code, an interrupt 130.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import os
import sys
import types
import typing
from collections.abc import Callable, Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any, TypeVar

import click
from click.formatting import join_options

from dlm_git.output import echo, printable
from dlm_git.validated import NumberError, parse_float, parse_int

F = TypeVar("F", bound=Callable[..., Any])
Callback = Callable[[click.Context, click.Parameter, Any], Any]


Exit = click.exceptions.Exit
"""`raise Exit(1)`: a command ends with that exit code, having said what it had to."""

confirm = click.confirm
"""A yes/no question on the terminal (`cache clear` without --force)."""


class Option:
    """An option: its flags (`"-n", "--max-count"`), help, and the metavar shown instead
    of its type; `callback` and `eager` for the root's `--version`."""

    __slots__ = ("flags", "help", "metavar", "callback", "eager")

    def __init__(
        self,
        *flags: str,
        help: str,
        metavar: str | None = None,
        callback: Callback | None = None,
        eager: bool = False,
    ) -> None:
        self.flags, self.help, self.metavar = flags, help, metavar
        self.callback, self.eager = callback, eager


class Argument:
    """A positional argument: the name it is shown by (`DOC`) and its help."""

    __slots__ = ("metavar", "help")

    def __init__(self, *, metavar: str, help: str) -> None:
        self.metavar, self.help = metavar, help


class Group:
    """A command of subcommands (`dlm-git base build`): its help and each subcommand's
    function, in the order declared (`@base_app.command("build")`)."""

    def __init__(self, help: str) -> None:
        self.help = help
        self.functions: dict[str, Callable[..., Any]] = {}

    def command(self, name: str) -> Callable[[F], F]:
        def add(function: F) -> F:
            self.functions[name] = function
            return function

        return add


# --- values ------------------------------------------------------------------------


class _Int(click.ParamType[int, Any]):
    name = "int"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_int(str(value))  # the one rule: the documents' own
        except NumberError as exc:
            self.fail(exc.message)


class _Float(click.ParamType[float, Any]):
    name = "float"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            return parse_float(str(value))
        except NumberError as exc:
            self.fail(exc.message)


class _Path(click.ParamType[Path, Any]):
    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        if value == "":  # Path("") is "." : a file or directory nobody named
            self.fail("an empty path names nothing", param, ctx)
        return Path(value)


class _Str(click.ParamType[str, Any]):
    name = "str"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return str(value)


TYPES: dict[Any, click.ParamType[Any, Any]] = {
    int: _Int(),
    float: _Float(),
    Path: _Path(),
    str: _Str(),
}
"""The parameter types a command may declare (besides `bool`, a flag)."""


# --- help --------------------------------------------------------------------------


def _with_extra(help: str, default: Any, required: bool) -> str:
    """`help  [default: X; required]`, as typer showed it (no empty or False default)."""
    extra = []
    if default is not None and default is not False and str(default):
        extra.append(f"default: {default}")
    if required:
        extra.append("required")
    if not extra:
        return help
    marks = f"[{'; '.join(extra)}]"
    return f"{help}  {marks}" if help else marks


class _Option(click.Option):
    def __init__(self, decls: list[str], shown: Any, **attrs: Any) -> None:
        super().__init__(decls, **attrs)
        self.shown = shown  # the declared default (None: none)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        names = join_options(self.opts)[0]
        if not self.is_flag:
            names += f" {self.metavar or '<' + self.type.name + '>'}"
        return names, _with_extra(self.help or "", self.shown, self.required)

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        found = super().process_value(ctx, value)
        return (list(found) or None) if self.multiple else found


class _Argument(click.Argument):
    def __init__(self, decls: list[str], shown: Any, **attrs: Any) -> None:
        super().__init__(decls, **attrs)
        self.shown = shown  # the declared default (None: none)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        name = f"{self.metavar} <{self.type.name}>"
        return name, _with_extra(self.help or "", self.shown, self.required)

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [f"{{{self.metavar}}}" if self.required else f"[{self.metavar}]"]


# --- parsing -----------------------------------------------------------------------


def _parse(
    parse: Callable[[click.Context, list[str]], list[str]], ctx: click.Context, args: list[str]
) -> list[str]:
    """click's parse, its misuse worded as typer's click worded it."""
    try:
        return parse(ctx, args)
    except click.NoSuchOption as exc:
        near = sorted(exc.possibilities or ())
        message = f"No such option: {printable(exc.option_name)}"
        if near:
            message += f" (Possible options: {', '.join(near)})"
        raise click.UsageError(message, ctx) from None
    except click.BadOptionUsage as exc:  # said without the usage lines
        raise click.UsageError(exc.message) from None


class _Command(click.Command):
    allow_extra_args = True  # refused below, in typer's words

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = _parse(super().parse_args, ctx, args)
        if rest and not ctx.resilient_parsing:
            extra = " ".join(printable(arg) for arg in rest)
            ctx.fail(f"Got unexpected extra argument(s) ({extra})")
        return rest

    def format_arguments(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`Arguments:`, each with its type (then click's `Options:`)."""
        rows = [p.get_help_record(ctx) for p in self.get_params(ctx) if isinstance(p, _Argument)]
        if rows:
            with formatter.section("Arguments"):
                formatter.write_dl(rows)


class _Group(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return _parse(super().parse_args, ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        found = self.get_command(ctx, name)
        if found is None and not ctx.resilient_parsing:
            if name[:1] and not name[:1].isalnum():  # an option where a command goes
                self.parse_args(ctx, args)
            message = f"No such command {name!r}."
            near = get_close_matches(name, list(self.commands))
            if near:
                message = f"{message[:-1]}. Did you mean {', '.join(map(repr, near))}?"
            ctx.fail(message)
        return (name if found else None), found, args[1:]


# --- building ----------------------------------------------------------------------


def _param(parameter: inspect.Parameter, hint: Any) -> click.Parameter:
    """The click parameter `parameter` (annotated `hint`) declares."""
    annotated = typing.get_origin(hint) is typing.Annotated
    declared, decl = typing.get_args(hint)[:2] if annotated else (hint, None)
    if not isinstance(decl, Option | Argument):
        raise TypeError(f"{parameter.name}: declare it as Annotated[T, Option(...)]")
    required = parameter.default is inspect.Parameter.empty
    shown = None if required else parameter.default
    common: dict[str, Any] = {"required": required, "metavar": decl.metavar, "help": decl.help}
    if not required:  # a default given, even None, is a value click never calls missing
        common["default"] = parameter.default
    kind = _bare(declared)
    if isinstance(decl, Argument):
        return _Argument([parameter.name], shown, type=TYPES[kind], **common)
    decls = [parameter.name, *decl.flags]
    if decl.callback is not None:
        common.update(callback=decl.callback, is_eager=decl.eager, expose_value=False)
    if kind is bool:
        return _Option(decls, shown, is_flag=True, **common)
    multiple = typing.get_origin(kind) is list
    kind = typing.get_args(kind)[0] if multiple else kind
    return _Option(decls, shown, type=TYPES[kind], multiple=multiple, **common)


def _bare(declared: Any) -> Any:
    """`X` of `X | None`."""
    if isinstance(declared, types.UnionType) or typing.get_origin(declared) is typing.Union:
        (kind,) = [t for t in typing.get_args(declared) if t is not type(None)]
        return kind
    return declared


def _params(function: Callable[..., Any]) -> list[click.Parameter]:
    hints = typing.get_type_hints(function, include_extras=True)
    signature = inspect.signature(function)
    return [_param(p, hints[p.name]) for p in signature.parameters.values()]


def command(name: str, function: Callable[..., Any]) -> click.Command:
    """`function` as the command `name`: its parameters, its docstring as its help."""
    help = inspect.getdoc(function)
    return _Command(name, callback=function, params=_params(function), help=help)


def group(name: str, declared: Group) -> click.Group:
    """The group `name` of `declared`'s subcommands (no subcommand: its help, exit 2)."""
    subcommands = [command(n, f) for n, f in declared.functions.items()]
    return _Group(name, commands=subcommands, help=declared.help, no_args_is_help=True)


def root(
    name: str, options: Callable[..., Any], help: str, commands: Sequence[click.Command]
) -> click.Group:
    """The whole CLI: `options`' parameters (its function is never called), `commands`."""
    return _Group(name, commands=commands, params=_params(options), help=help, no_args_is_help=True)


def run(cli: click.Command, args: list[str], prog_name: str) -> int:
    """`cli` on `args`, each outcome its exit code (typer's entry, as the CLI ran under it):
    misuse printed by click (2), `Exit(n)` n, an interrupt 130, a closed stdout 1."""
    try:
        with cli.make_context(prog_name, list(args)) as ctx:
            cli.invoke(ctx)
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except EOFError:
        echo("", err=True)
        echo("Aborted!", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        echo("Aborted!", err=True)
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        with contextlib.suppress(OSError, ValueError):  # the reader left: no second
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # at exit
        return 1
