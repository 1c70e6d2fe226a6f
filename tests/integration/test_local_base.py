"""A local-directory base (`base_model: ../mybase`): verified like any other base.

The base is machine-local (never in the commit): the hash level finds it beside the work
tree and checks its identity; a replay trains in a temp tree but takes the base from the
same place, and a license that needs accepting is accepted by the auditor's own flag.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.demo import write_demo
from tests.support.gitrepo import git

pytestmark = pytest.mark.slow

SMALL = {"max_steps": "3", "sequence_len": "64"}


@pytest.fixture
def local_base_repo(git_repo: Path, base_cache: Path) -> Path:
    from dlm_git.base.tiny import ensure_tiny_base

    repo = git_repo
    shutil.copytree(ensure_tiny_base(), repo / "mybase")
    (repo / ".gitignore").write_text("mybase/\nadapter/\nrun.json\n.dlm-git/\n", "utf-8")
    doc_dir = repo / "d"
    write_demo(doc_dir, name="d.dlm", base_model="../mybase", **SMALL)
    return repo


def test_a_local_base_verifies_and_replays(local_base_repo: Path, run_cli: Any) -> None:
    repo = local_base_repo
    code, _, err = run_cli("train", repo / "d", "-q", "--device", "cpu")
    assert code == 1 and "--accept-license" in err, err  # license 'unknown' needs accepting
    code, _, err = run_cli("train", repo / "d", "-q", "--device", "cpu", "--accept-license")
    assert code == 0, err
    lock = json.loads((repo / "d" / "dlm.lock").read_text("utf-8"))
    assert lock["base_model"] == "../mybase" and lock["base_model_revision"] is None
    # the pipeline's verify stage (no revision to record is not "nothing recorded")
    code, out, err = run_cli("verify", "--worktree", "--doc", repo / "d", "--no-dvc", "--json")
    assert code == 0 and json.loads(out)["documents"][0]["verdict"] == "VERIFIED", out + err
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "trained on a local base")

    with contextlib.chdir(repo):
        code, out, _ = run_cli("verify", "HEAD", "--level", "replay", "--json")
        replay = {c["name"]: c for c in json.loads(out)["documents"][0]["checks"]}["replay"]
        assert not replay["ok"] and "--accept-license" in replay["detail"], replay
        code, out, err = run_cli(
            "verify", "HEAD", "--level", "replay", "--accept-license", "--json"
        )
    doc = json.loads(out)["documents"][0]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["replay"]["ok"] and "bitwise identical" in checks["replay"]["detail"], doc
    assert checks["base.identity"]["ok"], doc

    # a revision recorded for it (lock and manifest alike, the lock re-bound): a local
    # directory has none, so the records claim a base snapshot no training resolved
    from dlm_git.hashing import sha256_bytes
    from tests.support.forger import Forge

    forge = Forge(repo, None)
    forged = forge.read_json("d/dlm.lock")
    forged["base_model_revision"] = "0123456789abcdef0123456789abcdef01234567"
    lock_bytes = forge.write_canonical("d/dlm.lock", forged)
    manifest = forge.read_json("d/manifest.json")
    manifest["base"]["revision"] = forged["base_model_revision"]
    manifest["lock_sha256"] = sha256_bytes(lock_bytes)
    forge.write_canonical("d/manifest.json", manifest)
    forge.commit("a revision no local base has")
    with contextlib.chdir(repo):
        code, out, _ = run_cli("verify", "HEAD", "--json")
    doc = json.loads(out)["documents"][0]
    failed = [c for c in doc["checks"] if c["state"] == "failed"]
    assert code == 1 and [c["name"] for c in failed] == ["doc.base_model"], doc
    assert "has none" in failed[0]["detail"], failed
