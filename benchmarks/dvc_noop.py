"""Benchmark: a no-op `dvc repro` against `dvc status`, on a pipeline of 3 documents.

Sets up a temp git repository with `dlm-git init --doc d0|d1|d2 --no-hooks` (the starter
document on the built-in tiny base), runs `dvc repro` once, then times, alternating round
by round (`_timing.alternate`, the first round not counted):
  status  `dvc status`
  repro   `dvc repro` (nothing changed: every stage should be skipped)
Prints the medians, the ratio repro/status against the goal (<= 1.5x), whether `dvc status`
says everything is up to date, which stages a no-op repro still ran, and the load. Not a
test: it always exits 0.

Run: .venv/bin/python benchmarks/dvc_noop.py [--docs N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate, load, medians, timed, verdict

GOAL = 1.5
UP_TO_DATE = "Data and pipelines are up to date."


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("GIT_AUTHOR_NAME", "bench")
    env.setdefault("GIT_AUTHOR_EMAIL", "bench@example.invalid")
    env.setdefault("GIT_COMMITTER_NAME", "bench")
    env.setdefault("GIT_COMMITTER_EMAIL", "bench@example.invalid")
    return env


def _run(repo: Path, *cmd: str) -> str:
    proc = subprocess.run(
        list(cmd),
        cwd=repo,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}")
    return proc.stdout


def _dvc(repo: Path, *args: str) -> str:
    return _run(repo, sys.executable, "-m", "dvc", *args)


def setup(repo: Path, docs: int) -> float:
    """The repository, reproduced once; the seconds of that first `dvc repro`."""
    repo.mkdir()
    _run(repo, "git", "init", "-q")
    for i in range(docs):
        _run(repo, sys.executable, "-m", "dlm_git", "init", "--doc", f"d{i}", "--no-hooks")
    seconds, _ = timed(lambda: _dvc(repo, "repro"))
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-q", "-m", "reproduced")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        first = setup(repo, args.docs)
        outputs: dict[str, str] = {}

        def sample(case: str, _round: int) -> float:
            seconds, out = timed(lambda: _dvc(repo, case))
            outputs[case] = out
            return seconds

        got = medians(alternate(["status", "repro"], args.repeat, sample))
        ran = [ln for ln in outputs["repro"].splitlines() if ln.startswith("Running stage")]
        clean = outputs["status"].strip() == UP_TO_DATE
    ratio = got["repro"] / got["status"]
    print(f"documents            {args.docs}")
    print(f"first dvc repro      {first:.2f} s")
    print(f"dvc status (median)  {got['status']:.2f} s  up to date: {clean}")
    print(f"no-op repro (median) {got['repro']:.2f} s  stages still run: {len(ran)}")
    for line in ran:
        print(f"  {line}")
    print(f"repro / status       {ratio:.2f}x  goal <= {GOAL}x  {verdict(ratio <= GOAL)}")
    print(f"load                 {load()}")


if __name__ == "__main__":
    main()
