"""The one rule for text on a terminal (`dlm_git.output.printable`) and the writers that
apply it: every character a terminal could act on is shown as its escape, visibly, never
dropped and never raising; one call is one line; JSON keeps every string exact."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from dlm_git.hashing import canonical_json
from dlm_git.output import echo, emit_json, error_line, printable

SHOWN = {
    "\x1b": r"\x1b",  # ESC: starts every escape sequence
    "\x9b": r"\x9b",  # C1 CSI
    "\x85": r"\x85",  # C1 next line
    "\x07": r"\x07",  # BEL
    "\x08": r"\x08",  # backspace
    "\r": r"\r",
    "\n": r"\n",
    "\t": r"\t",
    "\x00": r"\x00",
    "\x7f": r"\x7f",  # DEL
    "\u202a": r"\u202a",  # bidi embeddings and overrides
    "\u202b": r"\u202b",
    "\u202c": r"\u202c",
    "\u202d": r"\u202d",
    "\u202e": r"\u202e",
    "\u2066": r"\u2066",  # bidi isolates
    "\u2067": r"\u2067",
    "\u2068": r"\u2068",
    "\u2069": r"\u2069",
    "\u200b": r"\u200b",  # zero-width space, joiners, marks, BOM (category Cf)
    "\u200d": r"\u200d",
    "\u200e": r"\u200e",
    "\ufeff": r"\ufeff",
    "\u00ad": r"\xad",  # soft hyphen
    "\U000e0041": r"\U000e0041",  # a tag character (Cf, past the BMP)
    "\u2028": r"\u2028",  # line and paragraph separators
    "\u2029": r"\u2029",
    "\u00a0": r"\xa0",  # a space that is not ' '
    chr(0xDC80): r"\udc80",  # surrogateescape'd bytes 0x80 and 0xff (a name not UTF-8)
    chr(0xDCFF): r"\udcff",
}


@pytest.mark.parametrize("ch", sorted(SHOWN))
def test_each_terminal_active_character_is_shown_as_its_escape(ch: str) -> None:
    assert printable(f"a{ch}b") == f"a{SHOWN[ch]}b"
    assert ast.literal_eval(f'"{SHOWN[ch]}"') == ch  # the escape names the character


def test_printable_text_is_itself() -> None:
    for text in ("", "notes/with space.md", "é ü 漢字 🙂 [bold]x[/] \\x1b", "a'b\"c"):
        assert printable(text) == text


def test_no_code_point_gets_through_or_raises() -> None:
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    shown = printable(everything)
    assert shown.isprintable()
    assert printable(shown) == shown  # escaping twice changes nothing
    nothing_dropped = sum(1 if c.isprintable() else len(printable(c)) for c in everything)
    assert len(shown) == nothing_dropped


def test_echo_writes_one_line_per_call(capsys: pytest.CaptureFixture[str]) -> None:
    echo("finding: notes/a\nb\x1b]0;pwned\x07.md")
    error_line("dlm-git: ERROR x\u202etxt.md: bad\r\n")
    out, err = capsys.readouterr()
    assert out == "finding: notes/a\\nb\\x1b]0;pwned\\x07.md\n"
    assert err == "dlm-git: ERROR x\\u202etxt.md: bad\\r\n"


def test_emit_json_is_inert_and_exact(capsys: pytest.CaptureFixture[str]) -> None:
    hostile = {
        "name": "x\x1b[2J\x9b31m\u202e\u2066\u200b\u2028\x7f\r\n\t.md",
        "not utf-8": "latin1-\udce9t\udce9.md",
        "tag": "\U000e0041",
        "kept": "é 漢字 🙂",
    }
    emit_json(hostile)
    out = capsys.readouterr().out
    assert all(c.isprintable() or c == "\n" for c in out), out
    assert json.loads(out) == hostile
    assert "é 漢字 🙂" in out  # printable text stays as it is, not \\u-escaped


def test_emit_json_of_honest_text_is_the_canonical_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    honest = {"b": [1, 2.5, None, True], "a": {"é": "notes/with space.md"}}
    emit_json(honest)
    assert capsys.readouterr().out == canonical_json(honest).decode("utf-8")


def test_emit_json_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(ValueError):
        emit_json({"x": float("nan")})


PACKAGE = Path(__file__).resolve().parents[2] / "dlm_git"
WRITERS = {
    ("typer", "echo"),
    ("typer", "secho"),
    ("click", "echo"),
    ("stdout", "write"),
    ("stderr", "write"),
}


def _direct_writes(path: Path) -> list[str]:
    """Calls in `path` that write to the terminal without `dlm_git.output`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "print":
            found.append(f"{path.name}:{node.lineno} print(...)")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name | ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else f.value.attr
            if (owner, f.attr) in WRITERS or f.attr == "print":  # rich's Console.print too
                found.append(f"{path.name}:{node.lineno} {owner}.{f.attr}(...)")
    return found


def test_commands_and_hooks_write_only_through_the_rule() -> None:
    """The CLI, every command and every hook print through `echo`, `error_line` and
    `emit_json` (which apply `printable`), never to a stream of their own."""
    paths = [PACKAGE / "cli.py", *sorted((PACKAGE / "commands").glob("*.py"))]
    paths += sorted((PACKAGE / "hooks").glob("*.py"))
    direct = [w for p in paths for w in _direct_writes(p)]
    assert not direct, "write through dlm_git.output instead:\n" + "\n".join(direct)
