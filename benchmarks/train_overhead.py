"""Overhead of dlm-git's `train` path over a bare peft + torch loop (CPU).

In one process, with imports and the tiny base warmed up first:

- ours: `dlm_git.train.run.run_train` on a fresh temp copy of `examples/demo` with
  `max_steps` raised to STEPS (determinism setup, base identity hashing, tokenization,
  training, canonical adapter, lock, metrics, manifest, atomic writes);
- bare: the same tiny base, the same LoRA config, the same tokenized sequences (from
  `dlm_git.train.pipeline.tokenize_document`), the same batch size, data order and step
  count, in a plain loop that writes nothing.

Each variant runs once untimed, then REPS times (alternating); the best time is compared.
Target: ours is at most TARGET_OVERHEAD slower than bare on the tiny base, and at most
REAL_TARGET_OVERHEAD on a real-shaped base (`--base smollm2-135m`: built by
`dlm_git.base.build` into the temp dir, and named by the document as a local directory),
where the fixed costs (hashing, writing) shrink next to real compute.
Prints PASS/FAIL; always exits 0.

    .venv/bin/python benchmarks/train_overhead.py [--steps 40] [--reps 5] [--threads 2]
    .venv/bin/python benchmarks/train_overhead.py --base smollm2-135m --steps 8 --reps 3
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _timing import alternate

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
TARGET_OVERHEAD = 0.15
REAL_TARGET_OVERHEAD = 0.05


@dataclass(frozen=True)
class Timing:
    seconds: float
    tokens: int
    steps: int
    outside: float = 0.0
    """ours: wall time outside the training loop (run.json: wall - train seconds)."""
    snapshots: float = 0.0
    """ours: time the training thread spent on segment snapshots (run.json)."""


def demo_copy(workdir: Path, steps: int, index: int, base: str = "builtin:tiny") -> Path:
    """A fresh git repository holding the demo's inputs with `max_steps: steps`."""
    import subprocess

    from dlm_git.layout import OUTPUT_NAMES

    repo = workdir / f"run-{index}"
    # Only the inputs: a trained copy of the demo (lock, adapter, ...) must not leak in.
    shutil.copytree(DEMO, repo / "demo", ignore=shutil.ignore_patterns(*OUTPUT_NAMES, ".adapter.*"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    doc = repo / "demo" / "demo.dlm"
    text = doc.read_text("utf-8")
    lines = [
        f"  max_steps: {steps}" if line.startswith("  max_steps:") else line
        for line in text.split("\n")
    ]
    if not any(line.startswith("  max_steps:") for line in text.split("\n")):
        raise SystemExit("demo.dlm has no `  max_steps:` line to override")
    text = "\n".join(lines).replace("base_model: builtin:tiny", f"base_model: {base}")
    doc.write_text(text, "utf-8")
    return doc


def run_ours(doc: Path, threads: int, segment_every: int | None = None) -> Timing:
    from dlm_git.train.options import TrainOptions
    from dlm_git.train.run import run_train

    start = time.perf_counter()
    options = TrainOptions(device="cpu", threads=threads, quiet=True, segment_every=segment_every)
    outcome = run_train(doc, options)
    seconds = time.perf_counter() - start
    t, run = outcome.manifest.training, outcome.run_record
    outside = run["wall_seconds"] - run["train_seconds"]
    return Timing(seconds, t.tokens_trained, t.steps, outside, run.get("snapshot_seconds", 0.0))


def run_bare(
    base_path: Path, sequences: list[Any], pad_id: int, training: Any, steps: int, threads: int
) -> Timing:
    """A plain peft + torch LoRA loop: no hashing, no determinism setup, no writes."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    torch.set_num_threads(threads)
    torch.manual_seed(training.seed)
    model = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=torch.float32)
    targets = sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and ".layers." in f".{name}"
        }
    )
    peft_model = get_peft_model(
        model,
        LoraConfig(
            r=training.lora_r,
            lora_alpha=training.lora_alpha,
            lora_dropout=training.lora_dropout,
            target_modules=targets,
            bias="none",
            task_type="CAUSAL_LM",
        ),
    )
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=training.learning_rate, weight_decay=0.0)
    warmup = math.ceil(steps * training.warmup_ratio)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            (s + 1) / (warmup + 1)
            if s < warmup
            else max(0.0, 1.0 - (s - warmup) / max(1, steps - warmup))
        ),
    )
    peft_model.train()
    mbs = training.micro_batch_size
    done = tokens = epoch = 0
    while done < steps:
        gen = torch.Generator().manual_seed(training.seed + epoch)
        order = torch.randperm(len(sequences), generator=gen).tolist()
        for i in range(0, len(order), mbs):
            if done >= steps:
                break
            batch = [sequences[j] for j in order[i : i + mbs]]
            width = max(len(s.input_ids) for s in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, s in enumerate(batch):
                n = len(s.input_ids)
                ids[r, :n] = torch.from_numpy(s.input_ids.astype("int64"))
                labels[r, :n] = torch.from_numpy(s.labels.astype("int64"))
                mask[r, :n] = 1
            loss = peft_model(input_ids=ids, labels=labels, attention_mask=mask).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            tokens += int(mask.sum())
            done += 1
        epoch += 1
    return Timing(time.perf_counter() - start, tokens, done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="dlm-git train overhead vs a bare loop")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--segment-every",
        type=int,
        default=None,
        help="ours: segment snapshot interval (default: the document's, ~4 segments; 0: none)",
    )
    parser.add_argument(
        "--base", default="tiny", help="tiny, or an architecture of `dlm-git base list`"
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    with tempfile.TemporaryDirectory(prefix="dlm-bench-") as tmp:
        workdir = Path(tmp)
        os.environ.setdefault("DLM_GIT_BASE_CACHE", str(workdir / "bases"))

        # The default numerics profile's kernel variables only count before torch is
        # imported: pin them first, so `run_train` runs here (not in a child process) and
        # the bare loop runs on the same kernels.
        from dlm_git.numerics.activate import activate
        from dlm_git.numerics.plan import plan

        activate(plan("cpu").env)
        # Warm-up: heavy imports and the tiny base, outside every timed region.
        import peft  # noqa: F401
        import torch
        import transformers  # noqa: F401

        from dlm_git.base.resolve import resolve_base
        from dlm_git.doc.load import load_document
        from dlm_git.train.pipeline import tokenize_document

        base = "builtin:tiny"
        if args.base != "tiny":
            from dlm_git.base.build import Shape, build_base, family_named

            build_base(family_named(args.base), Shape(), out=workdir / "base")
            base = "../../base"  # from run-N/demo/
        doc0 = demo_copy(workdir, args.steps, 0, base)
        loaded = load_document(doc0)
        resolved = resolve_base(
            loaded.doc.frontmatter.base_model, loaded.doc.directory, loaded.repo_root
        )
        tok = tokenize_document(loaded, resolved)
        training = loaded.doc.frontmatter.training

        def bare() -> Timing:
            torch.use_deterministic_algorithms(False)  # the bare loop sets nothing up
            return run_bare(
                resolved.path, tok.sequences, tok.pad_id, training, args.steps, args.threads
            )

        counter = iter(range(1, 10_000))

        def ours() -> Timing:
            doc = demo_copy(workdir, args.steps, next(counter), base)
            return run_ours(doc, args.threads, args.segment_every)

        print(
            f"base {args.base}; demo: {len(tok.sequences)} sequences, {tok.tokens} tokens; "
            f"{args.steps} steps, "
            f"micro batch {training.micro_batch_size}, threads {args.threads}, "
            f"torch {torch.__version__}"
        )
        paths = {"bare": bare, "ours": ours}

        def sample(name: str, rep: int) -> Timing:
            t = paths[name]()
            if rep:  # round 0: the untimed warm-up of both paths
                print(
                    f"  rep {rep} {name:4s} {t.seconds:8.3f} s  {t.tokens / t.seconds:9.1f} tok/s"
                )
            return t

        results = alternate(paths, args.reps, sample)

    best = {k: min(v, key=lambda t: t.seconds) for k, v in results.items()}
    median = {k: statistics.median(t.seconds for t in v) for k, v in results.items()}
    if best["ours"].tokens != best["bare"].tokens or best["ours"].steps != best["bare"].steps:
        print(
            f"note: token/step counts differ (ours {best['ours'].tokens}/{best['ours'].steps}, "
            f"bare {best['bare'].tokens}/{best['bare'].steps})"
        )
    for name in ("bare", "ours"):
        t = best[name]
        print(
            f"{name:4s}: best {t.seconds:.3f} s, median {median[name]:.3f} s, "
            f"{t.tokens / t.seconds:.1f} tok/s (best), {t.tokens} tokens, {t.steps} steps"
        )
    ours = results["ours"]
    print(
        f"ours, medians: {statistics.median(t.outside for t in ours):.3f} s outside the "
        f"training loop (tokens, model, adapter, records), "
        f"{statistics.median(t.snapshots for t in ours):.3f} s of segment snapshots on the "
        "training thread (captures, and the wait for the writer)"
    )
    ratio = best["ours"].seconds / best["bare"].seconds
    overhead = ratio - 1.0
    median_overhead = median["ours"] / median["bare"] - 1.0
    target = TARGET_OVERHEAD if args.base == "tiny" else REAL_TARGET_OVERHEAD
    verdict = "PASS" if overhead <= target else "FAIL"
    print(f"ratio ours/bare (best): {ratio:.3f}")
    print(f"overhead: {overhead * 100:.1f}% (median-based {median_overhead * 100:.1f}%)")
    print(f"{verdict}: target overhead <= {target * 100:.0f}% of the bare loop's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
