"""A shared build (`tests/support/shared.py`) is made once per run whatever the processes
asking for it (pytest-xdist's workers), and a build that failed is made again, never
reused half done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.shared import build_once

# One process asking for the build: it appends its pid to `built` when it builds, and
# holds the build long enough for the other process to ask meanwhile.
ASK = """
import os, sys, time
from pathlib import Path
from tests.support.shared import build_once

def build(dest: Path) -> None:
    with open(sys.argv[2], "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    time.sleep(1.0)
    dest.mkdir()
    (dest / "result").write_text("built")

print(build_once(Path(sys.argv[1]), "thing", build))
"""


def test_two_processes_asking_at_once_get_one_build(tmp_path: Path) -> None:
    built = tmp_path / "built"
    argv = [sys.executable, "-c", ASK, str(tmp_path), str(built)]
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, text=True) for _ in "ab"]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [str(tmp_path / "thing")] * 2
    assert len(built.read_text().split()) == 1  # the other process waited and reused it
    assert (tmp_path / "thing" / "result").read_text() == "built"


def test_a_build_is_made_once_and_reused(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(dest: Path) -> None:
        calls.append(dest)
        dest.mkdir()

    first = build_once(tmp_path, "thing", build)
    assert build_once(tmp_path, "thing", build) == first
    assert calls == [first]


def test_a_build_that_failed_is_made_again_from_nothing(tmp_path: Path) -> None:
    def broken(dest: Path) -> None:
        dest.mkdir()
        (dest / "half").write_text("left by a failed build")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError):
        build_once(tmp_path, "thing", broken)
    assert not (tmp_path / "thing.ready").exists()

    def build(dest: Path) -> None:
        assert not dest.exists(), "the failed build's directory was reused"
        dest.mkdir()
        (dest / "whole").write_text("complete")

    dest = build_once(tmp_path, "thing", build)
    assert sorted(p.name for p in dest.iterdir()) == ["whole"]
