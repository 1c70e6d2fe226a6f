"""`dlm_git.gitio`'s lazily imported names (`LAZY`, the module's `__getattr__`): each is
its room's own object, an unknown name is no attribute, and a room whose import fails
raises `ImportError` with the cause, never reads as "no such name" (`hasattr` False,
"cannot import name"), which would hide the real error."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from dlm_git import gitio


def test_every_lazy_name_is_its_rooms_own() -> None:
    for name, room in gitio.LAZY.items():
        assert getattr(gitio, name) is getattr(importlib.import_module(room), name)


def test_an_unknown_name_is_no_attribute() -> None:
    name = "no_such_name"
    assert name not in gitio.LAZY and not hasattr(gitio, name)


def test_a_room_that_fails_to_import_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_room.py").write_text("import os\n\nX = os.no_such_attribute\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(gitio.LAZY, "thing", "broken_room")
    name = "thing"
    with pytest.raises(ImportError, match="no_such_attribute"):
        hasattr(gitio, name)
    with pytest.raises(ImportError, match="broken_room failed.*no_such_attribute"):
        exec("from dlm_git.gitio import thing")  # the statement a caller writes
