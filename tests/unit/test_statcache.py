"""The one stat-keyed cache rule (`dlm_git.statcache`): an entry is trusted only for the
same stat (size, mtime, ctime, inode, device) and only while its file is not racily clean,
judged when it is recorded and again against when the record was written; only what a
run verified is kept (or, for the hook's cache, what is still trustworthy too); a damaged
record is ignored and rewritten; a file is stamped on the descriptor that is read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dlm_git.statcache import (
    RACY_NS,
    Stamp,
    StatRecord,
    digest_stamped,
    read_stamped,
    stamp_of,
)

FORMAT = "dlm-git/test-record/v2"
OLD = time.time_ns() - 10 * RACY_NS
STAMP = Stamp(10, OLD, OLD, 42, 7)


def test_record_vouches_only_for_the_same_stat(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    record = StatRecord(path, FORMAT)
    record.keep("/c/ab/cd", STAMP, "md5:abcd")
    assert record.save() is None
    again = StatRecord(path, FORMAT)
    assert again.verified("/c/ab/cd", STAMP) == "md5:abcd"
    for field in Stamp._fields:
        changed = STAMP._replace(**{field: getattr(STAMP, field) + 1})
        assert again.verified("/c/ab/cd", changed) is None, field
    assert again.verified("/c/other", STAMP) is None


def test_a_path_that_is_not_utf_8_is_a_key_like_any_other(tmp_path: Path) -> None:
    """A file name the OS gives as bytes that are not UTF-8 (`surrogateescape`) is written
    as a JSON escape and read back as the same key: the record is not damaged by it (a
    lone-surrogate refusal would have made every hook and fsck run hash everything)."""
    path = tmp_path / "record.json"
    key = os.fsdecode(b"/c/caf\xe9")
    record = StatRecord(path, FORMAT)
    record.keep(key, STAMP, "md5:abcd")
    assert record.save() is None
    again = StatRecord(path, FORMAT)
    assert again.verified(key, STAMP) == "md5:abcd"


def test_racily_clean_files_are_not_recorded(tmp_path: Path) -> None:
    record = StatRecord(tmp_path / "record.json", FORMAT)
    now = time.time_ns()
    record.keep("/fresh", Stamp(1, now, now - RACY_NS // 2, 1, 1), "md5:x", seen_ns=now)
    record.keep("/old", Stamp(1, now, now - 2 * RACY_NS, 2, 1), "md5:y", seen_ns=now)
    assert set(record.new) == {"/old"}


def test_an_entry_racily_clean_when_the_record_was_written_is_not_trusted(
    tmp_path: Path,
) -> None:
    """As git judges an index entry against the index file's mtime: whoever wrote the
    record, an entry whose file changed within `RACY_NS` of the writing is read again."""
    path = tmp_path / "record.json"
    now = time.time_ns()
    racy = Stamp(1, now, now - RACY_NS // 2, 1, 1)
    entries = {"/racy": [*racy, "md5:x"], "/old": [*STAMP, "md5:y"]}
    path.write_text(json.dumps({"format": FORMAT, "entries": entries}))
    os.utime(path, ns=(now, now))
    record = StatRecord(path, FORMAT)
    assert record.verified("/racy", racy) is None
    assert record.verified("/old", STAMP) == "md5:y"
    assert not record.damaged


def test_only_what_this_run_verified_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    first = StatRecord(path, FORMAT)
    first.keep("/a", STAMP, "md5:a")
    first.keep("/b", STAMP, "md5:b")
    first.save()
    second = StatRecord(path, FORMAT)
    second.carry("/a", STAMP)  # /b was not seen (gone, changed or bad)
    second.save()
    assert set(json.loads(path.read_text())["entries"]) == {"/a"}


def test_without_prune_entries_not_seen_are_kept_and_a_racy_rewrite_drops_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "record.json"
    first = StatRecord(path, FORMAT, prune=False)
    first.keep("/a", STAMP, "sha256:a")
    first.keep("/b", STAMP, "sha256:b")
    first.save()
    second = StatRecord(path, FORMAT, prune=False)
    now = time.time_ns()
    second.keep("/b", Stamp(10, now, now, 42, 7), "sha256:b2", seen_ns=now)  # racy now
    second.save()
    assert set(json.loads(path.read_text())["entries"]) == {"/a"}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        json.dumps({"format": "other", "entries": {}}),
        json.dumps({"format": FORMAT, "entries": []}),
        json.dumps({"format": FORMAT, "entries": {"/a": [1, 2, 3, 4, "5", "md5:a"]}}),
        json.dumps({"format": FORMAT, "entries": {"/a": [1, 2, 3, 4, True, "md5:a"]}}),
        json.dumps({"format": FORMAT, "entries": {"/a": [1, 2, 3, 4, "md5:a"]}}),
        "[" * 100_000,
    ],
)
def test_a_damaged_record_is_ignored_and_rewritten(tmp_path: Path, text: str) -> None:
    path = tmp_path / "record.json"
    path.write_text(text)
    record = StatRecord(path, FORMAT)
    assert record.damaged and record.old == {}
    assert record.save() is None
    assert json.loads(path.read_text()) == {"format": FORMAT, "entries": {}}


def test_a_record_of_an_older_version_is_ignored_not_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    older = FORMAT.removesuffix("v2") + "v1"
    path.write_text(json.dumps({"format": older, "entries": {"/a": [1, 2, 3, 4, "md5:a"]}}))
    record = StatRecord(path, FORMAT)
    assert not record.damaged and record.old == {}


def test_disabled_record_trusts_nothing_but_is_written(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    first = StatRecord(path, FORMAT)
    first.keep("/a", STAMP, "md5:a")
    first.save()
    full = StatRecord(path, FORMAT, enabled=False)
    assert full.verified("/a", STAMP) is None
    full.keep("/a", STAMP, "md5:a")
    full.save()
    assert StatRecord(path, FORMAT).verified("/a", STAMP) == "md5:a"


def test_a_file_is_stamped_on_the_descriptor_read(tmp_path: Path) -> None:
    f = tmp_path / "object"
    f.write_bytes(b"abc")
    before = time.time_ns()
    stamped, data = read_stamped(f, follow_symlinks=False)
    assert data == b"abc" and stamped.stamp == stamp_of(f.stat())
    assert before <= stamped.seen_ns <= time.time_ns()
    stamped, digest = digest_stamped(f, "md5", follow_symlinks=False)
    assert digest == "900150983cd24fb0d6963f7d28e17f72" and stamped.stamp == stamp_of(f.stat())
