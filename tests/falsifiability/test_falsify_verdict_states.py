"""Verdicts come from check states, never from text a commit chose (issue 23, classes 3
and 11).

A check ends ok, failed or absent where it runs; absence (the adapter not in this DVC
cache, the base not on this machine) is CANNOT_VERIFY only when nothing failed. A
tampered source whose name reads like an absence ("... not available ...") is FAILED, and
one document whose records do not parse fails alone: every other document of a replay or
segments run still gets its own verdict.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest

from dlm_git.doc.ulid import new_ulid
from tests.support.verdicts import assert_caught
from tests.support.verified import DOC

ABSENCE_WORDS = [
    "base builtin:tiny is not available here.md",
    "adapter not available.md",
    "DVC cache lacks it, not available (run dvc pull).txt",
]


def drop_the_cache(forge: Any) -> None:
    """The adapter's objects are absent here: adapter.files is absent, honestly."""
    shutil.rmtree(forge.root / ".dvc" / "cache")


@pytest.mark.parametrize("name", ABSENCE_WORDS)
def test_a_new_source_named_like_an_absence_is_failed(forge: Any, name: str) -> None:
    forge.write(f"{DOC}/notes/{name}", b"# Added after training\n\nNot trained on.\n")
    forge.commit("a source added without retraining")
    drop_the_cache(forge)
    result = forge.verify("HEAD")
    assert_caught(result, "sources.root")
    states = {c["name"]: c["state"] for c in result.checks}
    assert states["sources.root"] == "failed" and states["adapter.files"] == "absent"


def test_a_source_renamed_to_read_like_an_absence_is_failed(forge: Any) -> None:
    notes = forge.root / DOC / "notes"
    original = sorted(p for p in notes.iterdir() if p.is_file())[0]
    original.rename(notes / "the base is not available.md")
    forge.commit("a source renamed")
    drop_the_cache(forge)
    assert_caught(forge.verify("HEAD"), "sources.root")


def test_only_absence_is_cannot_verify(forge: Any) -> None:
    drop_the_cache(forge)
    result = forge.verify("HEAD")
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", result.explain()
    absent = [c["name"] for c in result.checks if c["state"] == "absent"]
    assert absent == ["adapter.files"], result.explain()
    assert all(c["state"] in ("ok", "absent") for c in result.checks), result.explain()


BAD_LOCKS = {
    "notjson": b'{"lock_version": 1, "determinism_flags": {',
    "unknownkey": None,  # the demo's lock with a flag no dlm-git writes
    "deep": b'{"lock_version": 1, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


def add_broken_documents(forge: Any) -> list[str]:
    """Documents beside demo whose dlm.lock does not parse (each its own way)."""
    import json

    made = []
    for name, data in BAD_LOCKS.items():
        if data is None:
            lock = forge.lock()
            lock["determinism_flags"]["bits_expected"] = False
            data = json.dumps(lock).encode()
        # a document of its own: a copied dlm_id would fail docset.dlm_id on demo too
        text = re.sub(
            rb"(?m)^dlm_id: \S+$", b"dlm_id: " + new_ulid().encode(), forge.read(f"{DOC}/{DOC}.dlm")
        )
        forge.write(f"{name}/{name}.dlm", text)
        forge.write(f"{name}/manifest.json", forge.read(f"{DOC}/manifest.json"))
        forge.write(f"{name}/dlm.lock", data)
        made.append(name)
    forge.commit("documents whose locks do not parse")
    return made


def verdicts(result: Any) -> dict[str, str]:
    return {d["doc"]: d["verdict"] for d in result.payload["documents"]}


@pytest.mark.slow
def test_one_bad_lock_fails_its_document_and_the_replay_goes_on(forge: Any) -> None:
    bad = add_broken_documents(forge)
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.code == 1, result.explain()
    got = verdicts(result)
    assert got[DOC] == "BITWISE", result.explain()
    assert all(got[name] == "FAILED" for name in bad), got
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.slow
def test_one_bad_lock_fails_its_document_and_segments_go_on(forge: Any) -> None:
    bad = add_broken_documents(forge)
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 1, result.explain()
    got = verdicts(result)
    assert got[DOC] == "SEGMENTS_BITWISE", result.explain()
    assert all(got[name] == "FAILED" for name in bad), got
    assert "Traceback" not in result.stderr, result.stderr
