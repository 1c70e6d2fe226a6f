"""The values a command receives from its command line (`dlm_git.clidecl`): exactly the
types its signature declares, as they were when typer read them: `pathlib.Path` for a
path, a list of them for a repeatable option (None when not given), None for an optional
value not given; integers and numbers read as pydantic read them for typer (ASCII digits,
`_` between digits, surrounding blanks, `1.0` an integer; no `0x10`, no `١`)."""

from __future__ import annotations

from pathlib import Path, PosixPath
from typing import Any

import click
import pytest
from pydantic import TypeAdapter, ValidationError

from dlm_git.cli import build_app
from dlm_git.clidecl import TYPES


def received(words: list[str]) -> dict[str, tuple[type, Any]]:
    """What the command `words[0]` is called with for the rest of `words`: each value's
    type and the value."""
    name, *args = words
    command = build_app([name]).commands[name]
    ctx = command.make_context(name, args)
    return {key: (type(value), value) for key, value in ctx.params.items()}


def test_verify_receives_paths_ints_floats_and_none_where_not_given() -> None:
    assert received(["verify", "--tolerance", "1", "--seed", "3", "--report", "r"]) == {
        "commit": (str, "HEAD"),
        "doc": (type(None), None),
        "level": (str, "hash"),
        "worktree": (bool, False),
        "no_dvc": (bool, False),
        "report": (PosixPath, Path("r")),
        "tiny_dir": (type(None), None),
        "sample": (int, 2),
        "seed": (int, 3),
        "tolerance": (float, 1.0),
        "strict": (bool, False),
        "accept_license": (bool, False),
        "require_signature": (bool, False),
        "fetch": (bool, False),
        "remote": (type(None), None),
        "as_json": (bool, False),
    }


def test_a_repeatable_option_is_a_list_of_paths_or_none() -> None:
    assert received(["sign", "--doc", "a", "--doc", "b"])["doc"] == (
        list,
        [Path("a"), Path("b")],
    )
    assert received(["sign"])["doc"] == (type(None), None)


@pytest.mark.parametrize(
    ("words", "shown"),
    [
        (["verify", "--report", ""], "'--report'"),
        (["show", ""], "'DOC'"),
        (["sign", "--doc", "a", "--doc", ""], "'--doc'"),
    ],
)
def test_an_empty_path_is_misuse_not_the_working_directory(words: list[str], shown: str) -> None:
    """`Path("")` is `.`: an empty argument would have written a report to, or read a
    document from, a place nobody named."""
    with pytest.raises(click.BadParameter) as caught:
        received(words)
    assert (
        caught.value.format_message() == f"Invalid value for {shown}: an empty path names nothing"
    )


def test_optional_arguments_not_given_are_none() -> None:
    found = received(["diff"])
    assert (found["a"], found["b"], found["doc"]) == ((type(None), None),) * 3
    assert received(["log", "-n", "3"])["max_count"] == (int, 3)


def test_a_group_s_subcommand_receives_its_declared_default() -> None:
    command = build_app(["base"]).commands["base"]
    assert isinstance(command, click.Group)
    ctx = command.commands["build"].make_context("build", [])
    assert ctx.params["name"] == "tiny" and ctx.params["layers"] is None


SPELLINGS = [
    "1", " 2 ", "+3", "-4", "1_000", "1.0", "1.00", "1_0.0", "-0.0", "00012", "9" * 30,
    "\t1\n", "1\xa0", "\u20021", "1.5", "1.", ".0", ".5", "5.", "1.0_0", "1.01", "0x10",
    "0b1", "1e3", "1E5", "1.e5", "1e1_0", "1_0e1", "-.5e-3", "1e400", "inf", "-inf", "nan",
    "nAn", "iNfInItY", "+inf", "infinit", "Infinity", "１２", "٣", "", "  ", "_1", "1__0",
    "1_", "1 2", "1 .0", "1,0", "+-1", "1j", "1\x00", "1.5e", "e5", "0.0000", "+.5",
    "1\x1c", "\x1d1", " 1\x1e", "2.5\x1f", "\x851\u3000", "\u20281.5\u205f",
    "9" * 4300, "-" + "9" * 4300, "9" * 4301, "-" + "9" * 4301 + ".0", "9" * 4301 + ".5",
]  # fmt: skip
"""Integers, numbers and near misses, in the forms a user may type them (the separators
\\x1c-\\x1f are no blanks to pydantic, though `str.strip` and `float` take them for some;
past 4300 digits `int()` raises, and the value is refused, not a traceback)."""


@pytest.mark.parametrize("kind", [int, float])
def test_numbers_read_as_pydantic_read_them(kind: type) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    for text in SPELLINGS:
        try:
            expected: object = ("value", adapter.validate_python(text))
        except ValidationError:
            expected = "refused"
        try:
            got: object = ("value", TYPES[kind].convert(text, None, None))
        except click.BadParameter:
            got = "refused"
        assert repr(got) == repr(expected), (kind, text)
