"""A dlm-git started with its standard output closed (`>&-`: Python makes `sys.stdout`
None) says so in one line on stderr and exits 1, as the machine's refusal: never a
traceback. (With stderr closed too there is nowhere to say it: `output.error_line`.)"""

from __future__ import annotations

import subprocess
import sys


def run_closed(redirect: str) -> subprocess.CompletedProcess[str]:
    script = f'exec "$0" -m dlm_git --version {redirect}'
    return subprocess.run(
        ["sh", "-c", script, sys.executable], capture_output=True, text=True, timeout=60
    )


def test_a_closed_stdout_is_one_line_and_exit_1() -> None:
    proc = run_closed(">&-")
    assert proc.returncode == 1
    assert proc.stderr == (
        "dlm-git: standard output is closed (hint: run it with standard output and"
        " standard error open, not closed with >&-)\n"
    )
