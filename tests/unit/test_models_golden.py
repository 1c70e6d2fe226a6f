"""The document, lock and manifest records judge every input as the pydantic models they
replaced did (`dlm_git.validated`, issue 28).

tests/golden/models/outcomes.json was written by tests/support/models_corpus.py from the
pydantic v2 models (the commit it names): thousands of inputs through the real entry
points (`parse_frontmatter`, `parse_lock`, `read_manifest_bytes`, `with_params`,
`childproc.decode`, each model's `model_validate`). Each case is replayed here and must
come out the same: the same error line, or the same dumps (JSON and Python, types
included) and effective training config.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from typing import Any

import pytest

from dlm_git.doc.schema import CacheConfig, Frontmatter, TrainingConfig
from dlm_git.lock.schema import Lock
from dlm_git.validated import Record, ValidationError
from tests.support import models_corpus as corpus

KINDS = ("doc", "lock", "manifest", "params", "child", "py")


@cache
def _golden() -> dict[str, list[tuple[Any, Any]]]:
    body = json.loads(corpus.GOLDEN.read_text())
    by_kind: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for kind, spec, found in body["cases"]:
        by_kind[kind.split(":")[0]].append(((kind, spec), body["outcomes"][found]))
    return by_kind


@pytest.mark.parametrize("group", KINDS)
def test_every_case_comes_out_as_pydantic_gave_it(group: str) -> None:
    cases = _golden()[group]
    assert len(cases) > 150
    differ = []
    for (kind, spec), expected in cases:
        got = json.loads(json.dumps(corpus.outcome(kind, spec), sort_keys=True))
        if got != expected:
            differ.append((kind, spec, expected, got))
    assert differ == [], f"{len(differ)} of {len(cases)} differ; first: {differ[:3]}"


def test_the_corpus_covers_refusals_and_acceptances_of_every_kind() -> None:
    for group in KINDS:
        outcomes = [json.dumps(o) for _, o in _golden()[group]]
        refused = sum('"error' in o for o in outcomes)
        assert 0 < refused < len(outcomes), group


def test_defaults_are_taken_as_written_and_dumped_by_their_field_s_kind() -> None:
    training = TrainingConfig()
    assert training.lora_alpha == 16 and type(training.lora_alpha) is int
    assert type(training.model_dump()["lora_alpha"]) is int
    assert type(training.model_dump(mode="json")["lora_alpha"]) is float
    assert type(TrainingConfig(lora_alpha=16).lora_alpha) is float


def test_keyword_construction_validates_and_copy_does_not() -> None:
    with pytest.raises(ValidationError) as refused:
        CacheConfig(max_bytes="0", bogus=1)  # type: ignore[arg-type, call-arg]
    assert [(p.loc, p.kind) for p in refused.value.problems] == [
        (("max_bytes",), "greater_than"),
        (("bogus",), "extra_forbidden"),
    ]
    cache_config = CacheConfig(max_bytes="16")  # type: ignore[arg-type]
    assert cache_config.max_bytes == 16
    copied = cache_config.model_copy(update={"max_bytes": "not checked"})
    assert copied.max_bytes == "not checked" and cache_config.max_bytes == 16


def test_records_are_frozen_equal_by_value_and_hashable() -> None:
    one, two = TrainingConfig(seed=1), TrainingConfig(seed="1")  # type: ignore[arg-type]
    assert one == two and hash(one) == hash(two) and one != TrainingConfig(seed=2)
    assert one != CacheConfig() and len({one, two}) == 1
    with pytest.raises(AttributeError):
        one.seed = 3  # type: ignore[misc]
    assert Frontmatter.model_validate(Frontmatter(dlm_id=corpus.ULID)).dlm_id == corpus.ULID
    assert list(Lock.model_fields)[:3] == ["lock_version", "dlm_id", "dlm_sha256"]


def test_defining_a_record_evaluates_no_annotation() -> None:
    class Later(Record):
        value: NotDefinedYet  # type: ignore[name-defined]  # noqa: F821

    assert list(Later.model_fields) == ["value"]
    with pytest.raises(NameError):
        Later.model_validate({"value": 1})
