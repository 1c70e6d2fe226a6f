"""One process against N data-parallel ranks on this machine (CPU, gloo): tokens per second.

Each variant trains a fresh copy of `examples/demo` with `dlm-git train` as a subprocess
(as a user runs it), on the same cores: 1 process x C threads against N ranks x C/N threads,
and the same number of micro-batches (N ranks take max_steps / N steps, each reading
N micro-batches). Two throughputs per run, both from its `run.json`:

- loop: tokens / seconds inside the training loop (rank 0's loop for N ranks): the
  arithmetic and the all-reduces, what data parallelism is meant to speed up;
- train: tokens / seconds of the whole training phase (for N ranks: launching them,
  their imports, model builds and rendezvous too).

The ratio printed is ranks / one process (baseline measured in the same run). On 2 cores
expect little or no gain: the point of `--nproc` here is correctness, not speed.

    .venv/bin/python benchmarks/distributed_train.py [--nproc 2] [--cores 2] [--steps 24]
        [--reps 3] [--base tiny|smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.train_overhead import demo_copy  # noqa: E402


def train_once(doc: Path, nproc: int, threads: int) -> dict[str, float]:
    argv = [str(Path(sys.executable).parent / "dlm-git"), "train", str(doc), "-q"]
    argv += ["--device", "cpu", "--ignore-lock", "--segment-every", "0"]
    argv += ["--nproc", str(nproc), "--threads", str(threads)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"training failed: {proc.stderr.strip()}")
    run = json.loads((doc.parent / "run.json").read_text("utf-8"))
    metrics = json.loads((doc.parent / "metrics.json").read_text("utf-8"))
    tokens = float(metrics["tokens_trained"])
    loop = float(run.get("rank0", {}).get("loop_seconds") or run["train_seconds"])
    return {"loop": tokens / loop, "train": tokens / float(run["train_seconds"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--steps", type=int, default=24, help="steps of the one process")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--base", default="tiny")
    args = parser.parse_args(argv)
    if args.steps % args.nproc:
        raise SystemExit("--steps must be a multiple of --nproc")
    with tempfile.TemporaryDirectory(prefix="dlm-git-bench-ddp-") as tmp:
        workdir = Path(tmp)
        base = "builtin:tiny"
        if args.base != "tiny":
            from dlm_git.base.build import Shape, build_base, family_named

            build_base(family_named(args.base), Shape(), out=workdir / "base")
            base = "../../base"
        variants = {
            "1 process": (1, args.cores, args.steps),
            f"{args.nproc} ranks": (
                args.nproc,
                max(1, args.cores // args.nproc),
                args.steps // args.nproc,
            ),
        }
        print(
            f"base {args.base}, {args.cores} cores, {args.steps} micro-batch steps,"
            f" {os.cpu_count()} CPUs visible"
        )
        counter = iter(range(1, 10_000))

        def sample(name: str, rep: int) -> dict[str, float]:
            nproc, threads, steps = variants[name]
            doc = demo_copy(workdir, steps, next(counter), base)
            measured = train_once(doc, nproc, threads)
            if rep:
                print(
                    f"  rep {rep} {name:9s} loop {measured['loop']:9.1f} tok/s"
                    f"   train {measured['train']:9.1f} tok/s"
                )
            return measured

        results = alternate(variants, args.reps, sample)  # the first round: untimed warm-up
        one, ranks = (results[name] for name in variants)
        for kind in ("loop", "train"):
            a = statistics.median(r[kind] for r in one)
            b = statistics.median(r[kind] for r in ranks)
            print(
                f"{kind:5s} median: 1 process {a:9.1f} tok/s, {args.nproc} ranks {b:9.1f} tok/s,"
                f" ratio {b / a:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
