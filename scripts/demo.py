"""`make demo`: run the project's own DVC pipeline end to end and summarise it.

Runs `dvc repro` at the repository root (stages: base -> tokenize -> train -> verify for
every document in params.yaml), then prints, per document, the adapter sha256, the
determinism class and the verify verdict, read back from the files the pipeline wrote.
Exit status is dvc's (non-zero if any stage, verification included, failed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def main() -> int:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    params = yaml.safe_load((ROOT / "params.yaml").read_text("utf-8")) or {}
    documents = params.get("documents") or []
    print(f"dlm-git demo: dvc repro for {len(documents)} document(s): {', '.join(documents)}")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=ROOT, env=env)
    elapsed = time.perf_counter() - started
    print(f"\ndvc repro finished in {elapsed:.1f} s (exit {proc.returncode})\n")
    print(f"{'document':<24} {'adapter sha256':<66} {'class':<12} verify")
    for doc in documents:
        d = ROOT / doc
        manifest = _read_json(d / "manifest.json")
        lock = _read_json(d / "dlm.lock")
        report = _read_json(d / "verify.json")
        adapter = manifest.get("adapter") or {}
        files = adapter.get("files", {}) if isinstance(adapter, dict) else {}
        weights = files.get("adapter_model.safetensors", {}) if isinstance(files, dict) else {}
        sha = weights.get("sha256", "-") if isinstance(weights, dict) else "-"
        print(
            f"{doc:<24} {sha:<66} {lock.get('determinism_class', '-')!s:<12} "
            f"{report.get('verdict', '-')}"
        )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
