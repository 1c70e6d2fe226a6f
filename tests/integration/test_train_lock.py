"""`train` against a drifted `dlm.lock`: every row of the policy table, every lock mode.

Each test starts from a copy of a trained document (`trained_repo`), rewrites its lock
to simulate a lock recorded elsewhere, and runs `train` in-process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import canonical_json

pytestmark = pytest.mark.slow

# The fixtures `trained_once`, `trained_repo`, `train` and `run_cli` come from conftest.py.
RunCli = Callable[..., tuple[int, str, str]]
Trained = Any
Drift = Callable[[dict[str, Any]], None]
DOC_NAME = "demo.dlm"
DEVICE_ARGS = ("--device", "cpu")


def snapshot(doc_dir: Path) -> dict[str, bytes]:
    return {
        p.relative_to(doc_dir).as_posix(): p.read_bytes()
        for p in sorted(doc_dir.rglob("*"))
        if p.is_file()
    }


def read_lock_json(doc_dir: Path) -> dict[str, Any]:
    return json.loads((doc_dir / "dlm.lock").read_bytes())


def write_lock_json(doc_dir: Path, obj: dict[str, Any]) -> bytes:
    data = canonical_json(obj)
    (doc_dir / "dlm.lock").write_bytes(data)
    return data


def drift(doc_dir: Path, *edits: Drift) -> bytes:
    """Apply `edits` to the lock's JSON, write it back canonically, return the bytes."""
    obj = read_lock_json(doc_dir)
    for edit in edits:
        edit(obj)
    return write_lock_json(doc_dir, obj)


def set_field(path: str, value: Any) -> Drift:
    def edit(obj: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        target = obj
        for p in parents:
            target = target[p]
        assert leaf in target or parents, f"lock has no field {path}"
        target[leaf] = value

    return edit


def torch_version(obj: dict[str, Any]) -> str:
    return obj["pinned_versions"]["torch"]


def torch_major_drift(obj: dict[str, Any]) -> None:
    major = int(torch_version(obj).split(".")[0])
    obj["pinned_versions"]["torch"] = f"{major - 1}.13.0"


def torch_minor_drift(obj: dict[str, Any]) -> None:
    major = torch_version(obj).split(".")[0]
    obj["pinned_versions"]["torch"] = f"{major}.999.0"


def torch_local_drift(obj: dict[str, Any]) -> None:
    public = torch_version(obj).split("+")[0]
    obj["pinned_versions"]["torch"] = public + "+cu130"


def one_line(err: str) -> str:
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def assert_untouched(doc_dir: Path, before: dict[str, bytes]) -> None:
    """Every file in the document directory is byte-identical; nothing new appeared."""
    after = snapshot(doc_dir)
    assert sorted(after) == sorted(before)
    for name in before:
        assert after[name] == before[name], f"{name} changed after a failed run"
    leftovers = [p.name for p in doc_dir.iterdir() if p.name.startswith(".")]
    assert leftovers == []


ERROR_DRIFTS: list[tuple[str, Drift]] = [
    ("base_model", set_field("base_model", "hf:someorg/other-model@" + "a" * 40)),
    ("base_model_revision", set_field("base_model_revision", "tiny-0000000000000000")),
    ("base_model_sha256", set_field("base_model_sha256", "0" * 64)),
    ("pinned_versions.torch", torch_major_drift),
    ("dlm_id", set_field("dlm_id", "01M800GRBP0GEV3WAMXAHDD42C")),
]

WARN_DRIFTS: list[tuple[str, Drift]] = [
    ("pinned_versions.torch", torch_minor_drift),
    ("pinned_versions.torch", torch_local_drift),
    *(
        (f"pinned_versions.{name}", set_field(f"pinned_versions.{name}", "0.0.1"))
        for name in ("transformers", "peft", "safetensors", "tokenizers", "accelerate", "numpy")
    ),
    ("hardware_tier", set_field("hardware_tier", "cuda-sm80+")),
    ("determinism_class", set_field("determinism_class", "best-effort")),
    ("determinism_flags", set_field("determinism_flags.threads", 8)),
    ("seed", set_field("seed", 7)),
    ("cuda_version", set_field("cuda_version", "12.4")),
    ("rocm_version", set_field("rocm_version", "6.1")),
    (
        "license_acceptance",
        set_field(
            "license_acceptance",
            {"accepted": True, "license": "apache-2.0", "requires_acceptance": False},
        ),
    ),
]


def _ids(rows: list[tuple[str, Drift]]) -> list[str]:
    return [
        f"{field}-{edit.__name__}" if edit.__name__ != "edit" else field for field, edit in rows
    ]


# --------------------------------------------------------------------------- ERROR rows


@pytest.mark.parametrize(("field", "edit"), ERROR_DRIFTS, ids=_ids(ERROR_DRIFTS))
def test_error_drift_aborts_and_keeps_outputs(
    trained_repo: Path, train: RunCli, field: str, edit: Drift
) -> None:
    drift(trained_repo, edit)
    before = snapshot(trained_repo)
    code, out, err = train(trained_repo)
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    assert f"{field} changed" in line
    assert "--update-lock" in line
    assert "dlm.lock" in line
    assert "trained" not in out
    assert_untouched(trained_repo, before)


def test_multiple_error_drifts_are_all_listed(trained_repo: Path, train: RunCli) -> None:
    drift(
        trained_repo,
        set_field("base_model_sha256", "0" * 64),
        set_field("base_model_revision", "tiny-0000000000000000"),
        torch_major_drift,
        set_field("seed", 7),  # a WARN alongside the ERRORs does not hide them
    )
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo)
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    for field in ("base_model_sha256", "base_model_revision", "pinned_versions.torch"):
        assert f"ERROR {field} changed" in line
    assert line.count("ERROR ") == 3
    assert "--update-lock" in line
    assert_untouched(trained_repo, before)


