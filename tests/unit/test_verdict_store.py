"""This machine's remembered verdicts (`dlm_git.verify.verdicts`), specified on a real git
repository's state directory: one file per commit, named by its full object id only;
`remember` rewrites its commit's file alone, `known` and `dlm-git log` read the files of
the commits they are asked about alone; what is damaged, foreign or no regular file is
no memory and is replaced; the oldest files go past the cap; an older dlm-git's single
`verdicts.json` is read, then moved into per-commit files without losing a memory."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlm_git.fsutil import MAX_RECORD_BYTES
from dlm_git.hashing import canonical_json
from dlm_git.selfid import Identity
from dlm_git.verify import verdicts
from dlm_git.verify.report import DocReport, Level, Verdict
from dlm_git.verify.verdicts import known, remember
from tests.support.gitrepo import commit_files, git, init_repo

BY = Identity("0.1.0", "ab" * 32, 190, "cd" * 20, False)


def fake_sha(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def report(doc: str, verdict: Verdict = Verdict.VERIFIED, level: Level = "hash") -> DocReport:
    return DocReport(doc, level, verdict, [])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def state(repo: Path, *parts: str) -> Path:
    """Where git puts the repository's dlm-git state (asked of git, not of dlm-git)."""
    return repo / git(repo, "rev-parse", "--git-path", "/".join(("dlm-git", *parts))).strip()


def file_of(repo: Path, sha: str) -> Path:
    return state(repo, "verdicts", f"{sha}.json")


def test_what_is_remembered_is_known_per_commit_and_document(repo: Path) -> None:
    a = commit_files(repo, {"a.txt": "a"})
    b = commit_files(repo, {"b.txt": "b"})
    remember(repo, a, [report("one"), report("two", Verdict.FAILED)], BY)
    remember(repo, b, [report("one", Verdict.BITWISE, "replay")], BY)
    remember(repo, a, [report("two", Verdict.VERIFIED)], BY)  # the last verdict reached
    found = known(repo, [a, b, fake_sha(0)])
    assert set(found) == {a, b}
    assert {doc: e["verdict"] for doc, e in found[a].items()} == {
        "one": "VERIFIED",
        "two": "VERIFIED",
    }
    (entry,) = found[b].values()
    assert (entry["verdict"], entry["level"], entry["verifier"]) == (
        "BITWISE",
        "replay",
        BY.to_json(),
    )
    assert type(entry["at"]) is int
    assert set(known(repo, [b])) == {b}
    assert known(repo, []) == {}


def test_remembering_one_commit_leaves_the_others_files_untouched(repo: Path) -> None:
    a, b = fake_sha(1), fake_sha(2)
    remember(repo, a, [report("doc")], BY)
    remember(repo, b, [report("doc")], BY)
    before = file_of(repo, b).read_bytes(), os.stat(file_of(repo, b))
    remember(repo, a, [report("doc", Verdict.FAILED)], BY)
    after = file_of(repo, b).read_bytes(), os.stat(file_of(repo, b))
    assert after[0] == before[0]
    assert (after[1].st_ino, after[1].st_mtime_ns) == (before[1].st_ino, before[1].st_mtime_ns)
    assert known(repo, [a])[a]["doc"]["verdict"] == "FAILED"


OPENS = """
import os, sys
from pathlib import Path
from dlm_git import gitio
from dlm_git.history.log import lineage
root, where = Path(sys.argv[1]), os.path.realpath(sys.argv[2])
head = gitio.resolve_commit("HEAD", root)
opened = []
def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(where + os.sep) and os.path.exists(path):
            opened.append(os.path.relpath(path, where))
sys.addaudithook(audit)
shown = lineage(root, head, "doc", 1)
print(shown.entries[0].local_verdict["verdict"], *sorted(set(opened)))
"""
"""`dlm-git log -n 1`'s lineage in a process of its own (an audit hook cannot be removed),
printing the remembered verdict it shows and every existing file of the state directory
it opened."""


