"""The CLI's start: `dlm-git log`, `diff`, `show` and `verify` (hash level) on a
1-document repository, against the interpreter's own start (`python -c pass`).

Builds one git + DVC repository in a temp directory with one really trained tiny document
(`hook_latency.build`: the pipeline's own stage commands run in this process, recorded
with `dvc commit`, committed through the hooks), then edits, retrains and commits it
again, so `diff` has two commits to compare. Timed, alternating round by round, REPS
times each after one untimed round (medians), each as a user runs it (the venv's
`dlm-git` console script, bytecode cached under a temporary PYTHONPYCACHEPREFIX):

- `dlm-git log --json`
- `dlm-git diff HEAD~1 HEAD`
- `dlm-git show d00`
- `dlm-git verify HEAD` (hash level)
- `python -c pass`: the floor under any Python command, measured in the same rounds;
- python + parser: the interpreter importing the CLI and building one command's parser
  without running it (`dlm_git.cli.build_app`: plain click, `dlm_git.clidecl`;
  `FRAMEWORK`), the floor under every command of this CLI as written.

Goal: each command <= 15x `python -c pass` (issue 28). Prints the ratio and PASS/FAIL per
command (by wall time), each beside its CPU time (user + system of the process and its
children, `_timing.child_cpu`), which the load of a shared machine inflates far less;
then (unless --no-profile) the heaviest top-level imports of each command (`-X
importtime`). Always exits 0.

    .venv/bin/python benchmarks/cli_start.py [--reps 15] [--keep DIR] [--no-profile]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import hook_latency as hl
from _timing import alternate, bench_root, child_cpu, load, medians, timed, verdict

GOAL = 15.0
FRAMEWORK = "from dlm_git.cli import build_app; build_app(['verify'])"
COMMANDS = {
    "log": ["log", "--json"],
    "diff": ["diff", "HEAD~1", "HEAD"],
    "show": ["show", "d00"],
    "verify": ["verify", "HEAD"],
}


LABELS = {"python": "python -c pass", "parser": "python + parser"}


def prepare(root: Path) -> Path:
    """A committed 1-document repository with two trained commits (reused with --keep)."""
    repo = root / "docs1"
    marker = repo / ".git" / "dlm-git-bench-ready"
    if marker.is_file():
        return repo
    repo = hl.build(root, 1)
    hl.stage_change(repo)
    hl.run(repo, "git", "commit", "-q", "-m", "retrained")
    marker.write_text("ready\n")
    return repo


def argv_of(key: str) -> list[str]:
    if key == "python":
        return [sys.executable, "-c", "pass"]
    if key == "parser":
        return [sys.executable, "-c", FRAMEWORK]
    return [str(hl.BIN / "dlm-git"), *COMMANDS[key]]


def measure(repo: Path, reps: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(wall ms, CPU ms) of each case, REPS samples each (see the module)."""
    e = hl.env()
    cpu: dict[str, list[float]] = {}

    def sample(key: str, round_: int) -> float:
        before = child_cpu()
        seconds, proc = timed(
            lambda: subprocess.run(argv_of(key), cwd=repo, capture_output=True, env=e)
        )
        if proc.returncode != 0:
            out = proc.stderr.decode("utf-8", "replace")
            raise SystemExit(f"{' '.join(argv_of(key))} failed ({proc.returncode}):\n{out}")
        if round_ > 0:  # the warm-up round is not counted
            cpu.setdefault(key, []).append((child_cpu() - before) * 1000.0)
        return seconds * 1000.0

    return alternate(["python", "parser", *COMMANDS], reps, sample), cpu


def profile(repo: Path, key: str, top: int = 8) -> None:
    """The heaviest top-level imports of one command (`-X importtime`, cumulative us)."""
    argv = [sys.executable, "-X", "importtime", "-m", "dlm_git", *COMMANDS[key]]
    proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True, env=hl.env())
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        outer = len(parts) == 3 and not parts[2].startswith("  ")  # one space: top level
        if line.startswith("import time:") and outer and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    total = sum(cum for cum, _ in rows) / 1000.0
    print(f"  {key}: {len(rows)} top-level imports, {total:.0f} ms; heaviest (us):")
    for cum, name in sorted(rows, reverse=True)[:top]:
        print(f"    {cum:>8}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--keep", type=Path, help="build here and keep (or reuse) the repo")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    root, tmp = bench_root(args.keep, "dlm-git-cli-bench-")
    hl.PYC_PREFIX = root / "pycache"
    print(f"{os.cpu_count()} CPUs, load average {load()}; bytecode cached in {hl.PYC_PREFIX}")
    try:
        repo = prepare(root)
        times, cpu = measure(repo, args.reps)
        med, med_cpu = medians(times), medians(cpu)
        floor, floor_cpu = med["python"], med_cpu["python"]
        print(f"median (min-max) of {args.reps} runs, load average {load()}; wall, then CPU:")
        for key, samples in times.items():
            label = LABELS.get(key) or "dlm-git " + " ".join(COMMANDS[key])
            ratio = "" if key == "python" else f"  {med[key] / floor:5.1f}x"
            spread = f"({min(samples):.0f}-{max(samples):.0f})"
            cpu_ratio = "" if key == "python" else f"  {med_cpu[key] / floor_cpu:5.1f}x"
            print(f"  {label:<28} {med[key]:>6.0f} ms  {spread:<11}{ratio:<8}", end="")
            print(f"  cpu {med_cpu[key]:>5.0f} ms{cpu_ratio}")
        print(f"goal: each command <= {GOAL:.0f}x python -c pass ({GOAL * floor:.0f} ms here)")
        for key in COMMANDS:
            ratio = med[key] / floor
            by_cpu = f"(cpu {med_cpu[key] / floor_cpu:.1f}x)"
            print(f"  {verdict(ratio <= GOAL)}  {key}: {ratio:.1f}x <= {GOAL:.0f}x {by_cpu}")
        if not args.no_profile:
            print("where the time goes (imports):")
            for key in COMMANDS:
                profile(repo, key)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
