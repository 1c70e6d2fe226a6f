"""The pure pieces of `dlm-git fsck`: every out of a DVC record with malformed ones as
errors, the token-cache entry check without a row id, and the human output (problem lines
cut to a terminal's worth, hostile names escaped). The stat record it trusts is
`tests/unit/test_statcache.py`'s subject."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dlm_git import gitio
from dlm_git.cache.entry import (
    MAGIC,
    CorruptEntry,
    check_entry,
    encode_entry,
    entry_key,
    is_other_entry_version,
)
from dlm_git.docat import TreeAt
from dlm_git.dvcfiles import parse_dvc_lock, record_outs
from dlm_git.fsck.render import LIST_LIMIT, render
from dlm_git.fsck.report import Area, DvcCounts, Finding, FsckReport, State, TokenCounts
from dlm_git.history import references
from dlm_git.history.references import Referrer, is_record
from dlm_git.token_stream import RowTokens, Sequence
from tests.support.cli import dlm_git
from tests.support.gitrepo import commit_files, git

# --------------------------------------------------------------------------- the history


DEEP_PARAMS = "documents: " + "[" * 200 + "]" * 200 + "\n"


def adapter_lock(**md5_of: str) -> str:
    """A root dvc.lock with a stage per document naming its `<doc>/adapter` (a file out)
    at the md5 given for it."""
    return "schema: '2.0'\nstages:\n" + "".join(
        f"  train@{doc}:\n    cmd: train\n    outs:\n"
        f"    - path: {doc}/adapter\n      hash: md5\n      md5: {md5}\n      size: 1\n"
        for doc, md5 in md5_of.items()
    )


def test_the_walk_names_the_documents_tree_at_names(git_repo: Path) -> None:
    """fsck attributes adapters to the documents `TreeAt.documents()` finds in that
    commit, from its own tree summaries: a linked dlm.lock makes a document there too
    (it is in the listing). Before, the summaries left links out and named none. A link
    is still never a DVC record."""
    (git_repo / "e").mkdir()
    os.symlink("../d/d.dlm", git_repo / "e" / "dlm.lock")
    os.symlink("../dvc.lock", git_repo / "e" / "dvc.lock")
    md5s = {doc: hashlib.md5(doc.encode()).hexdigest() for doc in ("d", "e", "x")}
    files = {"d/d.dlm": "---\n---\n", "dvc.lock": adapter_lock(**md5s)}
    sha = commit_files(git_repo, files)
    with TreeAt(git_repo, sha) as tree:
        assert tree.documents() == ["d", "e"]
    refs = references.collect(git_repo)
    named = {(r.record, r.out): r.doc for r in refs.objects.values()}
    assert named == {
        ("dvc.lock", "d/adapter"): "d",
        ("dvc.lock", "e/adapter"): "e",
        ("dvc.lock", "x/adapter"): None,
    }
    assert refs.notes == [] and refs.errors == []


def test_a_refused_commit_is_an_error_and_the_rest_of_the_history_is_still_checked(
    git_repo: Path,
) -> None:
    """One commit's params.yaml nests too deep: verify, diff and log stop on it (they
    judge that one revision); fsck reports it once, against the first commit holding
    it, and goes on: the objects of every commit, that one's included, are checked."""
    refused_md5, corrupt_md5 = "a" * 32, hashlib.md5(b"adapter").hexdigest()
    files = {
        "d/d.dlm": "---\n---\n",
        "params.yaml": DEEP_PARAMS,
        "dvc.lock": adapter_lock(d=refused_md5),
    }
    refused = commit_files(git_repo, files)
    commit_files(git_repo, {"README.md": "same params.yaml, reported once\n"})
    later = commit_files(
        git_repo, {"params.yaml": "documents: [d]\n", "dvc.lock": adapter_lock(d=corrupt_md5)}
    )
    stored = git_repo / ".dvc/cache/files/md5" / corrupt_md5[:2] / corrupt_md5[2:]
    stored.parent.mkdir(parents=True)
    stored.write_bytes(b"not the adapter")
    result = dlm_git(git_repo, "fsck", "--json")
    assert result.code == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    [error] = report["errors"]
    assert error["commit"] == refused and error["error"].startswith(
        f"{refused[:12]}:params.yaml: does not parse: nested deeper than"
    )
    found = {(o["state"], o["md5"], o["commit"], o["doc"]) for o in report["objects"]}
    assert found == {
        ("missing", refused_md5, refused, None),
        ("corrupted", corrupt_md5, later, "d"),
    }