def test_log_reads_the_remembered_verdicts_of_the_commits_it_shows_only(repo: Path) -> None:
    shas = [commit_files(repo, {"doc/dlm.lock": f"lock {i}\n"}) for i in range(5)]
    for sha in shas:
        remember(repo, sha, [report("doc")], BY)
    remember(repo, shas[-1], [report("doc", Verdict.FAILED)], BY)
    proc = subprocess.run(
        [sys.executable, "-c", OPENS, str(repo), str(state(repo))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.split() == ["FAILED", f"verdicts/{shas[-1]}.json"], proc.stderr


NOT_IDS = {
    "short": "abc123",
    "39 digits": "a" * 39,
    "41 digits": "a" * 41,
    "upper case": "A" * 40,
    "not hex": "g" * 40,
    "a path": "../../" + "a" * 34,
    "absolute": "/tmp/" + "a" * 35,
    "a trailing newline": "a" * 40 + "\n",
    "empty": "",
}


@pytest.mark.parametrize("sha", list(NOT_IDS.values()), ids=list(NOT_IDS))
def test_what_is_no_full_object_id_is_neither_read_nor_written(
    repo: Path, tmp_path: Path, sha: str
) -> None:
    commit_files(repo, {"a.txt": "a"})
    planted = state(repo, "verdicts") / f"{sha}.json"
    if sha and "/" not in sha and "\n" not in sha:  # where a lax reader would look
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_bytes(canonical_json({"commit": sha, "documents": {"doc": entry(1)}}))
    listing = sorted(tmp_path.rglob("*"))
    remember(repo, sha, [report("doc")], BY)
    assert sorted(tmp_path.rglob("*")) == listing
    assert not (sha.startswith("/") and os.path.lexists(sha + ".json"))  # nor outside it
    assert known(repo, [sha]) == {}


def entry(at: int, verdict: str = "VERIFIED") -> dict[str, Any]:
    return {"verdict": verdict, "level": "hash", "at": at, "verifier": BY.to_json()}


def _make(path: Path, kind: str, sha: str, outside: Path) -> None:
    good = canonical_json({"commit": sha, "documents": {"doc": entry(1)}})
    if kind == "symlink":
        outside.write_bytes(good)
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "oversized":  # sparse: no disk
        with open(path, "wb") as fh:
            fh.write(good)
            fh.truncate(MAX_RECORD_BYTES + 1)
    else:
        path.write_bytes(HOSTILE[kind](sha))


HOSTILE: dict[str, Callable[[str], bytes]] = {
    "damaged": lambda sha: b'{"commit": "' + sha.encode(),
    "a list": lambda sha: b"[]",
    "another commit's": lambda sha: canonical_json(
        {"commit": fake_sha(99), "documents": {"doc": entry(1)}}
    ),
    "no commit named": lambda sha: canonical_json({"doc": entry(1)}),
    "documents not an object": lambda sha: canonical_json({"commit": sha, "documents": []}),
    "a lone surrogate": lambda sha: (
        b'{"commit": "' + sha.encode() + b'", "documents": {"d\\ud800": {"verdict": "VERIFIED",'
        b' "level": "hash", "at": 1, "verifier": null}}}'
    ),
    "entries of another shape": lambda sha: canonical_json(
        {"commit": sha, "documents": {"doc": {**entry(1), "at": "1"}, "x": []}}
    ),
}


@pytest.mark.parametrize("kind", [*HOSTILE, "oversized", "symlink", "fifo"])
def test_a_damaged_or_foreign_file_is_no_memory_and_is_replaced(
    repo: Path, tmp_path: Path, kind: str
) -> None:
    sha = fake_sha(3)
    path = file_of(repo, sha)
    path.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside.json"
    _make(path, kind, sha, outside)
    assert known(repo, [sha]) == {}  # no traceback, and no hang on the FIFO
    remember(repo, sha, [report("mine", Verdict.FAILED)], BY)
    assert path.is_file() and not path.is_symlink()
    assert list(known(repo, [sha])[sha]) == ["mine"]
    if kind == "symlink":
        assert json.loads(outside.read_bytes())["documents"]["doc"]["at"] == 1  # untouched


def test_a_verifier_of_another_shape_is_unknown_and_the_verdict_kept(repo: Path) -> None:
    sha = fake_sha(4)
    path = file_of(repo, sha)
    path.parent.mkdir(parents=True, exist_ok=True)
    odd = {**entry(5), "verifier": {"name": "dlm-git", "digest": "no"}}
    path.write_bytes(canonical_json({"commit": sha, "documents": {"doc": odd}}))
    assert known(repo, [sha])[sha]["doc"] == {**entry(5), "verifier": None}


def test_past_the_cap_the_commits_remembered_longest_ago_go_first(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "MAX_COMMITS", 4)
    monkeypatch.setattr(verdicts, "SLACK", 2)
    # names in the opposite order of age: what goes is chosen by age, never by name
    shas = sorted((fake_sha(i) for i in range(7)), reverse=True)
    for age, sha in enumerate(shas[:6]):
        remember(repo, sha, [report("doc")], BY)
        os.utime(file_of(repo, sha), (1_000_000 + age, 1_000_000 + age))
    assert set(known(repo, shas)) == set(shas[:6])  # MAX_COMMITS + SLACK: none goes yet
    remember(repo, shas[0], [report("doc")], BY)  # remembered again: now the newest
    remember(repo, shas[6], [report("doc")], BY)  # 7 files: down to the 4 newest
    assert set(known(repo, shas)) == {shas[0], shas[4], shas[5], shas[6]}
    assert len(list(state(repo, "verdicts").iterdir())) == 4


def test_what_is_no_commits_file_makes_no_memory_go_under_the_cap(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "MAX_COMMITS", 4)
    monkeypatch.setattr(verdicts, "SLACK", 2)
    directory = state(repo, "verdicts")
    directory.mkdir(parents=True)
    for name in ("notes.txt", "x.json", "A" * 40 + ".json", f".{fake_sha(0)}.json.1.tmp"):
        (directory / name).write_bytes(b"")
    shas = [fake_sha(i) for i in range(3)]
    for sha in shas:  # 7 names listed, 3 commits' files: under the cap, none goes
        remember(repo, sha, [report("doc")], BY)
    assert set(known(repo, shas)) == set(shas)
    assert len(list(directory.iterdir())) == 7


def legacy(repo: Path, store: object) -> Path:
    """An older dlm-git's `verdicts.json`: commit -> document -> entry, in its encoding."""
    path = state(repo, "verdicts.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(store if isinstance(store, bytes) else canonical_json(store))
    return path


def test_an_older_store_is_read_then_moved_into_files_of_their_own(repo: Path) -> None:
    a, b, c = fake_sha(10), fake_sha(11), fake_sha(12)
    old = legacy(
        repo,
        {
            a: {"doc": entry(100, "FAILED"), "other": entry(90)},
            b: {"doc": {k: v for k, v in entry(50).items() if k != "verifier"}},
            "not a sha": {"doc": entry(1)},
        },
    )
    assert known(repo, [a, b])[b]["doc"]["verifier"] is None  # read before any remember
    assert known(repo, [a])[a]["doc"]["verdict"] == "FAILED"
    path = file_of(repo, a)  # a newer dlm-git already remembered `a`'s "doc" later
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canonical_json({"commit": a, "documents": {"doc": entry(200)}}))
    remember(repo, c, [report("doc")], BY)
    assert not old.exists()
    found = known(repo, [a, b, c])
    assert {doc: e["verdict"] for doc, e in found[a].items()} == {
        "doc": "VERIFIED",
        "other": "VERIFIED",
    }
    assert found[a]["doc"]["at"] == 200 and found[b]["doc"]["at"] == 50
    assert os.stat(file_of(repo, b)).st_mtime == 50  # its age: when it was remembered
    assert sorted(p.name for p in state(repo, "verdicts").iterdir()) == sorted(
        f"{s}.json" for s in (a, b, c)
    )


def test_a_commit_whose_file_cannot_be_written_is_skipped_and_the_move_made_once(
    repo: Path,
) -> None:
    """A directory in the place of one commit's file: that memory is lost, the others
    moved, and the older store removed (not moved again by every later remember)."""
    a, b = fake_sha(20), fake_sha(21)
    old = legacy(repo, {a: {"doc": entry(1)}, b: {"doc": entry(2)}})
    blocked = file_of(repo, b)
    blocked.mkdir(parents=True)
    remember(repo, fake_sha(22), [report("doc")], BY)
    assert not old.exists() and blocked.is_dir()
    assert set(known(repo, [a, b, fake_sha(22)])) == {a, fake_sha(22)}
    assert not [p for p in state(repo, "verdicts").iterdir() if p.name.startswith(".")]


def test_a_file_that_cannot_be_pruned_stops_no_other(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "MAX_COMMITS", 2)
    monkeypatch.setattr(verdicts, "SLACK", 1)
    stuck = file_of(repo, fake_sha(50))
    stuck.mkdir(parents=True)  # named like a commit's file, no file, and the oldest
    os.utime(stuck, (0, 0))
    shas = [fake_sha(51 + i) for i in range(6)]
    for age, sha in enumerate(shas):
        remember(repo, sha, [report("doc")], BY)
        os.utime(file_of(repo, sha), (1_000_000 + age, 1_000_000 + age))
    assert set(known(repo, shas)) == set(shas[-2:])  # the bound kept
    assert stuck.is_dir()


def test_an_older_store_keeps_its_newest_commits_under_the_cap(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdicts, "MAX_COMMITS", 2)
    shas = [fake_sha(30 + i) for i in range(4)]
    legacy(repo, {sha: {"doc": entry(100 + i)} for i, sha in enumerate(shas)})
    remember(repo, shas[0], [report("doc")], BY)
    assert set(known(repo, shas)) == {shas[0], shas[2], shas[3]}


@pytest.mark.parametrize(
    "store",
    [b"{", b"[]", b"\xff\xfe", canonical_json({fake_sha(40): []}), "fifo", "symlink"],
    ids=["truncated", "a list", "not UTF-8", "entries not objects", "a FIFO", "a link"],
)
def test_a_damaged_older_store_is_no_memory_and_is_removed(
    repo: Path, tmp_path: Path, store: object
) -> None:
    if store in ("fifo", "symlink"):
        path = state(repo, "verdicts.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        if store == "fifo":
            os.mkfifo(path)
        else:  # to a store an older dlm-git could have written: not followed
            target = tmp_path / "elsewhere.json"
            target.write_bytes(canonical_json({fake_sha(40): {"doc": entry(1)}}))
            path.symlink_to(target)
    else:
        path = legacy(repo, store)
    assert known(repo, [fake_sha(40)]) == {}
    remember(repo, fake_sha(41), [report("doc")], BY)
    assert not os.path.lexists(path)
    assert set(known(repo, [fake_sha(40), fake_sha(41)])) == {fake_sha(41)}
    if store == "symlink":
        assert (tmp_path / "elsewhere.json").is_file()
