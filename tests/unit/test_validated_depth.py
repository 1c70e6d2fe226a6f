"""A value of kind `Any` in a record (a manifest's `training_config`, a lock's
`determinism_flags`) is at most `MAX_ANY_DEPTH` lists/dicts deep: JSON parses about 1000
levels, and the dumps that follow (`model_dump`, `canonical_json`: a manifest's sha256)
ended in a RecursionError traceback a few hundred levels down. Refused at once, as one
line; everything up to the bound reads and dumps as before. (A lock read from bytes meets
its field checks first, which refuse any key no dlm-git records.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dlm_git.errors import DlmGitError
from dlm_git.hashing import canonical_json
from dlm_git.lock.schema import Lock
from dlm_git.manifest.records import read_manifest_bytes
from dlm_git.validated import MAX_ANY_DEPTH, ValidationError
from tests.support.docs import DLM_ID
from tests.support.models_corpus import BASE_MANIFEST
from tests.support.records import lock_record


def nested(levels: int) -> Any:
    """`levels` lists and dicts, each inside the one before, around a 1."""
    value: Any = 1
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def manifest_with(value: Any) -> bytes:
    text = json.dumps({**BASE_MANIFEST, "training_config": {"deep": "@"}})
    return text.replace('"@"', "[" * value + "1" + "]" * value).encode()


@pytest.mark.parametrize("levels", [MAX_ANY_DEPTH + 1, 300, 600])
def test_a_manifest_nested_past_the_bound_is_one_error(levels: int) -> None:
    with pytest.raises(DlmGitError) as caught:
        read_manifest_bytes(manifest_with(levels), "d/manifest.json")
    assert str(caught.value).startswith(
        "d/manifest.json: manifest field 'training_config.deep': "
        f"Input should be nested at most {MAX_ANY_DEPTH} levels deep"
    )


def test_a_manifest_at_the_bound_reads_and_dumps_as_written() -> None:
    manifest = read_manifest_bytes(manifest_with(MAX_ANY_DEPTH), "d/manifest.json")
    assert manifest.to_bytes() == canonical_json(json.loads(manifest_with(MAX_ANY_DEPTH)))


def test_a_lock_s_flags_are_held_to_the_same_bound() -> None:
    lock = lock_record(dlm_id=DLM_ID)
    Lock.model_validate({**lock, "determinism_flags": {"deep": nested(MAX_ANY_DEPTH)}})
    with pytest.raises(ValidationError) as caught:
        Lock.model_validate({**lock, "determinism_flags": {"deep": nested(MAX_ANY_DEPTH + 1)}})
    assert [(p.loc, p.kind) for p in caught.value.problems] == [
        (("determinism_flags", "deep"), "too_deep")
    ]
