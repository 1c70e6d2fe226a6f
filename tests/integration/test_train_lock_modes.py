"""`train`'s lock modes: `--update-lock` accepts an ERROR drift and records what it
supersedes, `--ignore-lock` neither validates nor writes a lock, and the mode flags are
mutually exclusive (CLI misuse, exit 2)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import RunCli, one_line
from tests.support.demo import DEVICE_ARGS, Trained
from tests.support.env import subprocess_env
from tests.support.files import snapshot
from tests.support.lockedits import assert_untouched, drift, set_field, torch_major_drift

pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------- --update-lock


def test_update_lock_accepts_error_drift_and_records_supersedes(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    drifted = drift(trained_repo, set_field("base_model_sha256", "0" * 64), torch_major_drift)
    code, _, err = train(trained_repo, "--update-lock")
    assert code == 0, err
    assert "WARN" not in err and "ERROR" not in err
    data = (trained_repo / "dlm.lock").read_bytes()
    lock = json.loads(data)
    assert lock["supersedes"] == hashlib.sha256(drifted).hexdigest()
    original = json.loads(trained_once.files["dlm.lock"])
    assert {**lock, "supersedes": None} == original
    manifest = json.loads((trained_repo / "manifest.json").read_bytes())
    assert manifest["lock_sha256"] == hashlib.sha256(data).hexdigest()

    # A plain re-train afterwards keeps the accepted lock, `supersedes` included.
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert "WARN" not in err
    assert (trained_repo / "dlm.lock").read_bytes() == data
    # ... and so does a second --update-lock with nothing new to accept.
    code, _, err = train(trained_repo, "--update-lock")
    assert code == 0, err
    assert (trained_repo / "dlm.lock").read_bytes() == data


def test_update_lock_without_drift_or_without_a_lock(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    code, _, err = train(trained_repo, "--update-lock")
    assert code == 0, err
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]
    (trained_repo / "dlm.lock").unlink()
    code, _, err = train(trained_repo, "--update-lock")
    assert code == 0, err
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]


# --------------------------------------------------------------------------- --ignore-lock


def test_ignore_lock_skips_validation_and_does_not_write(trained_repo: Path, train: RunCli) -> None:
    drifted = drift(trained_repo, set_field("base_model_sha256", "0" * 64), set_field("seed", 7))
    code, out, err = train(trained_repo, "--ignore-lock")
    assert code == 0, err
    assert "WARN" not in err and "lock validation failed" not in err
    assert "not written" in out
    assert (trained_repo / "dlm.lock").read_bytes() == drifted


def test_ignore_lock_does_not_create_a_lock(trained_repo: Path, train: RunCli) -> None:
    (trained_repo / "dlm.lock").unlink()
    code, _, err = train(trained_repo, "--ignore-lock")
    assert code == 0, err
    assert not (trained_repo / "dlm.lock").exists()


# --------------------------------------------------------------------------- flag misuse


@pytest.mark.parametrize(
    "flags",
    [
        ("--strict-lock", "--update-lock"),
        ("--strict-lock", "--ignore-lock"),
        ("--update-lock", "--ignore-lock"),
        ("--strict-lock", "--update-lock", "--ignore-lock"),
    ],
)
def test_lock_mode_flags_are_mutually_exclusive(
    trained_repo: Path, train: RunCli, flags: tuple[str, ...]
) -> None:
    drift(trained_repo, set_field("base_model_sha256", "0" * 64))
    before = snapshot(trained_repo)
    code, out, err = train(trained_repo, *flags)
    assert code == 2
    line = one_line(err)
    assert "mutually exclusive" in line
    assert out == ""
    assert_untouched(trained_repo, before)


def test_mutually_exclusive_flags_in_a_fresh_process(
    trained_repo: Path, tmp_path: Path, base_cache: Path
) -> None:
    before = snapshot(trained_repo)
    proc = subprocess.run(
        [sys.executable, "-m", "dlm_git", "train", str(trained_repo), "--update-lock"]
        + ["--ignore-lock", "-q", *DEVICE_ARGS],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "mutually exclusive" in one_line(proc.stderr)
    assert proc.stdout == ""
    assert_untouched(trained_repo, before)
