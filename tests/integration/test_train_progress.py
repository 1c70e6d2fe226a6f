"""What a long training shows on a terminal: a plan line, then one progress line (step,
loss, tokens/s, ETA) rewritten in place, at most 4 times a second, ending at the last
step, whose rate is the run record's; under `dvc repro` too, whose stage command passes
`--quiet`. Real trainings on a real pseudo-terminal (`tests/support/terminal.py`);
nothing is shown in a pipe (`tests/integration/test_train_terminal.py` checks that, and
that no record changes).
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

from dlm_git.train.progress import MAX_RATE
from tests.support.demo import DEVICE_ARGS, write_demo
from tests.support.env import run, subprocess_env
from tests.support.gitrepo import init_repo
from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.slow

PROGRESS = "\r\x1b[K  step "
LINE = re.compile(
    r"(\d+)/(\d+)  loss (\d+\.\d{4}|nan)  ([\d,]+) tok/s  (ETA \d+:\d\d|\d+:\d\d elapsed)"
)
"""After `PROGRESS`: step/total, the step's loss (nan: a step without loss tokens), the
rate and the ETA, or at the last step the time it took."""
STEPS = 12


def progress_lines(screen: str) -> list[re.Match[str]]:
    return [m for part in screen.split(PROGRESS)[1:] if (m := LINE.match(part)) is not None]


def test_plan_and_progress_on_a_terminal(tmp_path: Path, base_cache: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    write_demo(repo / "demo", max_steps=str(STEPS), sequence_len="64", micro_batch_size="2")
    args = [sys.executable, "-m", "dlm_git", "train", "demo", *DEVICE_ARGS, "--quiet"]
    code, screen = run_on_terminal(args, repo, subprocess_env())
    assert code == 0, screen
    assert re.search(
        rf"train demo/demo\.dlm: {STEPS} steps \([\d.]+ epochs\), ~[\d,]+ tokens", screen
    )
    shown = progress_lines(screen)
    assert shown, screen[-2000:]
    steps = [int(m[1]) for m in shown]
    assert steps == sorted(steps) and steps[-1] == STEPS and {int(m[2]) for m in shown} == {STEPS}
    assert shown[-1][5].endswith("elapsed") and all(m[5].startswith("ETA") for m in shown[:-1])
    assert screen.split(PROGRESS)[-1].split("\n")[0].endswith("elapsed\r")  # ended, one line
    record = json.loads((repo / "demo" / "run.json").read_text())
    # throttled: no more lines than 4 a second over the training, plus the last step's
    assert len(shown) <= math.ceil(record["train_seconds"] * MAX_RATE) + 1, len(shown)
    # tokens/s on the loop's own seconds, the record's: the last line's rate is the
    # recorded one, however loaded the machine (only the rounding differs)
    rate = int(shown[-1][4].replace(",", ""))
    assert abs(rate - record["tokens_per_second"]) <= 0.55, (rate, record)
    assert "adapter sha256" not in screen  # --quiet: no summary


def test_progress_under_dvc_repro_on_a_terminal(tmp_path: Path, base_cache: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    run(["dlm-git", "init", "--doc", "demo", "--no-hooks"], repo)
    doc = repo / "demo" / "demo.dlm"
    doc.write_text(doc.read_text().replace("max_steps: 20", "max_steps: 3"))
    code, screen = run_on_terminal(["dvc", "repro"], repo, subprocess_env())
    assert code == 0, screen[-3000:]
    assert "train demo/demo.dlm: 3 steps" in screen, screen[-3000:]
    assert [int(m[1]) for m in progress_lines(screen)][-1:] == [3], screen[-3000:]
