"""Printing for the CLI and the hooks: JSON to stdout for machines, text lines for people,
errors to stderr.

Invariant: every character dlm-git sends to a terminal is one `printable` lets through.
Any string may come from a commit (a file name, a section's first line, a config value,
a forged check detail), so no command writes to stdout or stderr but through `echo`,
`error_line` or `emit_json`: text is shown with its control and format characters
escaped (`\\x1b`, `\\u202e`), one line per call; JSON keeps every string exact, with the
same characters written as JSON escapes.
"""

from __future__ import annotations

import errno
import json
import sys
from typing import Any, TextIO

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """`text` for a terminal line: every character `str.isprintable` refuses is shown as
    its escape (`\\x1b`, `\\x9b`, `\\u202e`, `\\n`, `\\udce9`), never sent, never dropped.

    That is C0 and C1 controls and DEL (escape sequences, BEL, backspace, CR, NUL), line
    breaks and tabs (one finding stays one line), format characters (bidi overrides and
    isolates, zero-width characters), line and paragraph separators, spaces other than
    ' ', lone surrogates (bytes that were not UTF-8, kept by surrogateescape), private-use
    and unassigned code points. Everything else, `\\` included, is shown as itself."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def echo(line: str = "", *, err: bool = False) -> None:
    """One line to stdout (stderr with `err`), through `printable`."""
    stream = _stream(err)
    stream.write(printable(line) + "\n")
    stream.flush()


def _stream(err: bool) -> TextIO:
    """stdout (stderr with `err`). One the process was started without (closed: Python
    makes it None) is the machine's refusal (EBADF, one line from `cli.main`, exit 1),
    never a traceback."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        raise OSError(errno.EBADF, f"standard {'error' if err else 'output'} is closed")
    return stream


def error_line(text: str) -> None:
    if sys.stderr is not None:  # closed: nowhere to say it (the exit code still does)
        echo(text.rstrip("\n"), err=True)


def emit_json(obj: Any) -> None:
    """`obj` as JSON on stdout, laid out as `hashing.canonical_json` lays it out; the
    characters `printable` escapes are written as JSON escapes (`\\u001b`, `\\u202e`,
    lone surrogates as `\\udce9`), so `json.loads` gives back every string exactly."""
    text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    if not text.replace("\n", "").isprintable():
        text = "".join(ch if ch.isprintable() or ch == "\n" else _json_escape(ch) for ch in text)
    stream = _stream(err=False)
    stream.write(text + "\n")
    stream.flush()


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
