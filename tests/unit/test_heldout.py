"""The held-out split (`training.val_fraction`, `dlm_git.train.heldout`) as a rule: the
original `dlm` tool's function of (seed, section id, index), computed here from its
definition; adding a section moves no other row; the lock records the fraction only when
set, refuses a malformed one, and a changed one is an ERROR."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dlm_git.doc.load import load_document
from dlm_git.doc.sources import Outside
from dlm_git.lock.errors import LockError
from dlm_git.lock.io import parse_lock, parse_lock_json
from dlm_git.lock.policy import classify
from dlm_git.lock.schema import Lock
from dlm_git.train.heldout import is_held_out, split_rows
from dlm_git.train.rows import section_rows
from tests.support.docs import write_doc
from tests.support.records import lock_record

SUBJECT = "demo/dlm.lock"


def original_rule(seed: int, section_id: str, index: int, fraction: float) -> bool:
    """The original tool's splitter, from its definition (docs/format.md)."""
    digest = hashlib.sha256(f"{seed}\x00{section_id}\x00{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < int(fraction * 2**64)


def pairs(n: int, start: int = 0) -> str:
    return "".join(f"### Q\nQuestion {i}?\n### A\nAnswer {i}.\n\n" for i in range(start, n))


def rows_of(directory: Path, body: str) -> list[Any]:
    loaded = load_document(write_doc(directory, body), Outside.REFUSE)
    return section_rows(loaded.doc.sections, None, False)[0]


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.9])
@pytest.mark.parametrize("seed", [0, 42, 2**32 - 1])
def test_a_rows_fate_is_the_original_function(tmp_path: Path, fraction: float, seed: int) -> None:
    rows = rows_of(tmp_path, "# Prose\n\n::instruction::\n" + pairs(40))
    fates = [is_held_out(r.section_id, 0, seed, fraction) for r in rows]
    assert fates == [original_rule(seed, r.section_id, 0, fraction) for r in rows]
    assert any(fates) and not all(fates)
    trained, held = split_rows(rows, seed, fraction)
    assert held == [r for r, f in zip(rows, fates, strict=True) if f]  # order kept
    assert trained == [r for r, f in zip(rows, fates, strict=True) if not f]
    assert original_rule(seed, rows[0].section_id, 1, fraction) == is_held_out(
        rows[0].section_id, 1, seed, fraction
    )


def test_adding_sections_moves_no_existing_row(tmp_path: Path) -> None:
    before = rows_of(tmp_path / "a", "::instruction::\n" + pairs(30))
    after = rows_of(tmp_path / "b", "New prose.\n\n::instruction::\n" + pairs(60, 30) + pairs(30))
    _, held_before = split_rows(before, 42, 0.3)
    _, held_after = split_rows(after, 42, 0.3)
    old = {r.section_id for r in before}
    assert {r.section_id for r in held_after if r.section_id in old} == {
        r.section_id for r in held_before
    }


def test_off_holds_out_nothing(tmp_path: Path) -> None:
    rows = rows_of(tmp_path, "::instruction::\n" + pairs(20))
    assert split_rows(rows, 42, None) == (rows, [])


def test_identical_pairs_share_their_fate(tmp_path: Path) -> None:
    """One row per section, index 0: a copy of a held-out pair is held out too."""
    rows = rows_of(tmp_path, "::instruction::\n" + pairs(20) + pairs(20))
    _, held = split_rows(rows, 42, 0.5)
    assert held and len(held) % 2 == 0
    ids = [r.section_id for r in held]
    assert all(ids.count(i) == 2 for i in ids)


# --------------------------------------------------------------------------- the lock


def test_the_lock_records_the_fraction_only_when_set() -> None:
    plain = parse_lock(json.dumps(lock_record()).encode(), SUBJECT)
    assert "val_fraction" not in json.loads(plain.to_bytes())
    split = plain.model_copy(update={"val_fraction": 0.25})
    data = split.to_bytes()
    assert json.loads(data)["val_fraction"] == 0.25
    assert parse_lock(data, SUBJECT) == split
    assert isinstance(Lock.model_validate(json.loads(data)).val_fraction, float)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.1", None, {"a": 1}])
def test_a_malformed_fraction_is_a_malformed_lock(value: object) -> None:
    obj = lock_record(val_fraction=value)
    with pytest.raises(LockError, match="val_fraction"):
        parse_lock_json(json.dumps(obj).encode(), SUBJECT)


@pytest.mark.parametrize(("old", "new"), [(None, 0.1), (0.1, None), (0.1, 0.2)])
def test_a_changed_fraction_is_an_error(old: float | None, new: float | None) -> None:
    prior = {k: v for k, v in lock_record(val_fraction=old).items() if v is not None}
    current = {k: v for k, v in lock_record(val_fraction=new).items() if v is not None}
    findings = [f for f in classify(prior, current) if f.field == "val_fraction"]
    assert [f.severity for f in findings] == ["ERROR"]
