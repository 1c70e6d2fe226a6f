"""What evaluation costs beside training: `dlm-git eval` against `dlm-git train`.

For the demo document (builtin tiny base) and for the demo put on the SmolLM2-135M shape
(`dlm-git base build smollm2-135m`, random weights, in a temporary Hugging Face cache
standing in for the registry key's pin), each with a held-out split
(`training.val_fraction: 0.25`) so the val losses are computed too:

- `train`: a fresh `dlm-git train` process (wall seconds, median of R runs);
- `eval`: a fresh `dlm-git eval` process on that adapter (wall seconds, median of R),
  and the ratio eval / train (the baseline measured in the same run);
- `replay`: `dlm-git verify HEAD --level replay` of the committed result (what an auditor
  pays to re-check the adapter and, where verify replays it, the evaluation), once.

Runs one process at a time. The machine's load is printed: the numbers are this
machine's. Not a test: it always exits 0.

    .venv/bin/python benchmarks/eval_cost.py [--repeat 3] [--steps 8] [--no-135m]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import load, timed

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
KEY = "smollm2-135m"


def env(hub: Path | None) -> dict[str, str]:
    from tests.support.env import subprocess_env

    extra = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"} if hub is not None else {}
    return subprocess_env(**extra)


def run(cmd: list[str], cwd: Path, environ: dict[str, str]) -> float:
    seconds, proc = timed(
        lambda: subprocess.run(cmd, cwd=cwd, env=environ, capture_output=True, text=True)
    )
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and "verify" not in cmd):
        raise SystemExit(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout)[-800:]}")
    return seconds


def dlm(*args: str) -> list[str]:
    return [sys.executable, "-m", "dlm_git", *args]


def document(work: Path, name: str, base: str | None, steps: int) -> Path:
    """The demo document (on `base` if given) with a held-out split, in a git repository."""
    repo = work / name
    shutil.copytree(DEMO / "notes", repo / "demo" / "notes")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    lines = []
    for line in (DEMO / "demo.dlm").read_text("utf-8").splitlines():
        if line.startswith("base_model:") and base is not None:
            line = f"base_model: {base}"
        elif line.startswith("  max_steps:"):
            line = f"  max_steps: {steps}"
        elif line.startswith("  seed:"):
            lines.append(line)
            line = "  val_fraction: 0.25"
        lines.append(line)
    (repo / "demo" / "demo.dlm").write_text("\n".join(lines) + "\n", "utf-8")
    return repo


def build(hub: Path) -> None:
    from dlm_git.base.registry import REGISTRY
    from tests.support.hub import stand_in

    cmd = dlm("base", "build", KEY, "--hf-cache", str(hub), "--repo-id", REGISTRY[KEY].repo_id)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"build failed: {proc.stderr.strip()[-500:]}")
    stand_in(hub, KEY)


def measure(label: str, repo: Path, environ: dict[str, str], repeat: int) -> None:
    trains, evals = [], []
    for _ in range(repeat):
        trains.append(run(dlm("train", "demo", "-q", "--device", "cpu"), repo, environ))
        evals.append(run(dlm("eval", "demo"), repo, environ))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    commit = [
        "git",
        "-c",
        "user.name=b",
        "-c",
        "user.email=b@example.invalid",
        "commit",
        "-qm",
        "t",
    ]
    subprocess.run(commit, cwd=repo, check=True, capture_output=True)
    replay = run(dlm("verify", "HEAD", "--level", "replay", "--doc", "demo"), repo, environ)
    train_s, eval_s = statistics.median(trains), statistics.median(evals)
    print(f"{label}")
    print(f"  train   {train_s:6.2f} s (median of {repeat})")
    print(f"  eval    {eval_s:6.2f} s (median of {repeat})  eval/train {eval_s / train_s:.2f}x")
    print(f"  replay  {replay:6.2f} s (verify --level replay, once)  load {load()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--135m", dest="big", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    print(f"load {load()}")
    with tempfile.TemporaryDirectory(prefix="dlm-bench-eval-") as tmp:
        work = Path(tmp)
        repo = document(work, "tiny", None, 24)
        measure("demo (builtin:tiny, 24 steps)", repo, env(None), args.repeat)
        if args.big:
            build(work / "hub")
            repo = document(work, "135m", KEY, args.steps)
            measure(f"{KEY} shape ({args.steps} steps)", repo, env(work / "hub"), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
