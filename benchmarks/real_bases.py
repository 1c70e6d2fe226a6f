"""Training on the base most real DLM documents name, `qwen2.5-coder-1.5b`: one adapter?

The original `dlm` tool says its CPU tier stops being bit-exact on larger bases. Here the
published Qwen2.5-Coder-1.5B shape (`dlm-git base build`, random weights; `--layers N`
for fewer layers where memory is short) stands in for the key's pinned snapshot in a
temporary Hugging Face cache, and the demo document, put on `base_model:
qwen2.5-coder-1.5b`, is trained for a few steps, each run in a fresh `dlm-git train`
process under this machine's default numerics profile:

- twice on this machine as it is: the two adapter SHAs, and whether they are equal;
- once under each simulated CPU the portable profile is tested with
  (tests/integration/test_numerics_profiles.py: other `ATEN_CPU_CAPABILITY`, `MKL_CBWR`,
  `ONEDNN_MAX_CPU_ISA` in the environment): whether each gives the same adapter;
- per run: the training loop's seconds per step (`train_seconds` / steps) and the
  process's peak RSS (`peak_rss_bytes` of the run record); for the build, its wall time
  and peak RSS. The machine's load is printed: the numbers are this machine's.

Runs one at a time (never two 1.5B processes at once). Always exits 0.

    .venv/bin/python benchmarks/real_bases.py [--steps 3] [--layers 28] [--seq-len 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _timing import load, timed

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

DEMO = REPO_ROOT / "examples" / "demo"
KEY = "qwen2.5-coder-1.5b"
# The environments other CPUs give torch (as the portable profile's integration test).
SIMULATED: dict[str, dict[str, str]] = {
    "no-simd ATen": {"ATEN_CPU_CAPABILITY": "default"},
    "AVX512 box": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512"},
    "MKL compatible path": {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def child_env(extra: dict[str, str], hub: Path) -> dict[str, str]:
    from tests.support.env import subprocess_env

    return subprocess_env(HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1", **extra)


def build(hub: Path, layers: int | None) -> tuple[float, int, str]:
    """The base in `hub` under the key's repository, standing in for its pin: seconds,
    the build process's peak RSS in bytes, and the pin."""
    from dlm_git.base.registry import REGISTRY
    from tests.support.hub import stand_in

    cmd = [sys.executable, "-m", "dlm_git", "base", "build", KEY, "--hf-cache", str(hub)]
    cmd += ["--repo-id", REGISTRY[KEY].repo_id]
    cmd += ["--layers", str(layers)] if layers is not None else []
    seconds, proc = timed(lambda: subprocess.run(cmd, capture_output=True, text=True))
    if proc.returncode != 0:
        raise SystemExit(f"build failed: {proc.stderr.strip()[-500:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return seconds, peak, stand_in(hub, KEY)


def document(work: Path, name: str, steps: int, seq_len: int) -> Path:
    """The demo document on `base_model: qwen2.5-coder-1.5b`, in a fresh git repository."""
    repo = work / name
    shutil.copytree(DEMO / "notes", repo / "demo" / "notes")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    lines = []
    for line in (DEMO / "demo.dlm").read_text("utf-8").splitlines():
        if line.startswith("base_model:"):
            line = f"base_model: {KEY}"
        elif line.startswith("  max_steps:"):
            line = f"  max_steps: {steps}"
        elif line.startswith("  sequence_len:"):
            line = f"  sequence_len: {seq_len}"
        lines.append(line)
    (repo / "demo" / "demo.dlm").write_text("\n".join(lines) + "\n", "utf-8")
    return repo / "demo"


def train(doc: Path, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "dlm_git", "train", str(doc), "--json", "-q", "--device", "cpu"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"training failed: {proc.stderr.strip()[-800:]}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=None, help="fewer than the 28 layers")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--simulated", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    from dlm_git.numerics.probe import diagnosis

    print(f"machine: {diagnosis()}; load {load()}")
    layers = args.layers if args.layers is not None else 28
    with tempfile.TemporaryDirectory(prefix="dlm-bench-real-bases-") as tmp:
        work = Path(tmp)
        seconds, peak, pin = build(work / "hub", args.layers)
        print(f"build {KEY} ({layers} layers): {seconds:.1f} s, peak RSS {peak / 1e9:.2f} GB")
        print(f"  standing in for {KEY} at {pin}")
        runs = [("this machine, run 1", {}), ("this machine, run 2", {})]
        runs += list(SIMULATED.items()) if args.simulated else []
        shas: dict[str, str] = {}
        for i, (label, extra) in enumerate(runs):
            doc = document(work, f"run-{i}", args.steps, args.seq_len)
            out = train(doc, child_env(extra, work / "hub"))
            run = out["run"]
            shas[label] = out["adapter_sha256"]
            per_step = run["train_seconds"] / args.steps
            print(
                f"  {label:<22} adapter {shas[label][:16]}  {per_step:.2f} s/step"
                f"  peak RSS {run['peak_rss_bytes'] / 1e9:.2f} GB  ({run['numerics']}; "
                f"load {load()})"
            )
    first, second = shas["this machine, run 1"], shas["this machine, run 2"]
    print(f"fresh processes: {first} vs {second}: {'equal' if first == second else 'NOT equal'}")
    if args.simulated:
        same = all(shas[label] == first for label in SIMULATED)
        print(f"simulated CPUs: {'all equal to run 1' if same else 'NOT all equal'}")
        for label in SIMULATED:
            print(f"  {label:<22} {'equal' if shas[label] == first else 'differs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
