"""Run a command on a real pseudo-terminal (Python's `pty`): stdin, stdout and stderr are
the terminal, so `isatty()` is true in the child as it is for a user at a shell.

One helper for every test that needs what a program does on a terminal (progress bars,
colour, prompts); the output comes back as the terminal received it (escapes included).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROWS, COLUMNS = 24, 100


def run_on_terminal(
    args: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 600
) -> tuple[int, str]:
    """(exit code, everything written to the terminal) of `args` run on a fresh pty."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    try:
        proc = subprocess.Popen(
            list(args), cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True
        )
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
        else:
            proc.kill()
            raise TimeoutError(f"{' '.join(args)} ran past {timeout} s on the terminal")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")
