"""`dlm_git.dvcfiles`: reading DVC's records without importing DVC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlm_git.dvcfiles import (
    cache_dir,
    cache_object,
    dir_listing,
    find_out,
    find_out_in,
    parse_dvc_lock,
)
from tests.support.records import BIG_DVC_LOCK

# --------------------------------------------------------------------------- DVC records


DVC_LOCK = b"""schema: '2.0'
stages:
  train@doc:
    cmd: dlm-git train doc
    outs:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
      size: 10
      nfiles: 2
    - path: doc/dlm.lock
      md5: ffffffffffffffffffffffffffffffff
"""


def test_find_out_and_dir_listing(tmp_path: Path) -> None:
    lock = parse_dvc_lock(DVC_LOCK)
    out = find_out(lock, "doc/adapter")
    assert out is not None and out.is_dir and out.stage == "train@doc" and out.nfiles == 2
    assert find_out(lock, "doc") is None
    assert dir_listing(tmp_path, out.md5) is None
    obj = cache_object(tmp_path, out.md5)
    assert obj == tmp_path / ".dvc/cache/files/md5/01/23456789abcdef0123456789abcdef.dir"
    obj.parent.mkdir(parents=True)
    aa, bb = "a" * 32, "b" * 32
    obj.write_text(json.dumps([{"md5": aa, "relpath": "a"}, {"md5": bb, "relpath": "b/c"}]))
    assert dir_listing(tmp_path, out.md5) == {"a": aa, "b/c": bb}


def test_find_out_in_matches_the_full_parse() -> None:
    data = BIG_DVC_LOCK
    full = parse_dvc_lock(data)
    for path in ("doc/adapter", "doc/dlm.lock", "other/adapter", "bases/tiny", "missing"):
        assert find_out_in(data, path) == find_out(full, path), path
    # the adapter is a dep of verify@doc before it is an out of train@doc here
    assert find_out_in(data, "doc/adapter").stage == "train@doc"  # type: ignore[union-attr]


def test_find_out_in_parses_only_the_stages_naming_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dlm_git import dvcfiles

    def full_parse(data: bytes) -> dict[str, Any]:
        raise AssertionError("parsed the whole dvc.lock")

    monkeypatch.setattr(dvcfiles, "parse_dvc_lock", full_parse)
    out = find_out_in(BIG_DVC_LOCK, "other/adapter")
    assert out is not None and out.md5 == "2" * 32 + ".dir"


MD5 = b"c" * 32 + b".dir"


@pytest.mark.parametrize(
    "data",
    [
        # not DVC's layout: flow style, quoted paths, other indentation
        b'stages: {"train@doc": {"outs": [{"path": "doc/adapter", "md5": "' + MD5 + b'"}]}}\n',
        b"stages:\n  train@doc:\n    outs:\n    - path: 'doc/adapter'\n      md5: " + MD5 + b"\n",
        b"stages:\n    train@doc:\n        outs:\n        - {path: doc/adapter, md5: "
        + MD5
        + b"}\n",
    ],
)
def test_find_out_in_falls_back_to_the_full_parse(data: bytes) -> None:
    out = find_out_in(data, "doc/adapter")
    assert out is not None and out.md5 == MD5.decode()


def test_find_out_in_raises_on_unreadable_yaml() -> None:
    with pytest.raises((ValueError, yaml.YAMLError)):
        find_out_in(b"stages: [unclosed\n", "doc/adapter")


def test_parse_dvc_lock_refuses_non_mappings() -> None:
    with pytest.raises(ValueError):
        parse_dvc_lock(b"- a\n- b\n")
    assert parse_dvc_lock(b"") == {}


def test_cache_dir_honours_config_local_then_config(tmp_path: Path) -> None:
    dvc = tmp_path / ".dvc"
    dvc.mkdir()
    assert cache_dir(tmp_path) == dvc / "cache"
    (dvc / "config").write_text("[core]\n    remote = store\n[cache]\n    dir = ../shared-cache\n")
    assert cache_dir(tmp_path) == (tmp_path / "shared-cache").resolve()
    (dvc / "config.local").write_text("[cache]\n    dir = /abs/cache\n")
    assert cache_dir(tmp_path) == Path("/abs/cache")


def test_cache_dir_ignores_dir_keys_of_other_sections(tmp_path: Path) -> None:
    dvc = tmp_path / ".dvc"
    dvc.mkdir()
    (dvc / "config").write_text("[state]\n    dir = /obsolete/state\n[index]\n    dir = x\n")
    assert cache_dir(tmp_path) == dvc / "cache"
