"""`dlm-git verify` as a command: defaults, older commits, --doc, --json, exit codes,
no side effects on the work tree or index, CANNOT_VERIFY without the DVC cache, and no
pickle ever read.

Uses the trained repository of the falsifiability suite (tests/support/verified.py,
built once per session and copied per test).
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import run
from tests.support.gitrepo import git
from tests.support.verdicts import Result, assert_caught, assert_verified
from tests.support.verified import DOC

pytestmark = pytest.mark.slow

VERIFY_MODULES = [
    "dlm_git/contract/records.py",
    "dlm_git/contract/adapter.py",
    "dlm_git/contract/sources.py",
    "dlm_git/docat.py",
    "dlm_git/verify/hashlevel.py",
    "dlm_git/verify/commit.py",
    "dlm_git/verify/replay.py",
    "dlm_git/verify/report.py",
    "dlm_git/verify/worktree.py",
    "dlm_git/commands/verify.py",
    "dlm_git/hashing.py",
    "dlm_git/dvcfiles.py",
]


def head(forge: Any, rev: str = "HEAD") -> str:
    return forge.git("rev-parse", rev).strip()


# --------------------------------------------------------------------------- defaults


def test_defaults_to_head_at_hash_level(forge: Any) -> None:
    result = forge.verify()  # no COMMIT, no --level
    assert_verified(result)
    assert result.doc["level"] == "hash"
    assert result.doc["commit"] == head(forge)
    assert result.doc["doc"] == DOC


def test_human_output(forge: Any) -> None:
    result = forge._call_main(["verify"])
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].split() == ["demo", "verdict", "VERIFIED"], lines
    assert any(line.split()[:3] == ["demo", "adapter.sha256", "ok"] for line in lines)


def test_older_commit(forge: Any) -> None:
    """A later commit that breaks the record does not change what an older one proves;
    `git dlm verify HEAD~1` works through git's own dispatch."""
    trained = head(forge)
    notes = forge.root / DOC / "notes"
    first = sorted(notes.iterdir())[0]
    first.write_text(first.read_text() + "\nedited after training\n")
    forge.commit("edit a source after training")
    assert_caught(forge.verify("HEAD"), "sources.root")

    proc = run(["git", "dlm", "verify", "HEAD~1", "--json"], forge.root, check=False)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    assert_verified(result)
    assert result.doc["commit"] == trained
    by_sha = forge.verify(trained)
    assert_verified(by_sha)


def test_doc_filter(forge: Any) -> None:
    """Two documents in params.yaml, only one trained: --doc picks one."""
    import yaml

    other = forge.root / "other"
    other.mkdir()
    (other / "other.dlm").write_text(
        "---\ndlm_id: 01M800GRBP0GEV3WAMXAHDD42C\ndlm_version: 1\nbase_model: builtin:tiny\n"
        "---\n\nNot trained yet.\n"
    )
    params = yaml.safe_load((forge.root / "params.yaml").read_text())
    params["documents"].append("other")
    (forge.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    forge.commit("a second, untrained document")

    everything = forge.verify("HEAD")
    assert everything.code == 1
    docs = {d["doc"]: d for d in everything.payload["documents"]}
    assert set(docs) == {DOC, "other"}
    assert docs[DOC]["verdict"] == "VERIFIED"
    assert docs["other"]["verdict"] == "FAILED"
    assert next(c for c in docs["other"]["checks"] if not c["ok"])["name"] == "manifest.parse"

    for arg in (DOC, f"{DOC}/{DOC}.dlm"):
        only = forge.verify("HEAD", "--doc", arg)
        assert_verified(only)
        assert [d["doc"] for d in only.payload["documents"]] == [DOC]
    assert forge.verify("HEAD", "--doc", "other").code == 1


def test_json_shape(forge: Any) -> None:
    payload = forge.verify("HEAD").payload
    assert set(payload) == {"verdict", "documents", "verifier"}  # test_verifier_identity.py
    assert payload["verdict"] == "VERIFIED"
    (doc,) = payload["documents"]
    assert {"doc", "level", "verdict", "adapter_sha256", "checks", "passed", "failed"} <= set(doc)
    assert doc["commit"] == head(forge)
    assert doc["determinism_class"] == "strong"
    assert len(doc["adapter_sha256"]) == 64
    assert doc["passed"] + doc["failed"] == len(doc["checks"]) and doc["failed"] == 0
    for check in doc["checks"]:
        assert set(check) == {"name", "ok", "state", "detail"}
        assert isinstance(check["name"], str) and isinstance(check["ok"], bool)
        assert check["state"] in ("ok", "failed", "absent")
        assert check["ok"] == (check["state"] == "ok")
        assert isinstance(check["detail"], str) and check["detail"]


# --------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    "args",
    [
        ["HEAD", "--level", "bogus"],
        ["no-such-commit"],
        ["HEAD", "--doc", "no-such-doc"],
        ["HEAD", "--doc", "/"],
        ["--worktree"],
        ["--worktree", "--doc", "demo", "--level", "replay"],
        ["HEAD", "--no-such-flag"],
    ],
    ids=["level", "commit", "doc", "doc-outside", "worktree-no-doc", "worktree-replay", "flag"],
)
def test_usage_errors_exit_2(forge: Any, args: list[str]) -> None:
    result = forge._call_main(["verify", *args])
    assert result.code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_not_a_commit_names_it(forge: Any) -> None:
    result = forge._call_main(["verify", "no-such-commit"])
    assert "'no-such-commit' is not a commit" in result.stderr