# --------------------------------------------------------------------------- WARN rows


@pytest.mark.parametrize(("field", "edit"), WARN_DRIFTS, ids=_ids(WARN_DRIFTS))
def test_warn_drift_warns_trains_and_rewrites_lock(
    trained_repo: Path, trained_once: Trained, train: RunCli, field: str, edit: Drift
) -> None:
    drifted = drift(trained_repo, edit)
    assert drifted != trained_once.files["dlm.lock"]
    code, out, err = train(trained_repo)
    assert code == 0, err
    warns = [ln for ln in err.splitlines() if "WARN" in ln]
    assert len(warns) == 1, err
    # mapping fields are reported per changed key (e.g. determinism_flags.threads)
    assert f"WARN {field}" in warns[0] and "changed" in warns[0]
    assert "dlm.lock" in warns[0]
    assert "lock validation failed" not in err
    assert "trained 3 steps" in out
    # the lock now records the current environment, i.e. what the original run recorded
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]
    assert snapshot(trained_repo) | {"run.json": b""} == trained_once.files | {"run.json": b""}


def test_several_warn_drifts_each_warn(trained_repo: Path, train: RunCli) -> None:
    drift(trained_repo, set_field("seed", 7), set_field("pinned_versions.numpy", "0.0.1"))
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert "WARN seed changed: 7 -> 42" in err
    assert "WARN pinned_versions.numpy changed: '0.0.1' -> " in err


STRICT_DRIFTS = WARN_DRIFTS[:1] + WARN_DRIFTS[-5:-1]


@pytest.mark.parametrize(("field", "edit"), STRICT_DRIFTS, ids=_ids(STRICT_DRIFTS))
def test_strict_lock_turns_warn_into_error(
    trained_repo: Path, train: RunCli, field: str, edit: Drift
) -> None:
    drift(trained_repo, edit)
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo, "--strict-lock")
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    # mapping fields are reported per changed key (e.g. determinism_flags.threads)
    assert f"ERROR {field} changed" in line or f"ERROR {field}." in line
    assert "--update-lock" in line
    assert_untouched(trained_repo, before)


