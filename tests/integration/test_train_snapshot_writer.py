"""Segment snapshots are written off the training thread (`dlm_git.train.segments`,
`dlm_git.train.background`), and that changes nothing a user can see:

- a snapshot write the machine refuses fails the run with one line, installs nothing and
  leaves no record naming it (every output as it was, no staging directory left);
- no record names a snapshot before it is complete and durable: when `manifest.json` is
  written, every boundary of its chain is installed, whole, and was fsynced (on a disk
  made slow, so a writer still at work would show).

Real training of the fast demo on the tiny base. The fault is real too: during training
(after the first optimizer step, from a wrapper that runs the real step first) the test
puts a directory where the next boundary's JSON file is to be written, so the writer's
rename onto it fails with the kernel's EISDIR, as root too.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RunCli, one_line
from tests.support.files import snapshot
from tests.support.lockedits import assert_untouched

pytestmark = pytest.mark.slow

WRITER_THREAD = "dlm-segments"


def _after_step(monkeypatch: pytest.MonkeyPatch, step: int, action: Any) -> list[int]:
    """Run `action()` right after optimizer step `step` (the real step runs first)."""
    import dlm_git.train.loop as loop

    real = loop._optimizer_step
    done: list[int] = []

    def stepped(t: Any, mixed: Any) -> None:
        real(t, mixed)
        if t.step == step:
            action()
            done.append(step)

    monkeypatch.setattr(loop, "_optimizer_step", stepped)
    return done


def test_a_refused_snapshot_write_fails_the_run_and_writes_no_record(
    trained_repo: Path, train: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(trained_repo)
    planted: list[Path] = []

    def plant() -> None:
        [staging] = trained_repo.glob(".segments.new.*")
        blocker = staging / "boundary-0000002.json"  # boundary 2: captured after step 2
        blocker.mkdir()
        (blocker / "keep").write_bytes(b"")
        planted.append(blocker)

    done = _after_step(monkeypatch, 1, plant)
    code, _, err = train(trained_repo)
    assert done == [1] and planted
    assert code == 1, err
    line = one_line(err)
    assert "boundary-0000002.json" in line and "Is a directory" in line, line
    assert_untouched(trained_repo, before)  # no record, no adapter, no staging dir left


def test_records_are_written_only_after_every_snapshot_is_durable(
    trained_repo: Path, train: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dlm_git.train.records as records

    synced: list[str] = []  # paths fsynced, in order (files under their temporary names)
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == WRITER_THREAD:
            time.sleep(0.2)  # a slow disk: a writer still at work would be caught
        real_fsync(fd)
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))

    seen: list[str] = []
    real_write = records.atomic_write_bytes

    def checked_write(path: Path, data: bytes, **kwargs: Any) -> None:
        if Path(path).name == "manifest.json":
            seen.append(_check_chain_durable(trained_repo, json.loads(data), synced))
        real_write(path, data, **kwargs)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    monkeypatch.setattr(records, "atomic_write_bytes", checked_write)
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert len(seen) == 1 and seen[0]
    # the training thread's share of that work (captures, the wait) is in the run record
    snapshot_seconds = json.loads((trained_repo / "run.json").read_bytes())["snapshot_seconds"]
    assert isinstance(snapshot_seconds, float | int) and snapshot_seconds >= 0


def _check_chain_durable(doc_dir: Path, manifest: dict[str, Any], synced: list[str]) -> str:
    """At the manifest's write: every boundary it names is in `segments/`, whole (each
    JSON names its tensors file's digest and the digest of the one before, up to the
    manifest's chain root), and each file and the directories holding it were fsynced."""
    record = manifest["segments"]
    segments = doc_dir / "segments"
    metas = sorted(segments.glob("boundary-*.json"))
    assert len(metas) == record["count"] == 4  # steps 0..3 of the fast demo
    assert sorted(p.name for p in segments.iterdir()) == sorted(
        [p.name for p in metas] + [p.with_suffix(".safetensors").name for p in metas]
    )
    digest = None
    for meta_path in metas:
        data = meta_path.read_bytes()
        meta = json.loads(data)
        blob = meta_path.with_suffix(".safetensors").read_bytes()
        assert meta["tensors_sha256"] == hashlib.sha256(blob).hexdigest()
        if digest is not None:
            assert meta["prev"] == digest
        digest = hashlib.sha256(data).hexdigest()
    assert digest == record["chain_root"]
    names = {Path(p).name for p in synced}
    for path in segments.iterdir():  # written as `.<name>.<random>.tmp`, then renamed
        assert any(n == path.name or n.startswith(f".{path.name}.") for n in names), path
    assert any(Path(p).name.startswith(".segments.new.") for p in synced), synced
    assert str(doc_dir.resolve()) in synced  # the rename into segments/ made durable
    adapter = doc_dir / "adapter"  # peft's save does not fsync: install_dir does, first
    for name in ("adapter_model.safetensors", "adapter_config.json", "README.md"):
        assert any(Path(p).name == name and ".adapter.new." in p for p in synced), synced
    assert any(Path(p).name.startswith(".adapter.new.") for p in synced), synced
    assert (adapter / "adapter_model.safetensors").is_file()
    return str(digest)
