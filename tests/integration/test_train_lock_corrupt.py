"""`train` with a corrupt `dlm.lock` (not JSON, wrong shape, unknown version, an extra
field): one clear error and nothing written, unless `--update-lock` replaces it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.cli import RunCli, one_line
from tests.support.demo import Trained
from tests.support.files import snapshot
from tests.support.lockedits import assert_untouched, drift, set_field

pytestmark = pytest.mark.slow


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
