"""`paths.problem`'s fast path (`_PLAIN`) takes only what the full rule (`_refusal`) takes:
on the names of `test_paths`, and on a generated corpus of hostile names (unicode, case,
controls, `.`/`..`, `.git` and `git~1` forms, drives, reserved Windows names) where every
verdict of `problem` is the full rule's. The check itself is shown to catch a fast path
made wrong on purpose: a pattern that lets `~`, a leading `.`, `:` or an empty component
through is caught on the same corpus."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from dlm_git.paths import _PLAIN, _refusal, problem
from tests.unit.test_paths import ACCEPTED, REFUSED

PIECES = [
    "",
    ".",
    "..",
    "...",
    ".git",
    ".GIT",
    ".Git.",
    ".git ",
    ".git::$INDEX_ALLOCATION",
    ".gitignore",
    "git",
    "git~1",
    "GIT~1.",
    "Git~1 :x",
    "git~2",
    "ĝit~1",
    ".ǧit",
    ".gıt",
    ".gİt",
    "C:",
    "c:x",
    "0:x",
    "CON",
    "nul.txt",
    "AUX",
    "com1",
    "LPT9.md",
    "a",
    "x.md",
    "-dash",
    " ",
    "a ",
    "a.",
    "~",
    "~user",
    "a~b",
    "a:b",
    "back\\slash",
    "\\",
    "nul\0byte",
    "line\nbreak",
    "tab\t",
    "\r",
    "\x1b[31m",
    "\u202ebidi",
    "é",
    "e\u0301",
    "日本語.md",
    "\U0001f600",
    "K",  # the Kelvin sign: case-folds to k
    "ſ",  # long s: case-folds to s
]
"""Components, each hostile in its own way or plain, joined in every way below."""

CHARS = "aAgGiItT1~.:/\\\0 \n\t-_éİıǧK日"


def corpus() -> list[str]:
    """Every path of one to three `PIECES` (with a leading `/` or not), and random strings
    of `CHARS` (a fixed seed: the same names every run)."""
    names = list(REFUSED) + ACCEPTED
    for n in (1, 2, 3):
        pieces = PIECES if n < 3 else PIECES[::3]
        for parts in itertools.product(pieces, repeat=n):
            path = "/".join(parts)
            names += [path, "/" + path]
    rng = random.Random(28)
    names += ["".join(rng.choices(CHARS, k=rng.randint(0, 12))) for _ in range(20000)]
    return names


CORPUS = corpus()


def fast_path_errors(plain: re.Pattern[str], names: list[str]) -> list[str]:
    """The names `plain` takes that the full rule refuses: a fast path must have none."""
    return [n for n in names if plain.fullmatch(n) and _refusal(n) is not None]


def test_the_fast_path_takes_nothing_the_full_rule_refuses() -> None:
    assert fast_path_errors(_PLAIN, CORPUS) == []


def test_problem_gives_the_full_rule_verdict_for_every_name() -> None:
    assert [n for n in CORPUS if problem(n) is not _refusal(n)] == []


def test_the_fast_path_takes_the_names_a_walk_meets() -> None:
    for path in ("corpus/d00/f00001.md", "notes/sub/x.md", "a.b/c-d_e f.txt", "日本語/é.md"):
        assert _PLAIN.fullmatch(path), path


@pytest.mark.parametrize(
    "wrong",
    [
        _PLAIN.pattern.replace("~", ""),  # lets git~1 through
        _PLAIN.pattern.replace("[^.", "[^"),  # lets a leading '.' through: .git, ..
        _PLAIN.pattern.replace("~:", "~"),  # lets a drive C: through
        _PLAIN.pattern.replace("[^/~:\\\\\\0]*", "[^~:\\\\\\0]*"),  # lets // through
    ],
)
def test_the_check_catches_a_fast_path_made_wrong(wrong: str) -> None:
    assert wrong != _PLAIN.pattern
    assert fast_path_errors(re.compile(wrong), CORPUS)
