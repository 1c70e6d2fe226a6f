"""Sources outside the repository (issue 23, class 8): an honest commit is CANNOT_VERIFY
naming them, never FAILED; a forgery of what the commit does hold still FAILS.

`sources_policy: permissive` lets a document train on files no commit holds: an absolute
path, one under `~`, one whose `..` leave the repository. Their files are recorded under
the directive's path as written (the same wherever the document sits), so the record
does not depend on verify's temp directory. Verifying a commit reads none of them (what
this machine has there is not the commit's): `sources.root` and `sections.order` are
absent for them (state "absent", the paths named), while the files inside the repository,
the record's own Merkle root and the document's section ids are compared as always. A
replay refuses such a document instead of training on this machine's files.
`verify --worktree` reads them, like the training run it checks.

The repository is the session's `verified_repo` with three outside directives added,
retrained with `dvc repro` and committed through the pre-commit hook (which warns that
those sources are not in git), built once per module and copied per test.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import git
from tests.support.verdicts import assert_verified, call_main_in
from tests.support.verified import DOC, EXTRA_QA, FIRST_QA, copy_repo

pytestmark = pytest.mark.slow

OUTSIDE_FILES = {
    "abs/a.md": b"An absolute path's fact.\n",
    "home/notes-home/h.md": b"A fact from a home directory.\r\n",
    "shared/s.md": b"A fact two directories up.\n",
}


@dataclass(frozen=True)
class Built:
    repo: Path
    base: Path

    @property
    def directives(self) -> list[str]:
        """The outside paths as the document writes them."""
        return [str(self.base / "abs"), "~/notes-home", "../../shared"]


@pytest.fixture(scope="module")
def outside_repo(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Built:
    base = tmp_path_factory.mktemp("outside-sources")
    for rel, data in OUTSIDE_FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    built = Built(copy_repo(verified_repo, base / "repo"), base)
    doc = built.repo / DOC / f"{DOC}.dlm"
    text = doc.read_text("utf-8")
    anchor = '      include: ["*.md", "*.txt"]\n'
    assert text.count(anchor) == 1 and text.count("training:\n") == 1
    more = "".join(f"    - path: {p}\n" for p in built.directives)
    text = text.replace(anchor, anchor + more).replace(
        "training:\n", "training:\n  sources_policy: permissive\n"
    )
    doc.write_text(text, "utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(base / "home"))
        # outside sources: DVC cannot watch them, so init makes the inputs stage always run
        run(["dlm-git", "init", "--no-hooks"], built.repo)
        run(["dvc", "repro"], built.repo)
        run(["dlm-git", "hooks", "install"], built.repo)
        git(built.repo, "add", "-A")
        done = run(["git", "commit", "-q", "-m", "outside sources"], built.repo)
    assert "WARN" in done.stderr and "outside the repository" in done.stderr, done.stderr
    assert "ERROR" not in done.stderr, done.stderr
    relpaths = [f["relpath"] for f in Forge(built.repo, None).manifest()["sources"]["files"]]
    assert relpaths[1:] == [f"{base}/abs/a.md", "~/notes-home/h.md", "../../shared/s.md"]
    return built


@pytest.fixture
def oforge(
    outside_repo: Built,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """A copy of `outside_repo` (with `../../shared` beside it), HOME set as it was when
    training, for `verify --worktree`."""
    root = copy_repo(outside_repo.repo, tmp_path / "repo")
    shutil.copytree(outside_repo.base / "shared", tmp_path / "shared")
    monkeypatch.setenv("HOME", str(outside_repo.base / "home"))
    return Forge(root, call_main_in(root, capfd))


@contextmanager
def changed_on_this_machine(outside_repo: Built) -> Iterator[None]:
    """The absolute directive's file edited on this machine, for the block."""
    path = outside_repo.base / "abs" / "a.md"
    path.write_bytes(b"Edited on this machine after training.\n")
    try:
        yield
    finally:
        path.write_bytes(OUTSIDE_FILES["abs/a.md"])


def states(result: Any) -> dict[str, str]:
    return {c["name"]: c["state"] for c in result.checks}


def assert_failed_first(result: Any, check: str) -> list[str]:
    """Exit 1, FAILED, and `check` is the first check whose state is failed."""
    why = result.explain()
    assert result.code == 1 and result.payload["verdict"] == "FAILED", why
    assert result.verdict == "FAILED", why
    failed = [c["name"] for c in result.checks if c["state"] == "failed"]
    assert failed and failed[0] == check, why
    return failed


