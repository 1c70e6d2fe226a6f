"""git's object rewriting never reaches a verdict (issue 23, class 2).

Replace refs (`git replace`, `git replace --graft`, fetched with `refs/replace/*`) and
grafts (`.git/info/grafts`, `GIT_GRAFT_FILE`) make git answer for an object id with other
trees, blobs or parents. dlm-git judges a commit's own objects: a forged commit dressed
up with a replacement still fails the check its real objects fail, the verdict remembered
for its sha is that one, the trust policy comes from its real first parent, an honest
commit still verifies however its objects are "replaced", and the hooks and `dlm-git log`
read the same real objects.

Every replacement is made with git's own commands on a copy of the session's verified
repository (`forge`); object ids are taken before a replacement exists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import run
from tests.support.gitrepo import git
from tests.support.signing import Signed, keygen
from tests.support.tensorfiles import edit_weight
from tests.support.verdicts import assert_caught, assert_verified, caught
from tests.support.verified import DOC, WEIGHTS

pytestmark = pytest.mark.slow

DLM = f"{DOC}/{DOC}.dlm"
MANIFEST = f"{DOC}/manifest.json"


def rev(forge: Any, name: str) -> str:
    return str(forge.git("rev-parse", "--verify", name).strip())


def remembered(forge: Any, sha: str) -> str:
    """The verdict this machine remembers for `sha`'s document (`verdicts/<sha>.json`)."""
    from dlm_git.verify.verdicts import known

    return str(known(forge.root, [sha])[sha][DOC]["verdict"])


def edit_document(forge: Any) -> str:
    """A forged commit: the `.dlm` edited after training, records not re-made
    (`doc.sha256` fails). Returns its sha."""
    forge.write(DLM, forge.read(DLM) + b"\nA sentence nobody trained on.\n")
    return str(forge.commit("document edited after training"))


def swap_adapter(forge: Any) -> str:
    """A forged commit: the adapter's weights edited and stored in the DVC cache,
    `dvc.lock` pointing at them, the manifest left alone (`adapter.sha256` fails)."""
    files = forge.adapter_files()
    files[WEIGHTS] = edit_weight(files[WEIGHTS])
    forge.store_adapter(files, rebind="none")
    return str(forge.commit("adapter swapped"))


# Each rewriting: (forged commit, honest commit) -> the `git replace` arguments that make
# git answer for the forged commit's objects with the honest ones.
REWRITES: dict[str, tuple[str, Callable[[str, str], list[str]], str]] = {
    "replaced-blob": ("document", lambda f, h: [f"{f}:{DLM}", f"{h}:{DLM}"], "doc.sha256"),
    "replaced-tree": ("document", lambda f, h: [f"{f}:{DOC}", f"{h}:{DOC}"], "doc.sha256"),
    "replaced-commit": ("document", lambda f, h: [f, h], "doc.sha256"),
    "replaced-dvc-lock": (
        "adapter",
        lambda f, h: [f"{f}:dvc.lock", f"{h}:dvc.lock"],
        "adapter.sha256",
    ),
}


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_a_replace_ref_cannot_dress_a_forged_commit(forge: Any, rewrite: str) -> None:
    kind, objects, check = REWRITES[rewrite]
    honest = rev(forge, "HEAD")
    forged = edit_document(forge) if kind == "document" else swap_adapter(forge)
    assert_caught(forge.verify(forged), check)  # without a replacement
    pair = [rev(forge, name) for name in objects(forged, honest)]
    forge.git("replace", *pair)
    assert forge.git("cat-file", "-p", objects(forged, honest)[0]) == forge.git(
        "cat-file", "-p", pair[1]
    ), "git itself answers with the replacement"
    result = forge.verify(forged)
    assert_caught(result, check)
    assert remembered(forge, forged) == "FAILED"
    assert_verified(forge.verify(honest))
    assert remembered(forge, honest) == "VERIFIED"


def test_a_replace_ref_cannot_fail_an_honest_commit(forge: Any) -> None:
    """The other direction: the honest commit's record blob replaced by a forged one."""
    honest = rev(forge, "HEAD")
    forged = edit_document(forge)
    forge.git("replace", rev(forge, f"{honest}:{DLM}"), rev(forge, f"{forged}:{DLM}"))
    assert_verified(forge.verify(honest))
    assert remembered(forge, honest) == "VERIFIED"


def test_the_pre_push_hook_judges_the_pushed_objects(forge: Any, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], forge.root)
    forge.git("remote", "add", "origin", str(remote))
    honest = rev(forge, "HEAD")
    forged = edit_document(forge)
    forge.git("replace", rev(forge, f"{forged}:{DLM}"), rev(forge, f"{honest}:{DLM}"))
    branch = forge.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    proc = run(["git", "push", "-q", "origin", branch], forge.root, check=False)
    assert proc.returncode == 1 and "doc.sha256" in proc.stderr, proc.stderr
    assert "push refused" in proc.stderr, proc.stderr


