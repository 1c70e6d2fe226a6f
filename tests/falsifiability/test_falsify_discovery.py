"""Forgeries of *which* documents get checked, of the base a record names, and of a
merge: each must fail `dlm-git verify` naming the check that caught it, and the git
hooks (installed in the copy, driven by real `git commit` / `git merge` / `git push`)
must refuse it with a one-line finding.

- A document dropped from params.yaml `documents:` while its records remain, with its
  sources edited: found by its records anyway (`pipeline.documents`, then
  `sources.root`). params.yaml is hostile input: it never narrows the set.
- Lock and manifest naming another base than the `.dlm`'s `base_model`, hashes re-bound:
  `doc.base_model`.
- A branch whose `.dlm` was edited without retraining (committed `--no-verify`), merged
  without conflicts: the pre-merge-commit hook refuses it; merged `--no-verify`,
  `doc.sha256` catches the merge commit and the pre-push hook refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.env import run
from tests.support.verdicts import assert_caught
from tests.support.verified import DOC

pytestmark = pytest.mark.slow


def install_hooks(forge: Any) -> None:
    run(["dlm-git", "hooks", "install"], forge.root)


def git_try(forge: Any, *args: str) -> Any:
    """A git command through the installed hooks; never raises."""
    return run(["git", *args], forge.root, check=False)


def finding_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("dlm-git: ")]


def refused(proc: Any, action: str) -> list[str]:
    """Exit 1, every dlm-git line one finding, the last one saying `<action> refused`."""
    why = f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode != 0, why
    assert "Traceback" not in proc.stderr, why
    lines = finding_lines(proc.stderr)
    assert lines and lines[-1].endswith(f"{action} refused"), why
    return lines[:-1]


def push_to_bare(forge: Any, tmp_path: Path) -> Any:
    remote = tmp_path / "remote.git"
    run(["git", "init", "-q", "--bare", str(remote)], tmp_path)
    forge.git("remote", "add", "origin", str(remote))
    return git_try(forge, "push", "-q", "origin", "HEAD:refs/heads/main")


def docs_by_name(result: Any) -> dict[str, dict[str, Any]]:
    return {d["doc"]: d for d in result.payload["documents"]}


def first_failure(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["checks"] if not c["ok"])


def edit_source(forge: Any) -> None:
    notes = forge.root / DOC / "notes"
    target = sorted(p for p in notes.iterdir() if p.is_file())[0]
    target.write_text(target.read_text() + "\nWritten after training.\n")


def set_documents(forge: Any, value: Any) -> None:
    params = yaml.safe_load(forge.read("params.yaml"))
    params["documents"] = value
    forge.write("params.yaml", yaml.safe_dump(params, sort_keys=False).encode())


# --------------------------------------------------------------------------- dropped


@pytest.mark.parametrize("listing", ["emptied", "another", "key_removed"])
def test_document_dropped_from_params_with_sources_edited(forge: Any, listing: str) -> None:
    """Before: verify read only the listed documents, so a dropped one went unchecked
    and its edited sources passed (`verify HEAD` VERIFIED, both hooks silent)."""
    if listing == "key_removed":
        params = yaml.safe_load(forge.read("params.yaml"))
        del params["documents"]
        forge.write("params.yaml", yaml.safe_dump(params, sort_keys=False).encode())
    else:
        set_documents(forge, [] if listing == "emptied" else ["elsewhere"])
    edit_source(forge)
    forge.commit(f"{DOC} dropped from params.yaml ({listing}), a source edited")
    result = forge.verify("HEAD")
    assert result.code == 1, result.explain()
    assert result.payload["verdict"] == "FAILED"
    docs = docs_by_name(result)
    doc = docs[DOC]
    assert doc["verdict"] == "FAILED", doc
    names = [c["name"] for c in doc["checks"] if not c["ok"]]
    if listing == "key_removed":
        # no `documents:` list at all (no pipeline): found anyway, caught by its sources
        assert names[0] == "sources.root", doc
    else:
        assert names[:2] == ["pipeline.documents", "sources.root"], doc
        assert "does not list it" in first_failure(doc)["detail"]
    if listing == "another":
        # params.yaml naming a directory that holds no .dlm is reported, not trusted
        assert first_failure(docs["elsewhere"])["name"] == "pipeline.documents"
        assert "holds no .dlm" in first_failure(docs["elsewhere"])["detail"]
        assert set(docs) == {DOC, "elsewhere"}


def test_dropped_document_is_refused_by_both_hooks(forge: Any, tmp_path: Path) -> None:
    install_hooks(forge)
    before = forge.git("rev-parse", "HEAD").strip()
    set_documents(forge, [])
    edit_source(forge)
    forge.git("add", "-A")
    proc = git_try(forge, "commit", "-q", "-m", "drop demo, edit a source")
    lines = refused(proc, "commit")
    assert forge.git("rev-parse", "HEAD").strip() == before
    assert any(
        f"ERROR {DOC}: " in ln and "params.yaml documents: does not list it" in ln for ln in lines
    ), lines
    assert any("staged sources differ" in ln for ln in lines), lines
    # Dropping it alone (sources intact) is refused too: its records remain.
    forge.git("checkout", "-q", "HEAD", "--", f"{DOC}/notes")
    forge.git("add", "-A")
    lines = refused(git_try(forge, "commit", "-q", "-m", "drop demo"), "commit")
    assert len(lines) == 1 and "does not list it" in lines[0], lines
    # Past the pre-commit hook, the pre-push hook refuses it.
    edit_source(forge)
    forge.git("add", "-A")
    forge.git("commit", "-q", "--no-verify", "-m", "drop demo, edit a source")
    lines = refused(push_to_bare(forge, tmp_path), "push")
    assert len(lines) == 1 and f"ERROR {DOC}@" in lines[0], lines
    assert "pipeline.documents" in lines[0], lines


@pytest.mark.parametrize(
    "value",
    [["demo", "../outside", "/etc", 3], "demo", {"demo": True}],
    ids=["bad-entries", "a-string", "a-mapping"],
)
def test_hostile_params_documents_are_reported(forge: Any, value: Any) -> None:
    """Entries outside the repository or not strings, a `documents:` that is not a list:
    reported against params.yaml (never passed to git, never a crash); a string is not
    iterated as directory names; the document is verified all the same."""
    set_documents(forge, value)
    forge.commit("hostile params.yaml")
    result = forge.verify("HEAD")
    assert result.code == 1, result.explain()
    docs = docs_by_name(result)
    assert set(docs) == {DOC, "params.yaml"}, sorted(docs)
    about = docs["params.yaml"]
    assert about["verdict"] == "FAILED" and first_failure(about)["name"] == "pipeline.documents"
    demo = docs[DOC]
    if isinstance(value, list):
        assert demo["verdict"] == "VERIFIED", demo
        details = [c["detail"] for c in about["checks"]]
        assert [c["name"] for c in about["checks"]] == ["pipeline.documents"] * 3, about
        for what in ("'../outside'", "'/etc'", "entry 4 (3)"):
            assert any(what in d for d in details), details
    else:
        assert first_failure(demo)["name"] == "pipeline.documents", demo
        assert "not a list" in first_failure(about)["detail"]


# --------------------------------------------------------------------------- base model


OTHER_BASE = {"records": "../bases/tiny", "document": "smollm2-135m"}
"""`records`: the same tiny base's bytes, named as a local directory (the pipeline's
build), so every other check passes on it; `document`: a registry base never trained."""


def forge_base(forge: Any, where: str) -> None:
    """`records`: lock.base_model and manifest.base.spec name another base (agreeing with
    each other, lock_sha256 re-bound); `document`: the .dlm's base_model names another
    base, dlm_sha256 re-bound everywhere."""
    other = OTHER_BASE[where]
    if where == "records":
        manifest = forge.manifest()
        manifest["base"]["spec"] = other
        forge.write_manifest(manifest)
        lock = forge.lock()
        lock["base_model"] = other
        forge.write_lock(lock)
    else:
        rel = f"{DOC}/{DOC}.dlm"
        text = forge.read(rel).decode()
        assert "\nbase_model: builtin:tiny\n" in text
        forge.rebind_document(text.replace("base_model: builtin:tiny", f"base_model: {other}"))


@pytest.mark.parametrize("where", ["records", "document"])
def test_base_model_disagrees_with_the_document(forge: Any, where: str) -> None:
    """Before: lock.fields compared lock and manifest with each other only, so both
    naming another base than the .dlm (or the .dlm naming another) verified."""
    forge_base(forge, where)
    forge.commit(f"base model forged in the {where}")
    result = forge.verify("HEAD")
    assert_caught(result, "doc.base_model")
    detail = result.first_failure["detail"]
    assert OTHER_BASE[where] in detail and "builtin:tiny" in detail, detail
    for bound in ("lock.binding", "lock.fields", "doc.sha256"):
        assert result.check(bound)["ok"], result.explain()
    failed = [c["name"] for c in result.checks if not c["ok"]]
    assert failed == ["doc.base_model"], result.explain()  # nothing else could tell


@pytest.mark.parametrize("where", ["records", "document"])
def test_base_model_disagreement_is_refused_by_pre_commit(forge: Any, where: str) -> None:
    install_hooks(forge)
    before = forge.git("rev-parse", "HEAD").strip()
    forge_base(forge, where)
    forge.git("add", "-A")
    lines = refused(git_try(forge, "commit", "-q", "-m", "base forged"), "commit")
    assert forge.git("rev-parse", "HEAD").strip() == before
    base = [ln for ln in lines if "trains on base_model" in ln]
    assert len(base) == 1 and base[0].startswith(f"dlm-git: ERROR {DOC}: "), lines
    assert "'builtin:tiny'" in base[0] and f"'{OTHER_BASE[where]}'" in base[0], base


# --------------------------------------------------------------------------- merge


def test_stale_merge_is_refused_and_caught(forge: Any, tmp_path: Path) -> None:
    """A branch edits the .dlm without retraining (committed past its pre-commit hook);
    the base branch moves on; `git merge` commits by itself, so only pre-merge-commit
    runs. Before: no hook ran and the stale merge was committed."""
    install_hooks(forge)
    base = forge.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    forge.git("checkout", "-q", "-b", "feature")
    rel = f"{DOC}/{DOC}.dlm"
    forge.write(rel, forge.read(rel) + b"\nAdded on a branch, never trained.\n")
    forge.git("add", "-A")
    forge.git("commit", "-q", "--no-verify", "-m", "edit without retraining")
    forge.git("checkout", "-q", base)
    forge.write("README.md", b"# Moved on\n")
    forge.git("add", "-A")
    proc = git_try(forge, "commit", "-q", "-m", "readme")
    assert proc.returncode == 0, proc.stderr
    before = forge.git("rev-parse", "HEAD").strip()
    proc = git_try(forge, "merge", "--no-edit", "feature")
    lines = refused(proc, "merge")
    assert forge.git("rev-parse", "HEAD").strip() == before
    assert len(lines) == 1 and f"ERROR {DOC}: " in lines[0], lines
    assert "changed since it was trained" in lines[0], lines
    # Merged past the hook: verify and the pre-push hook catch the merge commit.
    forge.git("merge", "--abort")
    forge.git("merge", "-q", "--no-edit", "--no-verify", "feature")
    merge = forge.git("rev-parse", "HEAD").strip()
    assert len(forge.git("rev-list", "--parents", "-n1", merge).split()) == 3
    assert_caught(forge.verify("HEAD"), "doc.sha256")
    lines = refused(push_to_bare(forge, tmp_path), "push")
    assert len(lines) == 1 and f"{DOC}@{merge[:12]}" in lines[0], lines
    assert "doc.sha256" in lines[0], lines