def test_strict_lock_without_drift_trains(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    code, _, err = train(trained_repo, "--strict-lock")
    assert code == 0, err
    assert "WARN" not in err
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]


# --------------------------------------------------------------------------- ALLOW row


def test_editing_the_document_is_allowed(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    doc = trained_repo / DOC_NAME
    text = doc.read_text("utf-8")
    marker = "The same document, the same sources and the same base model give the same bytes."
    assert marker in text
    doc.write_text(text.replace(marker, marker + " Editing the prose is normal."), "utf-8")
    new_sha = hashlib.sha256(doc.read_bytes()).hexdigest()

    code, _, err = train(trained_repo, "--strict-lock")  # ALLOW stays allowed under strict
    assert code == 0, err
    assert "WARN" not in err
    assert "dlm.lock" not in err
    lock = read_lock_json(trained_repo)
    old = json.loads(trained_once.files["dlm.lock"])
    assert lock["dlm_sha256"] == new_sha != old["dlm_sha256"]
    assert {k: v for k, v in lock.items() if k != "dlm_sha256"} == {
        k: v for k, v in old.items() if k != "dlm_sha256"
    }
    manifest = json.loads((trained_repo / "manifest.json").read_bytes())
    assert manifest["dlm_sha256"] == new_sha
    assert (
        manifest["lock_sha256"]
        == hashlib.sha256((trained_repo / "dlm.lock").read_bytes()).hexdigest()
    )


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
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "mutually exclusive" in one_line(proc.stderr)
    assert proc.stdout == ""
    assert_untouched(trained_repo, before)


# --------------------------------------------------------------------------- corrupt locks

CORRUPT_LOCKS = {
    "garbage": b"\x00\xff\xfe not a lock \x89PNG\r\n",
    "truncated": b'{\n  "base_model": "builtin:tiny",\n  "base_',
    "not-an-object": b"[]\n",
}


def unknown_version(doc_dir: Path) -> bytes:
    return drift(doc_dir, set_field("lock_version", 99))


def corrupt(doc_dir: Path, kind: str) -> bytes:
    if kind == "lock_version-99":
        return unknown_version(doc_dir)
    if kind == "extra-field":
        return drift(doc_dir, lambda obj: obj.update(hostname="build-7"))
    data = CORRUPT_LOCKS[kind]
    (doc_dir / "dlm.lock").write_bytes(data)
    return data


CORRUPT_KINDS = [*CORRUPT_LOCKS, "lock_version-99", "extra-field"]


@pytest.mark.parametrize("kind", CORRUPT_KINDS)
@pytest.mark.parametrize("mode", [(), ("--strict-lock",)], ids=["default", "strict"])
def test_corrupt_lock_is_a_clear_error(
    trained_repo: Path, train: RunCli, kind: str, mode: tuple[str, ...]
) -> None:
    corrupt(trained_repo, kind)
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo, *mode)
    assert code == 1
    line = one_line(err)
    assert line.startswith(str(trained_repo / "dlm.lock") + ": ")
    if kind == "lock_version-99":
        assert "lock_version 99" in line
    assert "--update-lock" in line
    assert_untouched(trained_repo, before)


@pytest.mark.parametrize("kind", ["garbage", "lock_version-99"])
def test_update_lock_replaces_a_corrupt_lock(
    trained_repo: Path, trained_once: Trained, train: RunCli, kind: str
) -> None:
    bad = corrupt(trained_repo, kind)
    code, _, err = train(trained_repo, "--update-lock")
    assert code == 0, err
    data = (trained_repo / "dlm.lock").read_bytes()
    lock = json.loads(data)
    # the replaced lock in the form git stores it (CRLF as LF), as the hook hashes HEAD's
    assert lock["supersedes"] == hashlib.sha256(bad.replace(b"\r\n", b"\n")).hexdigest()
    assert {**lock, "supersedes": None} == json.loads(trained_once.files["dlm.lock"])
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert (trained_repo / "dlm.lock").read_bytes() == data


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

    def half_save(model: Any, staging: Path, base_spec: str) -> None:
        real(model, staging, base_spec)
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
