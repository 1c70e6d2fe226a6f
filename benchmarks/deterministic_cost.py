"""Cost of the deterministic set vs the fast path, training LoRA on a real-shaped base.

Each run is a fresh process (cuBLAS and the CPU libraries read their settings when they
initialise), alternating between the two modes, REPS times each:

- deterministic: what `dlm-git train` applies (`numerics.prepare.prepare`: the numerics
  profile's pins, deterministic algorithms; on CUDA also `CUBLAS_WORKSPACE_CONFIG`,
  cuDNN deterministic, no cuDNN benchmark, TF32 off);
- fast: nothing pinned, deterministic algorithms off; on CUDA TF32 on for matmul and
  cuDNN, cuDNN benchmark on.

Both train the same model (dlm-git's `build_model`: the base with fresh LoRA layers) on
the same token stream (the demo document) with dlm-git's own loop, for STEPS optimizer
steps after WARMUP untimed ones, and report tokens/s. Prints the ratio fast / deterministic
(goal on CUDA: the deterministic set costs at most 10%, i.e. ratio <= 1.10). Always exits 0.

    .venv/bin/python benchmarks/deterministic_cost.py --device cuda [--base smollm2-135m]
    .venv/bin/python benchmarks/deterministic_cost.py --device cpu --steps 4 --reps 2
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

from _timing import alternate, medians

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
GOAL = 1.10


def child(mode: str, device: str, base_dir: Path, steps: int, warmup: int, precision: str) -> None:
    """One timed run in this (fresh) process; prints one JSON line."""
    from dlm_git.numerics.activate import activate
    from dlm_git.numerics.plan import plan
    from dlm_git.numerics.prepare import prepare

    if mode == "deterministic":
        run_plan = plan(device)
        activate(run_plan.env)
    import torch

    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.train.assemble import build_model, loop_config
    from dlm_git.train.loop import Trainer, make_trainer, train_loop
    from dlm_git.train.pipeline import tokenize_document

    doc = base_dir.parent / "work" / "demo" / "demo.dlm"
    loaded = load_document(doc)
    training = loaded.doc.frontmatter.training.model_copy(
        update={"max_steps": warmup + steps, "precision": precision}
    )
    if mode == "deterministic":
        env = prepare(training.seed, run_plan)
        dev = env.device
    else:
        dev = device
        torch.manual_seed(training.seed)
        torch.set_num_threads(int(os.environ.get("DLM_GIT_THREADS", "2")))
        if dev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            torch.backends.cudnn.benchmark = True
    resolved = resolve_base(
        loaded.doc.frontmatter.base_model, loaded.doc.directory, loaded.repo_root
    )
    tok = tokenize_document(loaded, resolved, use_cache=False)
    model, _ = build_model(resolved.path, training, dev)
    cfg = loop_config(training, dev, "fp32" if dev == "cpu" else precision, tok.pad_id)
    trainer: Trainer = make_trainer(model, len(tok.sequences), cfg)
    train_loop(model, tok.sequences, cfg, trainer=trainer, stop_at=warmup)
    if dev == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    result = train_loop(model, tok.sequences, cfg, trainer=trainer, stop_at=warmup + steps)
    if dev == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    print(json.dumps({"mode": mode, "tokens": result.tokens, "seconds": seconds}))


def prepare_work(workdir: Path, base: str, seq_len: int) -> Path:
    from dlm_git.base.build import Shape, build_base, family_named

    base_dir = workdir / "base"
    build_base(family_named(base), Shape(), out=base_dir)
    doc_dir = workdir / "work" / "demo"
    shutil.copytree(DEMO / "notes", doc_dir / "notes")
    text = (DEMO / "demo.dlm").read_text("utf-8")
    text = text.replace("base_model: builtin:tiny", "base_model: ../../base")
    text = text.replace("  sequence_len: 128", f"  sequence_len: {seq_len}")
    (doc_dir / "demo.dlm").write_text(text, "utf-8")
    subprocess.run(["git", "init", "-q", str(workdir / "work")], check=True)
    return base_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="deterministic set vs fast path, tokens/s")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--base", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--sequence-len", type=int, default=128)
    parser.add_argument("--child", choices=("deterministic", "fast"), help=argparse.SUPPRESS)
    parser.add_argument("--base-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.child:
        child(args.child, args.device, args.base_dir, args.steps, args.warmup, args.precision)
        return 0
    with tempfile.TemporaryDirectory(prefix="dlm-detcost-") as tmp:
        base_dir = prepare_work(Path(tmp), args.base, args.sequence_len)
        print(
            f"base {args.base}, device {args.device}, precision {args.precision}, "
            f"{args.steps} timed steps after {args.warmup}, {args.reps} reps"
        )

        def sample(mode: str, rep: int) -> float:
            cmd = [sys.executable, __file__, "--child", mode, "--base-dir", str(base_dir)]
            cmd += ["--device", args.device, "--steps", str(args.steps)]
            cmd += ["--warmup", str(args.warmup), "--precision", args.precision]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{mode} run failed:\n{proc.stderr[-2000:]}")
                raise SystemExit(0)
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            tps = float(row["tokens"] / row["seconds"])
            print(f"  rep {rep + 1} {mode:13s} {tps:10.1f} tok/s")
            return tps

        # each child warms up itself (--warmup steps): every round counts
        results = alternate(("deterministic", "fast"), args.reps, sample, warmup=0)
    best = {k: max(v) for k, v in results.items()}
    median = medians(results)
    ratio = best["fast"] / best["deterministic"]
    for mode in ("deterministic", "fast"):
        print(f"{mode:13s}: best {best[mode]:.1f} tok/s, median {median[mode]:.1f}")
    median_ratio = median["fast"] / median["deterministic"]
    print(f"ratio fast/deterministic (best): {ratio:.3f} (median {median_ratio:.3f})")
    verdict = "PASS" if ratio <= GOAL else "FAIL"
    print(f"{verdict}: goal <= {GOAL:.2f} (the deterministic set costs at most 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
