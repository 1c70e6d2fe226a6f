"""The pure pieces of `dlm-git fsck`: every out of a DVC record with malformed ones as
errors, the token-cache entry check without a row id, and the human output (problem lines
cut to a terminal's worth, hostile names escaped). The stat record it trusts is
`tests/unit/test_statcache.py`'s subject."""

from __future__ import annotations

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
from dlm_git.dvcfiles import parse_dvc_lock, record_outs
from dlm_git.fsck.render import LIST_LIMIT, render
from dlm_git.fsck.report import Area, DvcCounts, Finding, FsckReport, State, TokenCounts
from dlm_git.history.references import Referrer, is_record
from dlm_git.token_stream import RowTokens, Sequence
from tests.support.gitrepo import git

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
