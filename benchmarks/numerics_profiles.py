"""Training time under the portable profile (`x86-64-v3`) against `native`, same run.

For each base (the built-in tiny base and a larger local Llama built here with random
weights and the tiny tokenizer) the demo document is trained REPS times under each
profile, alternating, each run in a fresh `dlm-git train` process (a profile's kernel
variables only count before torch is imported). The time compared is the training loop's
(`train_seconds` of the run record: no interpreter start, imports or hashing). Prints the
best and median of each and the ratio portable / native. Goal: portable <= 1.10x native.
Always exits 0.

    .venv/bin/python benchmarks/numerics_profiles.py [--reps 3] [--steps 12] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate, medians

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
GOAL = 1.10
PROFILES = ("x86-64-v3", "native")
# A larger Llama than builtin:tiny (hidden 64, 2 layers): ~25M parameters.
LARGER = {"hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 6, "heads": 8}


def build_larger_base(dest: Path) -> Path:
    """A local base directory: a Llama of LARGER's shape, random weights, tiny tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from dlm_git.base.tiny import ensure_tiny_base

    tiny = ensure_tiny_base()
    cfg = json.loads((tiny / "config.json").read_text("utf-8"))
    config = LlamaConfig(
        vocab_size=cfg["vocab_size"],
        hidden_size=LARGER["hidden_size"],
        intermediate_size=LARGER["intermediate_size"],
        num_hidden_layers=LARGER["num_hidden_layers"],
        num_attention_heads=LARGER["heads"],
        num_key_value_heads=LARGER["heads"],
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=cfg["pad_token_id"],
        eos_token_id=cfg["eos_token_id"],
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(str(dest))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(tiny / name, dest / name)
    return dest


def demo_repo(workdir: Path, name: str, base: str | None, steps: int) -> Path:
    repo = workdir / name
    shutil.copytree(DEMO / "notes", repo / "demo" / "notes")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    lines = []
    for line in (DEMO / "demo.dlm").read_text("utf-8").splitlines():
        if line.startswith("  max_steps:"):
            line = f"  max_steps: {steps}"
        elif line.startswith("base_model:") and base is not None:
            line = f"base_model: {base}"
        lines.append(line)
    (repo / "demo" / "demo.dlm").write_text("\n".join(lines) + "\n", "utf-8")
    return repo / "demo"


def train_seconds(doc: Path, profile: str, threads: int) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "dlm_git", "train", str(doc), "--json", "-q"]
    cmd += ["--device", "cpu", "--numerics", profile, "--threads", str(threads)]
    cmd += ["--ignore-lock", "--accept-license"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"training failed under {profile}: {proc.stderr.strip()[-500:]}")
    out = json.loads(proc.stdout)
    return float(out["run"]["train_seconds"]), str(out["adapter_sha256"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from dlm_git.numerics.probe import diagnosis

    print(f"machine: {diagnosis()}")
    with tempfile.TemporaryDirectory(prefix="dlm-bench-numerics-") as tmp:
        work = Path(tmp)
        larger = build_larger_base(work / "larger-base")
        bases = {"builtin:tiny": None, "larger (~25M)": str(larger)}
        for label, base in bases.items():
            shas: dict[str, set[str]] = {p: set() for p in PROFILES}

            def sample(
                profile: str, rep: int, label: str = label, base: str | None = base
            ) -> float:
                doc = demo_repo(work, f"{label[:5]}-{profile}-{rep}", base, args.steps)
                seconds, sha = train_seconds(doc, profile, args.threads)
                shas[profile].add(sha[:12])  # noqa: B023  (read right after the loop)
                return seconds

            times = alternate(PROFILES, args.reps, sample, warmup=0)
            best = {p: min(t) for p, t in times.items()}
            median = medians(times)
            ratio_best = best["x86-64-v3"] / best["native"]
            ratio_median = median["x86-64-v3"] / median["native"]
            verdict = "PASS" if ratio_best <= GOAL else "FAIL"
            print(f"\n{label}, {args.steps} steps, threads={args.threads}, {args.reps} reps")
            for p in PROFILES:
                print(
                    f"  {p:<10} best {best[p]:.3f} s  median {median[p]:.3f} s"
                    f"  adapter {', '.join(sorted(shas[p]))}"
                )
            print(
                f"  ratio x86-64-v3 / native: best {ratio_best:.3f}x, median {ratio_median:.3f}x"
                f"  (goal <= {GOAL:.2f}x: {verdict})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
