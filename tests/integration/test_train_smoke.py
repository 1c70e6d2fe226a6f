"""`dlm-git train --max-steps N`: a smoke run without editing the document.

The limit is recorded (the manifest's effective config, `determinism_flags.max_steps` in
the lock), so the smoke adapter is its own identity, and `verify --level replay` and
`--level segments` of a committed smoke run train with the same N and find the recorded
bits. The run is done the way a user in a DVC project does it: by hand, then
`dvc commit` (what the pre-commit hook names), then `git commit`. The runs are the CLI in
this process (tests/support/verdicts.py); misuse, whose exit and stderr are what a user
sees, is the real executable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import git
from tests.support.verdicts import call_main_in, main_captured
from tests.support.verified import DOC, TRAIN_STAGE, copy_repo

pytestmark = pytest.mark.slow

TRAIN = ("train", DOC, "--tiny-dir", "bases/tiny", "--device", "cpu", "--threads", "2")


@pytest.fixture(scope="module")
def smoke_once(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> tuple[Path, str]:
    """The verified repository after `train --max-steps 1` by hand (not committed), and
    that run's stderr: one smoke training for this module. Never modified: `smoked` copies."""
    root = copy_repo(verified_repo, tmp_path_factory.mktemp("smoke") / "repo")
    smoke = main_captured(root, [*TRAIN, "--max-steps", "1", "-q"])
    assert smoke.code == 0, smoke.stderr
    return root, smoke.stderr


@pytest.fixture
def smoked(
    tmp_path: Path, smoke_once: tuple[Path, str], capfd: pytest.CaptureFixture[str]
) -> tuple[Forge, str]:
    """A private copy of `smoke_once` as a `Forge`, and the smoke run's stderr."""
    root = copy_repo(smoke_once[0], tmp_path / "repo")
    return Forge(root, call_main_in(root, capfd)), smoke_once[1]


def test_a_smoke_run_is_recorded_and_replays_bitwise(
    verified_repo: Path, smoked: tuple[Forge, str]
) -> None:
    forge, stderr = smoked
    before = json.loads((verified_repo / DOC / "manifest.json").read_text("utf-8"))
    assert before["training_config"]["total_steps"] > 1
    assert "max_steps" in stderr  # the lock's drift WARN: the limit is a new setting
    manifest, lock = forge.manifest(), forge.lock()
    assert manifest["training_config"]["max_steps"] == 1
    assert manifest["training_config"]["total_steps"] == 1
    assert manifest["training"]["steps"] == 1
    assert lock["determinism_flags"]["max_steps"] == 1
    assert manifest["adapter"]["tensor_root"] != before["adapter"]["tensor_root"]

    # the adapter changed: its eval record is made again (`eval.binding` refuses a stale one)
    evaluated = forge._call_main(["eval", DOC, "--tiny-dir", "bases/tiny"])
    assert evaluated.code == 0, evaluated.stderr
    run(["dvc", "commit", "-f", "-q", TRAIN_STAGE], forge.root)
    git(forge.root, "add", "-A")
    git(forge.root, "commit", "-q", "--no-verify", "-m", "smoke run")
    assert forge.verify("HEAD").verdict == "VERIFIED"
    replay = forge.verify_here("HEAD", "--level", "replay")
    assert replay.code == 0 and replay.verdict == "BITWISE", replay.explain()
    segments = forge.verify_here("HEAD", "--level", "segments")
    assert segments.code == 0 and segments.verdict == "SEGMENTS_BITWISE", segments.explain()
    assert "bit equality not expected" not in segments.stdout, segments.explain()


def test_a_full_run_after_a_smoke_run_drops_the_limit(
    verified_repo: Path, smoked: tuple[Forge, str]
) -> None:
    """The limit is the run's, never remembered: the next plain run is the document's
    own again (its adapter, and a lock without `max_steps`)."""
    forge, _ = smoked
    full = json.loads((verified_repo / DOC / "manifest.json").read_text("utf-8"))["adapter"][
        "tensor_root"
    ]
    assert forge.lock()["determinism_flags"]["max_steps"] == 1
    full_run = forge._call_main([*TRAIN, "-q"])
    assert full_run.code == 0, full_run.stderr
    assert "max_steps" not in forge.lock()["determinism_flags"]
    assert forge.manifest()["adapter"]["tensor_root"] == full


@pytest.mark.parametrize("value", ["0", "-3", str((1 << 20) + 1), "x"])
def test_a_bad_max_steps_is_misuse(forge: Any, value: str) -> None:
    lock_before = forge.read(f"{DOC}/dlm.lock")
    proc = run(["dlm-git", *TRAIN, "--max-steps", value], forge.root, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in proc.stderr
    assert any("--max-steps" in ln for ln in lines), proc.stderr
    assert forge.read(f"{DOC}/dlm.lock") == lock_before


def test_a_lock_recording_a_bad_limit_is_malformed(forge: Any) -> None:
    lock = forge.lock()
    lock["determinism_flags"]["max_steps"] = 0
    forge.write_lock(lock)
    forge.commit("a limit no dlm-git records")
    result = forge.verify("HEAD")
    assert result.verdict == "FAILED", json.dumps(result.doc)[:2000]
