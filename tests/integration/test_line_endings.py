"""Line endings (issue 23, class 7): one commit verifies, trains and commits alike on an
LF and on a CRLF checkout.

A CRLF checkout is made the two ways git makes one: `git clone -c core.autocrlf=true`, and
a committed `.gitattributes` with `text eol=crlf`. On it, the commit's records verify (also
`verify --worktree`, which reads the CRLF files), `dvc repro --force` trains the adapter
and writes the records the LF checkout committed, byte for byte, and an edit made with
CRLF, retrained, passes the pre-commit hook and verifies there and on an LF checkout,
where training it again gives the same records. Every text input is hashed in the form git
stores (`hashing.canonical_text`); records from before that rule (raw-bytes digests of a
document committed with CRLF) still verify.

The trained repository is the falsifiability suite's (`verified_repo`, built once per
session); every checkout is a `git clone` of it with the DVC cache and the base copied in
(what `dvc pull` and the base stage give a fresh clone).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import sha256_bytes
from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import git
from tests.support.verdicts import assert_caught, assert_verified, call_main_in
from tests.support.verified import DOC

pytestmark = pytest.mark.slow

RECORDS = ("dlm.lock", "manifest.json")
GITATTRIBUTES = (
    "*.dlm text eol=crlf\n*.md text eol=crlf\n*.json text eol=crlf\n*.lock text eol=crlf\n"
)
EDIT_QA = "\n::instruction::\n### Q\nWhich line ends are these?\n\n### A\nCRLF ones.\n"
EDIT_NOTE = "A note written on a CRLF checkout.\nIts second line.\n"


def checkout(src: Path, dest: Path, kind: str) -> Path:
    """A clone of `src` at `dest`, checked out as `kind` says ("lf", "autocrlf" or
    "gitattributes": commits a `.gitattributes` asking for CRLF), with `src`'s DVC cache
    and tiny base copied in and the DVC outs checked out (what `dvc pull` gives)."""
    config = ["-c", f"core.autocrlf={'true' if kind == 'autocrlf' else 'false'}"]
    run(["git", "clone", "-q", *config, str(src), str(dest)], src.parent)
    git(dest, "config", "user.name", "dlm-git tests")
    git(dest, "config", "user.email", "tests@dlm-git.invalid")
    if kind == "gitattributes":
        (dest / ".gitattributes").write_text(GITATTRIBUTES)
        git(dest, "add", ".gitattributes")
        git(dest, "commit", "-q", "--no-verify", "-m", "check text out with CRLF")
    elif kind == "lf" and (dest / ".gitattributes").is_file():
        (dest / ".git" / "info" / "attributes").write_text("* -text\n")  # beats .gitattributes
    if kind != "autocrlf":  # check every tracked file out again under the attributes
        for rel in git(dest, "ls-files", "-z").split("\0"):
            if rel and rel != ".gitattributes":
                (dest / rel).unlink()
        git(dest, "checkout", "--", ".")
    shutil.copytree(src / ".dvc" / "cache", dest / ".dvc" / "cache", dirs_exist_ok=True)
    shutil.copytree(src / "bases", dest / "bases", symlinks=True)
    run(["dvc", "checkout", "-q"], dest)
    dlm = (dest / DOC / f"{DOC}.dlm").read_bytes()
    assert (b"\r\n" in dlm) == (kind != "lf"), f"{kind} checkout: {dlm[:80]!r}"
    return dest


def verify(repo: Path, capfd: Any, *args: str) -> Any:
    return Forge(repo, call_main_in(repo, capfd)).verify(*args)


def blob(repo: Path, name: str) -> bytes:
    """The bytes git stores for `name` (`HEAD:path`), read as bytes (no newline translation)."""
    return subprocess.run(
        ["git", "cat-file", "blob", name], cwd=repo, check=True, capture_output=True
    ).stdout


def committed(repo: Path, name: str) -> bytes:
    return blob(repo, f"HEAD:{DOC}/{name}")


def assert_trains_the_commit(repo: Path) -> None:
    """`dvc repro --force` (every stage, training included) writes the records HEAD
    holds, byte for byte: the same dlm_sha256, sources, section ids and adapter."""
    run(["dvc", "repro", "--force"], repo)
    for name in RECORDS:
        assert (repo / DOC / name).read_bytes() == committed(repo, name), name


@pytest.mark.parametrize("kind", ["autocrlf", "gitattributes"])
def test_a_crlf_checkout_trains_commits_and_verifies_like_an_lf_one(
    verified_repo: Path, tmp_path: Path, capfd: Any, kind: str
) -> None:
    crlf = checkout(verified_repo, tmp_path / "crlf", kind)
    assert_verified(verify(crlf, capfd, "HEAD"))
    # the work tree's CRLF document, sources (and, here, records) are the commit's
    assert_verified(verify(crlf, capfd, "--worktree", "--doc", DOC))
    # evaluating the CRLF checkout's records writes the committed record: the manifest it
    # names is digested as git stores it
    run(["dlm-git", "eval", DOC], crlf)
    evaluated = (crlf / DOC / "eval.json").read_bytes()
    assert json.loads(evaluated) == json.loads(blob(crlf, f"HEAD:{DOC}/eval.json"))
    assert_trains_the_commit(crlf)
    adapter = Forge(crlf, None).manifest()["adapter"]
    assert adapter == Forge(verified_repo, None).manifest()["adapter"]
    if kind != "autocrlf":
        return  # the round trip below depends on git's conversion alone: run it once

    # an edit made on the CRLF checkout: retrained, committed through the hooks
    doc = crlf / DOC / f"{DOC}.dlm"
    doc.write_bytes(doc.read_bytes() + EDIT_QA.replace("\n", "\r\n").encode())
    note = crlf / DOC / "notes" / "crlf-note.md"
    note.write_bytes(EDIT_NOTE.replace("\n", "\r\n").encode())
    run(["dvc", "repro"], crlf)
    run(["dlm-git", "hooks", "install"], crlf)
    git(crlf, "add", "-A")
    done = run(["git", "commit", "-q", "-m", "edited with CRLF"], crlf, check=False)
    assert done.returncode == 0, done.stderr
    assert git(crlf, "status", "--porcelain", "--untracked-files=no") == ""
    assert_verified(verify(crlf, capfd, "HEAD"))
    assert blob(crlf, f"HEAD:{DOC}/notes/crlf-note.md") == EDIT_NOTE.encode()  # as LF

    # the same commit on an LF checkout: verified, and trained to the same records
    lf = checkout(crlf, tmp_path / "lf", "lf")
    assert_verified(verify(lf, capfd, "HEAD"))
    assert_verified(verify(lf, capfd, "--worktree", "--doc", DOC))
    assert_trains_the_commit(lf)


def test_records_from_before_the_line_end_rule_still_verify(forge: Any) -> None:
    """A document and a source committed with CRLF (no conversion) and recorded as dlm-git
    recorded them before the rule: sha256 and size of the raw bytes. Those records are of
    the very bytes in the commit (the rows trained are the same: the parser normalizes
    line ends), so they verify, and the report says they are raw-bytes digests; a raw
    digest of other bytes still fails."""
    from dlm_git.manifest.records import sources_record

    forge.git("config", "core.autocrlf", "false")
    dlm_rel, note_rel = f"{DOC}/{DOC}.dlm", f"{DOC}/notes/README.md"
    dlm, note = (forge.read(dlm_rel).replace(b"\n", b"\r\n"), forge.read(note_rel))
    note = note.replace(b"\n", b"\r\n")
    forge.write(dlm_rel, dlm)
    forge.write(note_rel, note)
    manifest = forge.manifest()
    for entry in manifest["sources"]["files"]:
        if entry["relpath"] == "notes/README.md":
            entry["sha256"], entry["size"] = sha256_bytes(note), len(note)
    manifest["sources"] = sources_record(
        (f["relpath"], f["sha256"], f["size"]) for f in manifest["sources"]["files"]
    ).model_dump(mode="json")
    manifest["dlm_sha256"] = sha256_bytes(dlm)
    forge.write_manifest(manifest)
    lock = forge.lock()
    lock["dlm_sha256"] = sha256_bytes(dlm)
    forge.write_lock(lock)
    forge.commit("recorded by an older dlm-git")
    assert blob(forge.root, f"HEAD:{dlm_rel}") == dlm  # committed with CRLF
    result = forge.verify("HEAD")
    assert_verified(result)
    assert "raw bytes" in result.check("doc.sha256")["detail"]
    assert "raw bytes" in result.check("sources.root")["detail"]
    # the raw digest of bytes that are not the commit's is no record of it
    lock["dlm_sha256"] = manifest["dlm_sha256"] = sha256_bytes(dlm + b"\r\n")
    forge.write_manifest(manifest)
    forge.write_lock(lock)
    forge.commit("a raw digest of other bytes")
    assert_caught(forge.verify("HEAD"), "doc.sha256")
