"""`dlm-git log` on a long history, against `git log` over the same paths (same run).

Builds a temp repository holding `examples/demo` (document, notes and its committed
records), then COMMITS - 1 more commits, each rewriting the records as a retraining with an
accepted lock would (a new adapter sha256 in the manifest, a lock whose `supersedes` names
the lock it replaces, every fifth commit a changed thread count), and times, medians of
REPS runs each:

- baseline: `git log --oneline --first-parent -- <doc>/dlm.lock <doc>/manifest.json ...`
  as a subprocess (what git alone needs to list the commits);
- ours: `dlm-git log --json` as a subprocess (interpreter start, CLI import, the lineage
  with every record, acceptance and verdict), and `lineage()` in-process.

    .venv/bin/python benchmarks/log_history.py [--commits 200] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import median_of

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
RECORDS = ("dlm.lock", "manifest.json", "dlm.sig", "verify.json")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x.invalid"}
    env.update(GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@x.invalid")
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True)
    return proc.stdout.decode()


def build(repo: Path, commits: int) -> None:
    from dlm_git.hashing import canonical_json, sha256_bytes

    git(repo, "init", "-q")
    shutil.copytree(DEMO, repo / "demo", ignore=shutil.ignore_patterns("adapter", "tokens"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "train demo")
    lock_path, manifest_path = repo / "demo" / "dlm.lock", repo / "demo" / "manifest.json"
    for i in range(1, commits):
        old = lock_path.read_bytes()
        lock = json.loads(old)
        lock["supersedes"] = sha256_bytes(old)
        lock["determinism_flags"]["threads"] = 1 + (i // 5) % 2
        lock_path.write_bytes(canonical_json(lock))
        manifest = json.loads(manifest_path.read_bytes())
        manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = sha256_bytes(
            f"adapter {i}".encode()
        )
        manifest_path.write_bytes(canonical_json(manifest))
        git(repo, "commit", "-q", "-a", "-m", f"retrain {i}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dlm-git-bench-log-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        started = time.perf_counter()
        build(repo, args.commits)
        print(f"{args.commits} commits built in {time.perf_counter() - started:.1f} s")
        paths = [f"demo/{name}" for name in RECORDS]
        dlm_git = str(Path(sys.executable).parent / "dlm-git")

        def baseline() -> None:
            git(repo, "log", "--oneline", "--first-parent", "--", *paths)

        def ours_cli() -> None:
            proc = subprocess.run([dlm_git, "log", "--json"], cwd=repo, capture_output=True)
            assert proc.returncode == 0, proc.stderr
            entries = json.loads(proc.stdout)["documents"][0]["entries"]
            assert len(entries) == args.commits

        from dlm_git import gitio
        from dlm_git.history.log import lineage

        head = gitio.resolve_commit("HEAD", repo) or ""

        def ours_inprocess() -> None:
            assert lineage(repo, head, "demo", None).total == args.commits

        base = median_of(baseline, args.reps)
        cli = median_of(ours_cli, args.reps)
        inproc = median_of(ours_inprocess, args.reps)
        print(f"git log (baseline)        {base * 1000:8.1f} ms")
        print(f"dlm-git log --json (CLI)  {cli * 1000:8.1f} ms  ratio {cli / base:.1f}x")
        print(f"lineage() in-process      {inproc * 1000:8.1f} ms  ratio {inproc / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