def test_the_history_walk_costs_a_fixed_number_of_git_processes(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trees and blobs are read through one `cat-file` for the whole history: 12 commits,
    each with its own params.yaml and dvc.lock (every third one refused), cost what 2
    cost. A `TreeAt` per commit would cost a listing and a reader each."""
    shas = []
    for i in range(12):
        params = f"# {i}\n{DEEP_PARAMS}" if i % 3 == 0 else f"documents: [d{i}]\n"
        files = {f"d{i}/d.dlm": "---\n---\n", "params.yaml": params}
        shas.append(
            commit_files(
                git_repo,
                {
                    **files,
                    "dvc.lock": adapter_lock(**{f"d{i}": hashlib.md5(b"%d" % i).hexdigest()}),
                },
            )
        )
    started: list[object] = []
    real = subprocess.Popen

    class Counting(real):  # type: ignore[misc,valid-type]
        def __init__(self, args: object, *rest: object, **kw: object) -> None:
            started.append(args)
            super().__init__(args, *rest, **kw)

    def spent(tip: str) -> tuple[int, references.References]:
        git(git_repo, "update-ref", "HEAD", tip)  # moves the branch: the history ends at tip
        started.clear()
        monkeypatch.setattr(subprocess, "Popen", Counting)
        try:
            refs = references.collect(git_repo)
        finally:
            monkeypatch.setattr(subprocess, "Popen", real)
        return len(started), refs

    two, _ = spent(shas[1])
    twelve, refs = spent(shas[-1])
    assert twelve == two, (two, twelve)
    assert [e.commit for e in refs.errors] == shas[::3]
    assert {r.doc for r in refs.objects.values()} == {None, *(f"d{i}" for i in range(12) if i % 3)}


# --------------------------------------------------------------------------- git trees


def test_tree_objects_read_through_cat_file_match_ls_tree(git_repo: Path) -> None:
    (git_repo / "sub").mkdir()
    (git_repo / "sub" / "dvc.lock").write_text("stages: {}\n")
    (git_repo / "name with\nnewline.dvc").write_text("outs: []\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "x")
    tree = git(git_repo, "rev-parse", "HEAD^{tree}").strip()
    expected = [
        (mode, name, oid) for mode, _kind, oid, name in gitio.tree_entries(["."], git_repo, tree)
    ]
    with gitio.BlobReader(git_repo) as reader:
        got = reader.read_trees([tree, "0" * 40])
        raw = reader.read_objects([tree], "tree")[tree]
    assert got[tree] == [(m.lstrip("0") if m == "040000" else m, n, o) for m, n, o in expected]
    assert got["0" * 40] is None
    assert raw is not None
    assert gitio.parse_tree(raw[:-1]) == got[tree][:-1]  # a cut entry ends the list


# --------------------------------------------------------------------------- DVC records


def test_record_outs_of_a_dvc_lock_keep_good_outs_and_report_bad_ones() -> None:
    lock = parse_dvc_lock(
        b"""schema: '2.0'
stages:
  train:
    outs:
    - path: a/adapter
      md5: 0ffc55a8807cb5d4cf07da2ef86eaa2a.dir
    - path: a/evil
      md5: ../../etc/passwd
    - path: a/nohash
    - not-a-mapping
  broken: [1, 2]
  other:
    outs:
    - path: a/file
      md5: 836c148c038d743653e8402eacfb28a6
"""
    )
    outs, errors = record_outs(lock)
    assert [(o.stage, o.path, o.md5) for o in outs] == [
        ("train", "a/adapter", "0ffc55a8807cb5d4cf07da2ef86eaa2a.dir"),
        ("other", "a/file", "836c148c038d743653e8402eacfb28a6"),
    ]
    messages = [e.message for e in errors]
    assert any("a/evil" in m and "md5" in m for m in messages)
    assert any("malformed entry" in m for m in messages)
    assert any("stages.broken" in m for m in messages)


def test_record_outs_of_a_dvc_file() -> None:
    record = parse_dvc_lock(b"outs:\n- path: data\n  md5: 836c148c038d743653e8402eacfb28a6\n")
    outs, errors = record_outs(record, "data.dvc")
    assert [(o.stage, o.path) for o in outs] == [("", "data")] and errors == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("dvc.lock", True),
        ("sub/dvc.lock", True),
        ("data.dvc", True),
        ("sub/model.dvc", True),
        (".dvc", False),
        (".dvc/config", False),
        ("dvc.lock.bak", False),
        ("dvc.yaml", False),
    ],
)
def test_which_paths_are_dvc_records(path: str, expected: bool) -> None:
    assert is_record(path) is expected


# --------------------------------------------------------------------------- token cache


def entry_bytes() -> tuple[str, bytes]:
    ids = np.asarray([1, 2, 3, 4], dtype=np.int32)
    row = RowTokens.from_sequences("r1", [Sequence("r1", ids, ids.copy())])
    key = entry_key("r1", "0" * 64, 64)
    return key, encode_entry(key, row)


def test_check_entry_needs_no_row_id_and_catches_every_flip_and_cut() -> None:
    key, data = entry_bytes()
    check_entry(data, key)
    with pytest.raises(CorruptEntry):
        check_entry(data, "f" * 32)  # stored under another key
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x40
        with pytest.raises(CorruptEntry):
            check_entry(bytes(flipped), key)
    for n in range(len(data)):
        with pytest.raises(CorruptEntry):
            check_entry(data[:n], key)


def test_an_entry_of_another_version_is_recognised() -> None:
    _, data = entry_bytes()
    assert not is_other_entry_version(data)
    assert is_other_entry_version(MAGIC[:7] + b"3" + data[8:])
    assert not is_other_entry_version(b"garbage!" + data[8:])


# --------------------------------------------------------------------------- output


def report(findings: list[Finding], corrupted: int = 0) -> FsckReport:
    return FsckReport(
        commits=2,
        dvc=DvcCounts(".dvc/cache", 10, 10 - corrupted, corrupted, 0, 0),
        tokens=TokenCounts(".dlm-git/token-cache", 0, 0, 0, 0, True),
        hashed=0,
        unchanged=10,
        full=False,
        findings=tuple(findings),
    )


def finding(state: State, i: int, detail: str = "d", out: str = "o") -> Finding:
    ref = Referrer("a" * 40, "dvc.lock", out, "doc", 0)
    path = f".dvc/cache/files/md5/{i:02d}/x"
    return Finding(Area.DVC, state, path, None, detail, ref, Path(path))


def test_render_cuts_missing_and_orphaned_but_never_corrupted() -> None:
    many = LIST_LIMIT + 5
    lines = render(
        report(
            [finding(State.CORRUPTED, i) for i in range(many)]
            + [finding(State.MISSING, i) for i in range(many)]
            + [finding(State.ORPHANED, i) for i in range(many)],
            corrupted=many,
        )
    )
    assert sum(x.startswith("corrupted ") for x in lines) == many
    assert sum(x.startswith("missing ") for x in lines) == LIST_LIMIT + 1
    assert sum(x.startswith("orphaned ") for x in lines) == LIST_LIMIT + 1
    assert sum("... and 5 more" in x for x in lines) == 2
    assert lines[-1].split()[:2] == ["fsck", "FAILED:"]


def test_render_escapes_control_characters_from_commits() -> None:
    lines = render(report([finding(State.MISSING, 1, out="evil\x1b[2J\nname")]))
    assert all("\x1b" not in x and "\n" not in x for x in lines)
    assert any("evil\\x1b[2J\\nname" in x for x in lines)
