"""The demo document (`examples/demo`: `demo.dlm` and its `notes/`) written into a test
repository, on a chosen base and with a training config small enough to train in seconds.

The text is always the committed example's with named lines changed (`base_model`, the
training keys), so a test trains what a user of the example would, only shorter.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.support.docs import set_training

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO_ROOT / "examples" / "demo"
DOC_NAME = "demo.dlm"
DEVICE_ARGS = ("--device", "cpu")
"""Pinned, so that every run (in-process, subprocess, any machine) records the same
hardware tier and determinism flags in the lock."""
FAST_TRAINING = {"max_steps": "3", "sequence_len": "64", "micro_batch_size": "2"}
"""A training config that trains the demo in about a second."""
SEED_LINE = "  seed: 42\n"
"""The demo's training line after which a key it lacks is added."""


def demo_text(*, base_model: str | None = None, **training: object) -> str:
    """examples/demo/demo.dlm on `base_model`, each `training` key set (added after the
    seed when the demo has no such line)."""
    text = (DEMO_DIR / DOC_NAME).read_text("utf-8")
    if base_model is not None:
        text, n = re.subn(r"(?m)^base_model: .*$", f"base_model: {base_model}", text)
        assert n == 1, "demo.dlm has no base_model line"
    for key, value in training.items():
        if re.search(rf"(?m)^  {key}:", text):
            text = set_training(text, **{key: value})
        else:
            assert SEED_LINE in text, "demo.dlm has no seed line to add a key after"
            text = text.replace(SEED_LINE, f"{SEED_LINE}  {key}: {value}\n")
    return text


def write_demo(
    doc_dir: Path, *, name: str = DOC_NAME, base_model: str | None = None, **training: object
) -> Path:
    """The demo's notes/ and its document (`demo_text`) in `doc_dir`; the document's path."""
    shutil.copytree(DEMO_DIR / "notes", doc_dir / "notes")
    doc = doc_dir / name
    doc.write_text(demo_text(base_model=base_model, **training), "utf-8")
    return doc


def write_fast_demo(doc_dir: Path) -> Path:
    """The demo with `FAST_TRAINING` (trains in about a second)."""
    return write_demo(doc_dir, **FAST_TRAINING)


@dataclass(frozen=True)
class Trained:
    """The fast demo trained once (the `trained_once` fixture, tests/integration/conftest.py)."""

    repo: Path
    doc_dir: Path
    files: dict[str, bytes]
    """Bytes of every file in the document directory right after training."""
