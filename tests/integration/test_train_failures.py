"""A `train` that fails after its lock checks (bad target modules, a failure inside the
training loop or while saving, the base gone) leaves every output of the document as it
was: one line on stderr, no partial write."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RunCli, one_line
from tests.support.demo import DOC_NAME
from tests.support.files import snapshot
from tests.support.lockedits import assert_untouched, drift, read_lock_json, set_field

pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------- failed runs


def test_bad_target_modules_leave_outputs_untouched(trained_repo: Path, train: RunCli) -> None:
    doc = trained_repo / DOC_NAME
    text = doc.read_text("utf-8")
    doc.write_text(text.replace("  seed: 42\n", "  seed: 42\n  target_modules: [nonexistent]\n"))
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo)
    assert code == 1
    line = one_line(err)
    assert "nonexistent" in line
    assert_untouched(trained_repo, before)


@pytest.mark.parametrize("exc", [RuntimeError("boom in the loop"), KeyboardInterrupt()])
def test_failure_inside_the_training_loop_leaves_outputs_untouched(
    trained_repo: Path, train: RunCli, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    import dlm_git.train.loop as loop

    real = loop.train_loop
    calls: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        real(*args, **kwargs)  # really train (mutating the in-memory model), then fail
        raise exc

    monkeypatch.setattr(loop, "train_loop", failing)
    # drift a WARN field too, so the run would have rewritten the lock had it succeeded
    drift(trained_repo, set_field("seed", 7))
    before = snapshot(trained_repo)
    if isinstance(exc, KeyboardInterrupt):
        code, _, err = train(trained_repo)
        assert code == 130
        assert "Traceback" not in err
    else:
        with pytest.raises(RuntimeError, match="boom in the loop"):
            train(trained_repo)
    assert calls == [1]
    assert_untouched(trained_repo, before)


def test_failure_while_saving_the_adapter_leaves_outputs_untouched(
    trained_repo: Path, train: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dlm_git.train.adapter as adapter

    real = adapter.save_adapter

    def half_save(model: Any, staging: Path, base: adapter.HubBase) -> None:
        real(model, staging, base)
        (staging / "adapter_model.safetensors").write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(adapter, "save_adapter", half_save)
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, err  # the machine's refusal: one line, no traceback
    assert "No space left on device" in lines[0] and "free disk space" in lines[0], err
    assert_untouched(trained_repo, before)


def test_base_unavailable_after_the_lock_exists(
    trained_repo: Path, train: RunCli, base_cache: Path
) -> None:
    from dlm_git.base.tiny import ensure_tiny_base

    local_base = trained_repo.parent / "base"
    shutil.copytree(ensure_tiny_base(), local_base)
    doc = trained_repo / DOC_NAME
    doc.write_text(doc.read_text("utf-8").replace("builtin:tiny", "../base"), "utf-8")
    code, _, err = train(trained_repo, "--update-lock", "--accept-license")
    assert code == 0, err
    lock = read_lock_json(trained_repo)
    assert lock["base_model"] == "../base"
    assert lock["license_acceptance"]["requires_acceptance"] is True
    before = snapshot(trained_repo)

    shutil.rmtree(local_base)
    code, _, err = train(trained_repo, "--accept-license")
    assert code == 1
    line = one_line(err)
    assert "../base" in line and "not available" in line
    assert_untouched(trained_repo, before)