def test_honest_commit_cannot_be_verified_and_says_why(oforge: Any, outside_repo: Built) -> None:
    result = oforge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", why
    got = states(result)
    assert "failed" not in got.values(), why
    assert got["sources.root"] == got["sections.order"] == "absent", why
    detail = result.check("sources.root")["detail"]
    for path in outside_repo.directives:
        assert path in detail, why
    assert "3 files from outside the repository" in detail and "the 1 inside it match" in detail
    # every other check compared and passed
    assert {n for n, s in got.items() if s != "ok"} == {"sources.root", "sections.order"}, why


def test_the_work_tree_reads_them(oforge: Any, outside_repo: Built) -> None:
    """`verify --worktree` checks this machine's inputs, outside ones included: VERIFIED,
    and FAILED once one of them changes, while the commit's verdict does not move."""
    assert_verified(oforge.verify("--worktree", "--doc", DOC))
    with changed_on_this_machine(outside_repo):
        result = oforge.verify("--worktree", "--doc", DOC)
        assert_failed_first(result, "sources.root")
        assert f"{outside_repo.base}/abs/a.md" in result.check("sources.root")["detail"]
        assert oforge.verify("HEAD").verdict == "CANNOT_VERIFY"


def test_a_replay_does_not_train_on_this_machines_files(oforge: Any, outside_repo: Built) -> None:
    """What this machine has outside the repository is not the commit's input: a replay
    refuses the document (nothing trains) instead of accusing the adapter."""
    with changed_on_this_machine(outside_repo):
        result = oforge.verify("HEAD", "--level", "replay")
    why = result.explain()
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", why
    assert "failed" not in states(result).values(), why
    replay = result.check("replay")
    assert replay["state"] == "absent" and "cannot be trained from a commit" in replay["detail"]


@pytest.mark.parametrize("change", ["edited", "added", "removed"])
def test_an_in_repo_source_changed_still_fails(oforge: Any, change: str) -> None:
    notes = oforge.root / DOC / "notes"
    (readme,) = sorted(p for p in notes.iterdir() if p.is_file())
    if change == "edited":
        readme.write_text(readme.read_text() + "\nOne more line.\n")
    elif change == "added":
        (notes / "later.md").write_text("# Written after training\n")
    else:
        readme.unlink()
        (notes / "unrelated.bin").write_bytes(b"\x00")  # keep the dir; not a source
    oforge.commit(f"in-repo source {change}")
    result = oforge.verify("HEAD")
    assert_failed_first(result, "sources.root")
    assert "notes/" in result.check("sources.root")["detail"]


def test_sections_reordered_still_fail(oforge: Any) -> None:
    """Two Q/A pairs swapped, `dlm_sha256` and `lock_sha256` re-bound: the document's own
    section ids are compared even where the outside files' cannot be."""
    rel = f"{DOC}/{DOC}.dlm"
    text = oforge.read(rel).decode()
    first, second = FIRST_QA, EXTRA_QA.strip("\n") + "\n"
    swapped = text.replace(first, "\0").replace(second, first).replace("\0", second)
    assert swapped != text
    oforge.rebind_document(swapped)
    oforge.commit("sections reordered")
    result = oforge.verify("HEAD")
    assert assert_failed_first(result, "sections.order") == ["sections.order"]
    assert states(result)["sources.root"] == "absent"


@pytest.mark.parametrize("forgery_kind", ["dropped", "renamed-outside", "root"])
def test_a_record_that_hides_an_in_repo_file_fails(oforge: Any, forgery_kind: str) -> None:
    """The manifest's file list edited and its Merkle root re-computed (or not): an
    in-repo file left out, or re-named under an outside path it is not under, is `new`;
    a root that is not the list's fails."""
    from dlm_git.manifest.records import sources_record

    manifest = oforge.manifest()
    files = manifest["sources"]["files"]
    assert files[0]["relpath"] == "notes/README.md"
    if forgery_kind == "dropped":
        del files[0]
    elif forgery_kind == "renamed-outside":
        files[0]["relpath"] = "~/notes-home-elsewhere/README.md"
    if forgery_kind == "root":
        manifest["sources"]["merkle_root"] = "ab" * 32
    else:
        entries = ((f["relpath"], f["sha256"], f["size"]) for f in files)
        manifest["sources"] = sources_record(entries).model_dump(mode="json")
    oforge.write_manifest(manifest)
    oforge.commit(f"sources record: {forgery_kind}")
    result = oforge.verify("HEAD")
    assert_failed_first(result, "sources.root")
