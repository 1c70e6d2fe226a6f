"""What the pre-push hook's DVC-remote check costs.

Builds a trained repository (`dlm-git init --doc notes`, `max_steps: 1`, `dvc repro`), a
DVC remote on a moto S3 server on 127.0.0.1 (as the tests do), `dvc push`, commit. Then
times `python -m dlm_git.hooks.pre_push` for the pushed commit, alternating, REPS times
each after one untimed round (medians):
- off:    `git config dlm-git.remoteCheck off` (verification only, as before the check);
- refuse: the check on: the DVC config read as INI in the hook, then one child
  interpreter that imports DVC and asks the remote for each adapter object.
Prints both and the ratio refuse/off. Always exits 0.

    .venv/bin/python benchmarks/pre_push_remote.py [--reps 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate, medians, timed

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def main() -> int:
    from tests.support.s3 import s3_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlm-prepush-") as tmp, s3_server() as s3:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PATH": path, "DVC_NO_ANALYTICS": "1", **s3.env}
        repo = Path(tmp) / "repo"
        repo.mkdir()

        def sh(*cmd: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            proc = subprocess.run(
                list(cmd), cwd=repo, env=env, input=stdin, capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
            return proc

        sh("git", "init", "-q")
        sh("git", "config", "user.email", "bench@dlm-git.invalid")
        sh("git", "config", "user.name", "bench")
        sh(sys.executable, "-m", "dlm_git", "init", "--doc", "notes", "--no-hooks")
        doc = repo / "notes" / "notes.dlm"
        doc.write_text(doc.read_text("utf-8").replace("max_steps: 20", "max_steps: 1"))
        sh(sys.executable, "-m", "dvc", "repro")
        sh(sys.executable, "-m", "dvc", "remote", "add", "-d", "storage", f"s3://{s3.bucket}/s")
        sh(sys.executable, "-m", "dvc", "remote", "modify", "storage", "endpointurl", s3.endpoint)
        sh("git", "add", "-A")
        sh("git", "commit", "-qm", "trained")
        sh(sys.executable, "-m", "dvc", "push")
        sha = sh("git", "rev-parse", "HEAD").stdout.strip()
        line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"

        def sample(mode: str, _round: int) -> float:
            sh("git", "config", "dlm-git.remoteCheck", mode)
            hook = [sys.executable, "-m", "dlm_git.hooks.pre_push", "origin", "x"]
            return timed(lambda: sh(*hook, stdin=line))[0] * 1000

        med = medians(alternate(("off", "refuse"), args.reps, sample))
    off, on = med["off"], med["refuse"]
    print(f"pre-push, 1 document, S3 remote (moto on 127.0.0.1), medians of {args.reps}:")
    print(f"  remote check off:    {off:7.1f} ms")
    print(f"  remote check refuse: {on:7.1f} ms  (ratio {on / off:.2f}, +{on - off:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
