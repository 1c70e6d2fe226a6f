"""Training in a fresh interpreter, for a process that cannot honour a numerics profile.

Invariants:
- Kernel-selecting variables only take effect before torch initialises. When this process
  already runs torch under other values (a replay of a second document under another
  profile, a test session, a library caller), the training runs as
  `python -m dlm_git train ... --json` in a child whose environment holds the profile's
  variables, and its outcome is read back from its JSON and the files it wrote.
- The child is this interpreter and this dlm-git; nothing from the commit chooses what runs.
- A child's user error is re-raised here as the same one-line error and exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.errors import DlmGitError
from dlm_git.numerics import apply_to

if TYPE_CHECKING:
    from dlm_git.train.run import TrainOptions, TrainOutcome


class ChildTrainError(DlmGitError):
    """The training child failed; its one-line error is the message."""

    def __init__(self, line: str, exit_code: int) -> None:
        super().__init__("", line)
        self.exit_code = exit_code


def child_argv(target: Path, options: TrainOptions, profile: str | None, device: str) -> list[str]:
    argv = [sys.executable, "-m", "dlm_git", "train", str(target), "--json", "-q"]
    argv += ["--device", device, "--lock-mode", options.lock_mode]
    if profile is not None:
        argv += ["--numerics", profile]
    if options.threads is not None:
        argv += ["--threads", str(options.threads)]
    if not options.use_cache:
        argv.append("--no-cache")
    if options.accept_license:
        argv.append("--accept-license")
    if options.tiny_dir is not None:
        argv += ["--tiny-dir", str(options.tiny_dir)]
    if options.base_dir is not None:
        argv += ["--base-dir", str(options.base_dir)]
    if options.nproc != 1:
        argv += ["--nproc", str(options.nproc)]
    if options.segment_every is not None:
        argv += ["--segment-every", str(options.segment_every)]
    return argv


def train_in_child(
    target: Path,
    options: TrainOptions,
    profile: str | None,
    device: str,
    env: Mapping[str, str | None],
) -> TrainOutcome:
    from dlm_git.lock.policy import Finding
    from dlm_git.lock.schema import Lock
    from dlm_git.manifest.records import read_manifest_bytes
    from dlm_git.train.run import TrainOutcome

    proc = subprocess.run(
        child_argv(target, options, profile, device),
        env=apply_to(dict(os.environ), env),
        capture_output=True,
        text=True,
        check=False,
    )
    _forward_warnings(proc.stderr)
    if proc.returncode != 0:
        raise ChildTrainError(_last_line(proc.stderr, proc.returncode), proc.returncode or 1)
    try:
        out: dict[str, Any] = json.loads(proc.stdout)
        lock = Lock.model_validate(out["lock"])
        doc_path = Path(out["doc"])
        manifest_path = Path(out["manifest_path"])
        manifest = read_manifest_bytes(manifest_path.read_bytes(), str(manifest_path))
    except (ValueError, KeyError, OSError) as exc:
        raise DlmGitError("train", f"the training child's output is unreadable: {exc}") from None
    return TrainOutcome(
        doc_path=doc_path,
        adapter_sha256=str(out["adapter_sha256"]),
        tensor_root=str(out["tensor_root"]),
        lock=lock,
        lock_written=bool(out["lock_written"]),
        manifest=manifest,
        warnings=[Finding(**f) for f in out.get("warning_findings", [])],
        run_record=dict(out.get("run") or {}),
    )


def _forward_warnings(stderr: str) -> None:
    for line in stderr.splitlines():
        if " WARN " in line:
            sys.stderr.write(line + "\n")


def _last_line(stderr: str, code: int) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"training child exited {code}"
