"""`python -m build` gives byte-identical artifacts from the same source (issue 29).

Two copies of this checkout, as unlike as a second machine makes them: files of the
second dated 2001 and group-writable, built under umask 002 instead of 022, one second
apart; the same SOURCE_DATE_EPOCH. The wheel and the sdist must hash the same, and carry
the epoch and normalized modes (build_backend/dlm_git_build.py).
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support.release import build, copy_checkout

pytestmark = pytest.mark.slow

EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z
WHEEL = "dlm_git-0.1.0-py3-none-any.whl"
SDIST = "dlm_git-0.1.0.tar.gz"


def _unlike(tree: Path) -> None:
    """Every file of `tree` dated 2001-01-01 and made group-writable."""
    for path in (p for p in tree.rglob("*") if p.is_file()):
        os.chmod(path, path.stat().st_mode | stat.S_IWGRP)
        os.utime(path, (978_307_200, 978_307_200))


def test_two_builds_from_unlike_copies_are_byte_identical(tmp_path: Path) -> None:
    first = copy_checkout(tmp_path / "one" / "src")
    second = copy_checkout(tmp_path / "two" / "src")
    _unlike(second)
    a = build(first, tmp_path / "one" / "dist", umask=0o022, epoch=EPOCH)
    b = build(second, tmp_path / "two" / "dist", umask=0o002, epoch=EPOCH)
    assert sorted(a) == [WHEEL, SDIST], a
    assert a == b, f"the builds differ:\n{a}\n{b}"

    with zipfile.ZipFile(tmp_path / "one" / "dist" / WHEEL) as wheel:
        infos = {i.filename: i for i in wheel.infolist()}
    assert "dlm_git/cli.py" in infos and "dlm_git-0.1.0.dist-info/RECORD" in infos
    assert {i.date_time for i in infos.values()} == {(2023, 11, 14, 22, 13, 20)}
    assert {(i.external_attr >> 16) & 0o777 for i in infos.values()} == {0o644}

    with tarfile.open(tmp_path / "two" / "dist" / SDIST) as sdist:
        members = sdist.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names) and "dlm_git-0.1.0/build_backend/dlm_git_build.py" in names
    assert {m.mtime for m in members} == {EPOCH}
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert {m.mode for m in members if m.isfile()} == {0o644}
    assert {m.mode for m in members if m.isdir()} == {0o755}
    header = (tmp_path / "two" / "dist" / SDIST).read_bytes()[:10]
    assert int.from_bytes(header[4:8], "little") == EPOCH  # the gzip header's date
