"""A child's reports to its parent (`dlm_git.childproc`): heard as they come, whatever
their number, in order; one that is not of its type, or a line without end, stops the
child (killed, never waited for) and is one `ProtocolError` line; a child's stderr, however
long, costs the parent its last bytes only and gives its last line.

The children are real interpreters running a module written here (`python -P -m rogue
DIR FD`, found through PYTHONPATH), talking over the real pipe.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dlm_git.childproc import (
    MAX_REPORT_BYTES,
    ChildError,
    Listener,
    ProtocolError,
    call_child,
    report,
)

ROGUE = """
import os, sys, time
from typing import Any
from dlm_git.childproc import report, serve

def handle(req: dict[str, Any]) -> int:
    mode, fd = req["mode"], int(sys.argv[2])
    open(req["pid_file"], "w").write(str(os.getpid()))
    if mode == "many":
        for i in range(req["n"]):
            assert report({"line": f"report {i}"})
        return req["n"]
    if mode == "bad":
        os.write(fd, b'{"nope": 1}\\n')
    if mode == "endless":
        for _ in range(req["n"] // 65536):
            os.write(fd, b"x" * 65536)
    if mode == "stderr":
        sys.stderr.write("noise " * 1000 + "\\n")
        for _ in range(req["n"]):
            sys.stderr.write("noise " * 1000 + "\\n")
        sys.stderr.write("last words\\n")
        sys.stderr.flush()
        os._exit(3)
    time.sleep(300)
    return 0

sys.exit(serve(sys.argv[1:], dict[str, Any], handle, "rogue"))
"""


@dataclass(frozen=True)
class Said:
    line: str


def rogue(tmp_path: Path, mode: str, n: int = 0) -> tuple[int, list[str], Path]:
    """Ask the rogue child `mode`; (its answer, the reports heard, its pid file)."""
    (tmp_path / "rogue.py").write_text(ROGUE, "utf-8")
    pid_file = tmp_path / "pid"
    heard: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    request = {"mode": mode, "n": n, "pid_file": str(pid_file)}
    got = call_child(
        "rogue",
        request,
        int,
        env=env,
        what="the child",
        listen=Listener(Said, lambda said: heard.append(said.line)),
    )
    return got, heard, pid_file


def gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_reports_are_heard_in_order_as_they_come(tmp_path: Path) -> None:
    """Far more than a pipe holds: a parent that read them only at the end would hang."""
    n = 40_000
    got, heard, _ = rogue(tmp_path, "many", n)
    assert got == n and heard == [f"report {i}" for i in range(n)]


@pytest.mark.parametrize(
    ("mode", "n", "line"),
    [
        ("bad", 0, "the child's report: unknown key 'nope', missing key 'line'"),
        ("endless", 3 * MAX_REPORT_BYTES, f"is longer than {MAX_REPORT_BYTES} bytes"),
    ],
)
def test_a_report_not_of_its_type_stops_the_child(
    tmp_path: Path, mode: str, n: int, line: str
) -> None:
    started = time.monotonic()
    with pytest.raises(ProtocolError) as info:
        rogue(tmp_path, mode, n)
    assert line in info.value.one_line()
    assert time.monotonic() - started < 60  # killed, not waited for (it sleeps 300 s)
    assert gone(tmp_path / "pid")


def test_a_long_stderr_gives_its_last_line(tmp_path: Path) -> None:
    with pytest.raises(ChildError) as info:
        rogue(tmp_path, "stderr", 2000)  # 12 MB
    assert info.value.one_line() == "the child exited 3 without an answer: last words"
    assert info.value.exit_code == 3


def test_a_process_no_parent_listens_to_reports_nothing() -> None:
    assert report(Said("unheard")) is False