def test_the_pre_commit_hook_judges_the_staged_objects(forge: Any) -> None:
    """A stale `.dlm` staged, its blob replaced by the trained one: still stale."""
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], forge.root)
    trained = rev(forge, f"HEAD:{DLM}")
    forge.write(DLM, forge.read(DLM) + b"\nA sentence nobody trained on.\n")
    forge.git("add", DLM)
    forge.git("replace", rev(forge, f":{DLM}"), trained)
    proc = run(["git", "commit", "-q", "-m", "stale document"], forge.root, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "changed since it was trained" in proc.stderr, proc.stderr


def log_entry(forge: Any, sha: str) -> dict[str, Any] | None:
    result = forge._call_main(["log", "--json"])
    assert result.code == 0, result.stderr
    (doc,) = json.loads(result.stdout)["documents"]
    return next((e for e in doc["entries"] if e["commit"] == sha), None)


@pytest.mark.parametrize("rewrite", ["replaced-blob", "replaced-commit"])
def test_log_shows_what_the_commit_records(forge: Any, rewrite: str) -> None:
    honest = rev(forge, "HEAD")
    manifest = forge.manifest()
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "f" * 64
    forge.write_manifest(manifest)
    forged = forge.commit("a manifest naming another adapter")
    if rewrite == "replaced-blob":
        forge.git("replace", rev(forge, f"{forged}:{MANIFEST}"), rev(forge, f"{honest}:{MANIFEST}"))
    else:
        forge.git("replace", forged, honest)
    entry = log_entry(forge, forged)
    assert entry is not None and entry["adapter_sha256"] == "f" * 64, entry
    assert entry["parents"] == [honest], entry


# --------------------------------------------------------------------------- trust policy


def policy_commit(forge: Any, pem: bytes) -> str:
    """A root commit whose tree is only `.dlm-keys/mallory.pem` (plumbing: the work tree
    and the index are untouched)."""
    path = forge.root.parent / "mallory.pem"
    path.write_bytes(pem)
    blob = forge.git("hash-object", "-w", str(path)).strip()
    sub = mktree(forge, f"100644 blob {blob}\tmallory.pem\n")
    root = mktree(forge, f"040000 tree {sub}\t.dlm-keys\n")
    return str(forge.git("commit-tree", root, "-m", "policy: trust mallory").strip())


def mktree(forge: Any, listing: str) -> str:
    return run(["git", "mktree"], forge.root, input=listing).stdout.strip()


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """mallory's key pair, made by `dlm-git keygen` outside every repository."""
    return {"mallory": keygen(tmp_path_factory.mktemp("keys-mallory"))}


GRAFTS: dict[str, Callable[[Any, str, str, str], None]] = {
    "replace-graft": lambda forge, signed, parent, policy: forge.git(
        "replace", "--graft", signed, policy
    ),
    "grafts-file": lambda forge, signed, parent, policy: (
        forge.root / ".git" / "info" / "grafts"
    ).write_text(f"{signed} {policy}\n"),
    "replaced-parent": lambda forge, signed, parent, policy: forge.git("replace", parent, policy),
}


@pytest.mark.parametrize("graft", list(GRAFTS))
def test_the_trust_policy_comes_from_the_real_first_parent(
    forge: Any, keys: dict[str, tuple[Path, Path]], graft: str
) -> None:
    """mallory signs a commit whose real parent trusts no one, and makes git answer for
    that parent with a commit whose policy (`.dlm-keys/`) names her key."""
    s = Signed(forge, keys)
    parent = rev(forge, "HEAD")
    policy = policy_commit(forge, keys["mallory"][1].read_bytes())
    forge.git("branch", "policy", policy)
    s.sign("mallory")
    signed = forge.commit("signed by mallory")
    caught(forge.verify(signed, "--require-signature"), "signature.trusted", "not trusted")
    GRAFTS[graft](forge, signed, parent, policy)
    result = forge.verify(signed, "--require-signature")
    caught(result, "signature.trusted", "not trusted")
    assert remembered(forge, signed) == "FAILED"
    entry = log_entry(forge, signed)
    assert entry is not None and entry["signature"]["state"] == "untrusted", entry


def test_the_pre_commit_hook_reads_the_policy_of_head_itself(
    forge: Any, keys: dict[str, tuple[Path, Path]]
) -> None:
    """The commit being made is judged by HEAD's policy: HEAD replaced by a commit whose
    policy trusts mallory does not make her signature trusted."""
    s = Signed(forge, keys)
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], forge.root)
    forge.git("config", "dlm-git.requireSignature", "true")
    policy = policy_commit(forge, keys["mallory"][1].read_bytes())
    forge.git("replace", rev(forge, "HEAD"), policy)
    s.sign("mallory")
    git(forge.root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "signed by mallory"], forge.root, check=False)
    assert proc.returncode == 1 and "is not trusted" in proc.stderr, proc.stderr
