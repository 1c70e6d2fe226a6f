"""The shared lock record (`tests/support/records.py`) is one a dlm-git writes: every
reader of a lock takes it, so a test that changes one field of it tests that field."""

from __future__ import annotations

from dlm_git.hashing import canonical_json
from dlm_git.lock.fields import LOCK_KEYS, lock_problem
from dlm_git.lock.io import parse_lock
from tests.support.records import LOCK_RECORD, lock_record


def test_the_shared_lock_passes_every_field_rule() -> None:
    # `val_fraction` is written only with a held-out split (tests/unit/test_heldout.py)
    assert set(LOCK_RECORD) == LOCK_KEYS - {"val_fraction"}
    assert lock_problem(lock_record()) is None


def test_the_shared_lock_parses_as_a_lock() -> None:
    lock = parse_lock(canonical_json(lock_record()), "dlm.lock")
    assert lock.model_dump(mode="json") == LOCK_RECORD


def test_overrides_replace_fields_of_a_copy() -> None:
    changed = lock_record(seed=7)
    changed["determinism_flags"]["threads"] = 8
    assert changed["seed"] == 7
    assert LOCK_RECORD["seed"] == 42 and LOCK_RECORD["determinism_flags"]["threads"] == 2
