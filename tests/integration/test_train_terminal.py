"""Every record `train` writes is independent of where its output goes: a terminal (with
its plan line and progress), a pipe (`dvc repro`, CI), `--quiet`, `--json`, or a library's log
level. Segment snapshots are on, so the chain (Python's, numpy's and torch's RNG state at
every boundary) is compared too: a progress bar that drew from Python's `random` changed
every boundary's `rng_python`, hence the chain root in manifest.json, on a terminal only.

The same document is trained in fresh repositories by fresh interpreters, once piped (the
reference) and once per variant, and every file of the document directory is compared
byte for byte, except the run record's measurements (times, throughput, memory, the
token cache's own path), which are compared by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.demo import DEVICE_ARGS, write_fast_demo
from tests.support.env import subprocess_env
from tests.support.gitrepo import init_repo
from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.slow

SEGMENTS = ("--segment-every", "1")
MEASURED = {
    "wall_seconds",
    "tokenize_seconds",
    "train_seconds",
    "tokens_per_second",
    "peak_rss_bytes",
    "peak_cuda_allocated_bytes",
    "snapshot_seconds",
}
MEASURED_CACHE = {"path", "tokenize_seconds"}
PROGRESS = "\r\x1b[K  step "  # the progress line, rewritten in place (train/progress.py)
MACHINE_LOCAL = (".git", ".dlm-git")
"""Not records: the repository itself and the machine-local token cache."""


def train_args(doc_dir: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "dlm_git", "train", str(doc_dir), *DEVICE_ARGS, *SEGMENTS, *flags]


def fresh_document(parent: Path) -> Path:
    repo = init_repo(parent / "repo")
    doc_dir = repo / "demo"
    write_fast_demo(doc_dir)
    return doc_dir


def records(doc_dir: Path) -> dict[str, Any]:
    """Every file under the document directory (bytes), the run record with its
    measurements replaced by their names."""
    out: dict[str, Any] = {}
    for path in sorted(doc_dir.rglob("*")):
        rel = path.relative_to(doc_dir).as_posix()
        if not path.is_file() or rel.split("/")[0] in MACHINE_LOCAL:
            continue
        out[rel] = path.read_bytes()
    run = json.loads(out.pop("run.json"))
    out["run.json"] = {
        **{k: ("measured" if k in MEASURED else v) for k, v in run.items()},
        "cache": {k: ("measured" if k in MEASURED_CACHE else v) for k, v in run["cache"].items()},
    }
    return out


def piped(doc_dir: Path, env: dict[str, str], *flags: str) -> None:
    proc = subprocess.run(
        train_args(doc_dir, *flags),
        cwd=doc_dir.parent,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stderr, "progress was drawn into a pipe"
    assert " step " not in proc.stderr and "estimate" not in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, base_cache: Path) -> dict[str, Any]:
    """The records of the plain piped run (what `dvc repro` and CI write)."""
    doc_dir = fresh_document(tmp_path_factory.mktemp("piped"))
    piped(doc_dir, subprocess_env())
    out = records(doc_dir)
    boundaries = [n for n in out if n.startswith("segments/") and n.endswith(".json")]
    assert len(boundaries) >= 3, sorted(out)  # step 0, every step, the last step
    return out


VARIANTS = {
    "terminal": ((), {}),
    "terminal-quiet": (("--quiet",), {}),
    "terminal-no-progress": (("--no-progress",), {}),
    "terminal-json": (("--json",), {}),
    "terminal-debug-log": ((), {"TRANSFORMERS_VERBOSITY": "debug"}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_records_on_a_terminal_are_the_piped_records(
    variant: str, reference: dict[str, Any], tmp_path: Path
) -> None:
    flags, extra_env = VARIANTS[variant]
    doc_dir = fresh_document(tmp_path)
    code, screen = run_on_terminal(
        train_args(doc_dir, *flags), doc_dir.parent, subprocess_env(**extra_env)
    )
    assert code == 0, screen
    shows = "--no-progress" not in flags
    # progress is drawn (so this ran on a terminal) unless --no-progress: --quiet and
    # --json are about stdout (the pipeline's stage passes --quiet)
    assert (PROGRESS in screen) is shows, screen[-2000:]
    got = records(doc_dir)
    assert sorted(got) == sorted(reference)
    differ = [name for name in sorted(reference) if got[name] != reference[name]]
    assert differ == [], f"{variant}: records differ from the piped run's: {differ}"


def test_a_library_log_level_changes_no_record(reference: dict[str, Any], tmp_path: Path) -> None:
    doc_dir = fresh_document(tmp_path)
    piped(doc_dir, subprocess_env(TRANSFORMERS_VERBOSITY="debug", PYTHONWARNINGS="always"))
    got = records(doc_dir)
    differ = [name for name in sorted(reference) if got.get(name) != reference[name]]
    assert differ == [] and sorted(got) == sorted(reference), differ


def test_a_progress_path_that_draws_from_every_rng_changes_no_record(
    trained_once: Any, trained_repo: Path, train: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a progress display draws, before training starts and at every step, from
    Python's, numpy's and torch's global RNGs, the loop trains and snapshots from its own
    state: the retrained records are the quiet run's, byte for byte."""
    import contextlib
    import random
    from collections.abc import Iterator

    import numpy as np
    import torch

    from dlm_git.train import run

    calls: list[int] = []

    def draw(step: int, total: int, loss: float, tokens: int, seconds: float) -> None:
        calls.append(step)
        random.getrandbits(24)
        np.random.rand()
        torch.rand(3)

    @contextlib.contextmanager
    def hostile_bar(quiet: bool, outline: Any) -> Iterator[Any]:
        random.getrandbits(24)  # as importing rich does
        np.random.rand()
        yield draw

    monkeypatch.setattr(run, "_progress_bar", hostile_bar)
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert calls, "the progress callback never ran"
    after = {
        rel: data
        for rel, data in trained_once.files.items()
        if rel.split("/")[0] not in MACHINE_LOCAL and rel != "run.json"
    }
    assert any(rel.startswith("segments/") for rel in after), sorted(after)
    differ = [rel for rel, data in after.items() if (trained_repo / rel).read_bytes() != data]
    assert differ == [], f"records changed by the progress path: {differ}"
