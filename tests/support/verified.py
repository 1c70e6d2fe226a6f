"""The verified repository: one document, trained and committed the way a user does it,
built once per test run and copied for every test that changes it.

The repository is built with real parts only: `git init`, `dlm-git init --doc demo
--no-hooks`, a small training config, `dvc repro` and `git add -A && git commit`, every
subprocess in the isolated test environment (`tests/support/env.py`). The build is
made once per run, whatever the suites selected and the xdist workers, and marked ready
only when complete (`tests/support/shared.py`); a copy (`copy_repo`) holds the work tree, `.git`
and `.dvc/cache`, so a test may change anything in it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.support.docs import set_training
from tests.support.env import run
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.shared import build_once

DOC = "demo"
ADAPTER_OUT = f"{DOC}/adapter"
SEGMENTS_OUT = f"{DOC}/segments"
WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
TRAIN_STAGE = f"train@{DOC}"

# Two Q/A pairs so that reordering sections is possible; a tiny training run.
EXTRA_QA = """
### Q
Which file binds inputs to outputs?

### A
manifest.json binds the document, the sources, the base and every adapter tensor by hash.
"""
FIRST_QA = """### Q
What is this document for?

### A
It trains a small LoRA adapter whose bytes are reproducible from this commit.
"""


def build_verified_repo(parent: Path) -> Path:
    """A git repo with one trained, committed document `demo`, built once per run under
    `parent` (`tests/support/shared.py`), its tiny base installed in this process's cache."""
    repo = build_once(parent, "verified-repo", _build)
    install_tiny_base(repo)
    return repo


def _build(repo: Path) -> None:
    init_repo(repo)
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    doc = repo / DOC / f"{DOC}.dlm"
    text = set_training(doc.read_text("utf-8"), max_steps=4, sequence_len=64)
    assert FIRST_QA in text, "starter document changed: update FIRST_QA"
    doc.write_text(text.rstrip("\n") + "\n" + EXTRA_QA, "utf-8")
    run(["dvc", "repro"], repo)
    commit_all(repo, "train demo")
    assert git(repo, "status", "--porcelain") == "", "training left the work tree dirty"


def install_tiny_base(repo: Path) -> None:
    """Put the pipeline's built tiny base into DLM_GIT_BASE_CACHE (byte-identical to what
    `ensure_tiny_base` would build, by the tiny base's invariant), so verify needn't build it."""
    from dlm_git.base.tiny import SPEC_FILE, tiny_dir

    dest = tiny_dir()
    if (dest / SPEC_FILE).is_file():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny.", dir=dest.parent))
    shutil.rmtree(tmp)
    shutil.copytree(repo / "bases" / "tiny", tmp)
    try:
        os.replace(tmp, dest)
    except OSError:  # someone else installed it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)


def copy_repo(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest
