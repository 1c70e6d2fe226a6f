"""A training in another process shows the user what the same training shows in the
user's process: the plan line and progress when the user's stderr is a terminal (and not
`--no-progress`), the `.gitignore` line once, nothing progress-like in a pipe.

The other processes: a training child, the path a library caller meets (torch is
imported before dlm-git trains, so the kernel settings can no longer be pinned in that
process and the training runs in `python -m dlm_git.train.child`, whose stderr is never
a terminal); and the ranks of `--nproc 2`, whose stderr is a log file, rank 0 alone
reporting its steps. Real trainings on a real pseudo-terminal (`tests/support/terminal.py`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.demo import DEVICE_ARGS, write_demo
from tests.support.env import subprocess_env
from tests.support.gitrepo import init_repo
from tests.support.lockedits import drift, set_field
from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.slow

STEPS = 6
PROGRESS = "\r\x1b[K  step "
LINE = re.compile(
    r"(\d+)/(\d+)  loss (\d+\.\d{4}|nan)  ([\d,]+) tok/s  (ETA \d+:\d\d|\d+:\d\d elapsed)"
)
IGNORED = ".gitignore: added /adapter, /segments, /tokens, /run.json"
TORCH_FIRST = (
    "import sys, torch\n"
    "from dlm_git.numerics.activate import can_run_in_process\n"
    "assert not can_run_in_process({})  # torch runs here unpinned: training needs a child\n"
    "from dlm_git.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
"""A caller that imported torch first, then runs the CLI in the same process."""


def train_after_torch(repo: Path, *flags: str) -> list[str]:
    write_demo(repo / "demo", max_steps=str(STEPS), sequence_len="64", micro_batch_size="2")
    return [sys.executable, "-c", TORCH_FIRST, "train", "demo", *DEVICE_ARGS, "-q", *flags]


def train_on_ranks(repo: Path, *, after_torch: bool) -> list[str]:
    write_demo(repo / "demo", max_steps=str(STEPS), sequence_len="64", micro_batch_size="1")
    head = [sys.executable, "-c", TORCH_FIRST] if after_torch else ["dlm-git"]
    return [*head, "train", "demo", *DEVICE_ARGS, "-q", "--threads", "1", "--nproc", "2"]


def last_rate(screen: str) -> int:
    """The tokens/s of the last progress line."""
    last = LINE.match(screen.split(PROGRESS)[-1])
    assert last is not None, screen[-3000:]
    return int(last[4].replace(",", ""))


def steps_shown(screen: str) -> list[int]:
    parts = screen.split(PROGRESS)[1:]
    return [int(m[1]) for part in parts if (m := LINE.match(part)) is not None]


def test_a_training_child_shows_plan_and_progress_on_the_users_terminal(
    tmp_path: Path, base_cache: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    code, screen = run_on_terminal(train_after_torch(repo), repo, subprocess_env())
    assert code == 0, screen[-3000:]
    assert re.search(rf"train demo/demo\.dlm: {STEPS} steps \([\d.]+ epochs\)", screen), screen
    shown = steps_shown(screen)
    assert shown and shown == sorted(shown) and shown[-1] == STEPS, screen[-3000:]
    assert screen.split(PROGRESS)[-1].split("\n")[0].endswith("elapsed\r")  # ended, one line
    assert screen.count(IGNORED) == 1, screen[-3000:]
    assert "Traceback" not in screen
    # on the child's clock, not this process's: the last line's rate is the record's
    record = json.loads((repo / "demo" / "run.json").read_text())
    assert abs(last_rate(screen) - record["tokens_per_second"]) <= 0.55, record


def test_no_progress_from_a_training_child_with_no_progress(
    tmp_path: Path, base_cache: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    args = train_after_torch(repo, "--no-progress")
    code, screen = run_on_terminal(args, repo, subprocess_env())
    assert code == 0, screen[-3000:]
    assert PROGRESS not in screen and "estimate" not in screen, screen[-3000:]
    assert screen.count(IGNORED) == 1, screen[-3000:]


def test_a_training_child_in_a_pipe_says_the_ignore_line_only(
    tmp_path: Path, base_cache: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    proc = subprocess.run(
        train_after_torch(repo),
        cwd=repo,
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stderr and " step " not in proc.stderr, proc.stderr
    assert "estimate" not in proc.stderr, proc.stderr
    assert proc.stderr.count(IGNORED) == 1, proc.stderr


def test_a_lock_warn_from_a_training_child_comes_once_before_its_plan(
    tmp_path: Path, base_cache: Path
) -> None:
    """As a training here says it: when the lock is decided, not after the training."""
    repo = init_repo(tmp_path / "repo")
    args = train_after_torch(repo)
    first = subprocess.run(
        args, cwd=repo, env=subprocess_env(), stdin=subprocess.DEVNULL, capture_output=True
    )
    assert first.returncode == 0, first.stderr
    drift(repo / "demo", set_field("seed", 7))
    code, screen = run_on_terminal(args, repo, subprocess_env())
    assert code == 0, screen[-3000:]
    lines = screen.splitlines()
    warns = [i for i, line in enumerate(lines) if "WARN seed changed: 7 -> 42" in line]
    plans = [i for i, line in enumerate(lines) if line.startswith("train demo/demo.dlm: ")]
    assert len(warns) == 1 and len(plans) == 1 and warns[0] < plans[0], screen[-3000:]
    assert IGNORED not in screen  # the first training added the lines


@pytest.mark.parametrize("after_torch", [False, True], ids=["launcher", "launcher-in-child"])
def test_rank_0s_progress_is_drawn_by_its_launcher(
    after_torch: bool, tmp_path: Path, base_cache: Path
) -> None:
    """`--nproc 2`: one plan line and one progress line, from rank 0 alone (no step is
    drawn twice), also when the launcher is itself a training child."""
    repo = init_repo(tmp_path / "repo")
    args = train_on_ranks(repo, after_torch=after_torch)
    code, screen = run_on_terminal(args, repo, subprocess_env())
    assert code == 0, screen[-3000:]
    assert screen.count(f"train demo/demo.dlm: {STEPS} steps") == 1, screen[-3000:]
    shown = steps_shown(screen)
    assert shown and shown == sorted(set(shown)) and shown[-1] == STEPS, screen[-3000:]
    assert screen.split(PROGRESS)[-1].split("\n")[0].endswith("elapsed\r")
    assert screen.count(IGNORED) == 1 and "Traceback" not in screen, screen[-3000:]
    # on rank 0's loop seconds (the record's `rank0.loop_seconds`), not the launcher's
    record = json.loads((repo / "demo" / "run.json").read_text())
    tokens = json.loads((repo / "demo" / "metrics.json").read_text())["tokens_trained"]
    rate = tokens / record["rank0"]["loop_seconds"]
    assert last_rate(screen) == pytest.approx(rate, rel=0.01), (tokens, record)
