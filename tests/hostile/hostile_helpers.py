"""Helpers for tests/hostile: hostile file names, the forgery module (loaded by path),
and runners for the real `dlm-git` executable and hook modules as subprocesses."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.forge import load_forgery

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


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def one_line_error(self, code: int, *names: str) -> str:
        """Assert exit `code` and one stderr line, no traceback, naming each of `names`."""
        why = f"exit {self.code}\nstdout: {self.stdout}\nstderr: {self.stderr}"
        assert self.code == code, why
        assert "Traceback" not in self.stderr, why
        lines = self.stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0], why
        for name in names:
            assert name in lines[0], why
        return lines[0]


def run(cmd: list[str], cwd: Path, stdin: str | None = None, timeout: float = 300) -> Run:
    env = load_forgery().venv_env()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def dlm_git(cwd: Path, *args: str, timeout: float = 300) -> Run:
    return run([str(Path(sys.executable).parent / "dlm-git"), *args], cwd, timeout=timeout)


def hook(cwd: Path, which: str, stdin: str = "") -> Run:
    return run([sys.executable, "-m", f"dlm_git.hooks.{which}"], cwd, stdin=stdin)


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