# --------------------------------------------------------------------------- side effects


def _state(root: Path) -> dict[str, Any]:
    files = {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and ".git" not in p.relative_to(root).parts[:1]
        and p.relative_to(root).parts[:2] != (".dvc", "tmp")
    }
    return {
        "status": git(root, "status", "--porcelain", "--ignored", "--untracked=all"),
        "index": (root / ".git" / "index").read_bytes(),
        "head": git(root, "rev-parse", "HEAD"),
        "refs": git(root, "for-each-ref"),
        "files": files,
    }


def test_never_modifies_worktree_or_index(forge: Any) -> None:
    """Hash and replay levels on a dirty tree (one staged edit, one unstaged edit, one
    untracked file): verify HEAD still verifies the commit, and leaves everything as it
    was, byte for byte (.git/index included)."""
    doc = forge.root / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text() + "\nStaged, not committed.\n")
    forge.git("add", str(doc))
    note = sorted((forge.root / DOC / "notes").iterdir())[0]
    note.write_text(note.read_text() + "\nUnstaged.\n")
    (forge.root / "scratch.txt").write_text("untracked\n")
    before = _state(forge.root)
    assert before["status"]

    assert_verified(forge.verify("HEAD"))
    assert _state(forge.root) == before
    replay = forge.verify_here("HEAD", "--level", "replay")
    assert replay.code == 0 and replay.verdict == "BITWISE", replay.explain()
    assert _state(forge.root) == before


# --------------------------------------------------------------------------- availability


def test_cannot_verify_without_dvc_cache(forge: Any) -> None:
    md5 = forge.out_md5()
    shutil.rmtree(forge.root / ".dvc" / "cache")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.files", verdicts=("CANNOT_VERIFY",))
    detail = result.first_failure["detail"]
    assert md5 in detail and "dvc fetch" in detail and "dvc pull" in detail
    assert any("dvc fetch" in n for n in result.doc["notes"])
    # everything that does not need the adapter was still checked, and passed
    assert all(c["ok"] for c in result.checks if c["name"] != "adapter.files")


# --------------------------------------------------------------------------- no pickle


def test_verify_modules_never_unpickle() -> None:
    root = Path(__file__).resolve().parents[2]
    for rel in VERIFY_MODULES:
        text = (root / rel).read_text("utf-8")
        for needle in ("torch.load", "import pickle", "pickle.load", "weights_only"):
            assert needle not in text, f"{rel} mentions {needle}"


_OPENED: list[str] = []
_HOOKED: list[bool] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], (str, Path)):
        _OPENED.append(str(args[0]))


def _watch_opens() -> list[str]:
    if not _HOOKED:
        sys.addaudithook(_audit)  # cannot be removed: it only appends to a list
        _HOOKED.append(True)
    _OPENED.clear()
    return _OPENED


@pytest.mark.parametrize("keep_safetensors", [True, False], ids=["beside", "only"])
def test_base_pickle_is_never_opened(
    forge: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    keep_safetensors: bool,
) -> None:
    """A `pytorch_model.bin` trap in the base directory (beside the safetensors weights,
    or instead of them): verify never opens it and never unpickles anything."""
    from dlm_git.base.tiny import tiny_dir

    src = tiny_dir()
    cache = tmp_path / "base-cache"
    shutil.copytree(src, cache / src.name)
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    base = tiny_dir()
    trap = base / "pytorch_model.bin"
    trap.write_bytes(pickle.dumps({"trap": True}))
    if not keep_safetensors:
        (base / "model.safetensors").unlink()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("verify unpickled something")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    if "torch" in sys.modules:
        monkeypatch.setattr(sys.modules["torch"], "load", refuse)

    opened = _watch_opens()
    result = forge.verify("HEAD")
    seen = list(opened)
    assert str(trap) not in seen and not any(p.endswith(".bin") for p in seen), seen
    if keep_safetensors:
        assert str(base / "model.safetensors") in seen  # the hook does see what verify opens
        assert_verified(result)
    else:
        assert_caught(result, "adapter.structure")
        identity = result.check("base.identity")
        assert not identity["ok"] and "pytorch_model.bin" in identity["detail"]
        assert "never loads pickle" in identity["detail"], result.explain()
