"""Hostile bytes for tests: file names, and characters a terminal acts on, that a commit can
hold; and the assertions that dlm-git shows them inert.

A name here must be read as itself (taken as a source, listed, escaped when shown), or
skipped with a reason (`NON_UTF8_NAME`, the `SYMLINKS`), never crash or reach a terminal
raw. tests/hostile/conftest.py builds a trained repository holding all of them.
"""

from __future__ import annotations

import subprocess

ESCAPES = {
    "osc": "\x1b]0;pwned\x07",  # sets the terminal's title (ESC ... BEL)
    "clear": "\x1b[2J",  # clears the screen (CSI)
    "c1": "\x9b31m",  # the one-character C1 CSI: red
    "bidi": "\u202e",  # right-to-left override: `x\u202etxt.md` reads as x"dm.txt"
    "isolate": "\u2066",  # left-to-right isolate
    "cr": "\r",  # back to the start of the line: overwrites what was printed
    "backspace": "\x08",
    "zero_width": "\u200b",
    "line_sep": "\u2028",
    "del": "\x7f",
}
"""Characters a terminal acts on instead of showing: text from a commit that holds them
must reach stdout and stderr escaped (`SHOWN`), and JSON output exactly."""
SHOWN = {
    "osc": r"\x1b]0;pwned\x07",
    "clear": r"\x1b[2J",
    "c1": r"\x9b31m",
    "bidi": r"\u202e",
    "isolate": r"\u2066",
    "cr": r"\r",
    "backspace": r"\x08",
    "zero_width": r"\u200b",
    "line_sep": r"\u2028",
    "del": r"\x7f",
}
"""How a terminal line shows each of `ESCAPES`: visibly, as its escape."""
ESCAPE_NAMES = [f"{kind}{chars}.md" for kind, chars in ESCAPES.items()]
HOSTILE_NAMES = [
    "line\nbreak.md",
    "carriage\rreturn.md",
    "tab\there.md",
    "with space.md",
    "-leading-dash.md",
    "0:colon.md",
    *ESCAPE_NAMES,
]
"""Source file names that must be read as themselves (all taken as sources)."""
SYMLINKS = {"inlink.md": "tab\there.md", "cfg.txt": "../../.git/config"}
"""Symbolic links planted among the sources: an in-repo one and one past the excludes."""
NON_UTF8_NAME = b"latin1-\xe9t\xe9.md"
"""A source file name that is not UTF-8: skipped with a reason, never a crash."""


def assert_inert(text: str, *, where: str = "output") -> None:
    """No character of `text` is one a terminal would act on (`ESCAPES`, any control or
    format character): lines end with `\n`, nothing else that is not printable."""
    bad = sorted({ch for ch in text if ch != "\n" and not ch.isprintable()})
    assert not bad, f"{where} sends {bad!r} to the terminal:\n{text!r}"


def escaped(text: str) -> str:
    """`text`, made of `ESCAPES` and printable characters, as a terminal line shows it."""
    for kind, chars in ESCAPES.items():
        text = text.replace(chars, SHOWN[kind])
    return text


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
