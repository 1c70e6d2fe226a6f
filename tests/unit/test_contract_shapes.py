"""`contract.shapes` refuses what the manifest schema refuses, so that the hash level never
passes a manifest the replay cannot read (review stop 40, finding 2): a `training_config`
value nested past `validated.MAX_ANY_DEPTH` was accepted by the shape and refused by the
schema, and the replay then compared no adapter file but the weights. And a list the
checks read as a mapping (the adapter's tensors, by name) names each key once (finding 6:
a second entry for a name hid the first)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dlm_git.contract.shapes import manifest_problem, parse_manifest
from dlm_git.errors import DlmGitError
from dlm_git.manifest.records import read_manifest_bytes
from dlm_git.validated import MAX_ANY_DEPTH
from tests.support.models_corpus import BASE_MANIFEST


def nested(levels: int, *, objects: bool) -> Any:
    """`levels` lists (or lists and objects, alternating) each inside the one before."""
    value: Any = "x"
    for i in range(levels):
        value = {"k": value} if objects and i % 2 else [value]
    return value


def with_config(value: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(BASE_MANIFEST)
    manifest["training_config"] = {"seed": 0, "note": value}
    return manifest


def schema_accepts(manifest: dict[str, Any]) -> bool:
    try:
        read_manifest_bytes(json.dumps(manifest).encode(), "d/manifest.json")
    except DlmGitError:
        return False
    return True


@pytest.mark.parametrize("objects", [False, True])
@pytest.mark.parametrize("levels", [1, MAX_ANY_DEPTH - 1, MAX_ANY_DEPTH, MAX_ANY_DEPTH + 1, 300])
def test_the_shape_and_the_schema_agree_on_depth(levels: int, objects: bool) -> None:
    manifest = with_config(nested(levels, objects=objects))
    problem = manifest_problem(manifest)
    assert (problem is None) is schema_accepts(manifest), problem
    assert (problem is None) is (levels <= MAX_ANY_DEPTH)
    if problem is not None:
        assert problem == (
            f"training_config.note is nested more than {MAX_ANY_DEPTH} levels deep"
            " (no dlm-git writes it)"
        )


def test_a_deep_config_is_one_line_from_parse_manifest() -> None:
    data = json.dumps(with_config(nested(MAX_ANY_DEPTH + 1, objects=False))).encode()
    with pytest.raises(DlmGitError) as caught:
        parse_manifest(data, "manifest.json")
    assert "\n" not in str(caught.value)
    assert "malformed manifest: training_config.note is nested more than" in str(caught.value)


def tensors(*names: str) -> dict[str, Any]:
    manifest = copy.deepcopy(BASE_MANIFEST)
    entry = manifest["adapter"]["tensors"][0]
    manifest["adapter"]["tensors"] = [dict(entry, name=n) for n in names]
    return manifest


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (("a", "b", "c"), None),
        (("a", "b", "a"), "adapter.tensors[2].name: 'a' is listed twice (also [0])"),
        (("b", "b"), "adapter.tensors[1].name: 'b' is listed twice (also [0])"),
    ],
)
def test_a_tensor_name_is_listed_once(names: tuple[str, ...], problem: str | None) -> None:
    assert manifest_problem(tensors(*names)) == problem


def test_a_malformed_tensor_entry_is_named_before_any_key_is_compared() -> None:
    manifest = tensors("a", "a")
    del manifest["adapter"]["tensors"][1]["name"]
    assert manifest_problem(manifest) == "adapter.tensors[1].name: missing"
    manifest["adapter"]["tensors"] = {"a": 1}
    assert manifest_problem(manifest) == "adapter.tensors is dict {'a': 1}, not a list"
