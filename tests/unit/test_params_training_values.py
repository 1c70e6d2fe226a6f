"""Check `params.training` reads a params.yaml value as the document's schema reads it
(`contract.records.same_setting`): what the schema takes for the recorded value passes,
anything else fails, and a boolean is never a number."""

from __future__ import annotations

import pytest

from dlm_git.contract.records import same_setting


@pytest.mark.parametrize(
    ("value", "recorded"),
    [
        (0.001, 0.001),
        ("1e-3", 0.001),  # YAML 1.1 leaves `1e-3` text; the schema reads a float
        (8, 8),
        ("8", 8),
        (8, 8.0),
        (True, True),
        ("off", False),
        ("T", True),
        (1.0, True),
        (False, False),
        (None, None),
        ("cosine", "cosine"),
        (["v_proj", "q_proj"], ["q_proj", "v_proj"]),
    ],
)
def test_the_value_trained_with_passes(value: object, recorded: object) -> None:
    assert same_setting(value, recorded)


@pytest.mark.parametrize(
    ("value", "recorded"),
    [
        (0.002, 0.001),
        ("fast", 0.001),
        (True, 1),
        ("yes", False),
        (8, None),
        ("linear", "cosine"),
        (["q_proj"], ["q_proj", "v_proj"]),
        ({"a": 1}, 0.001),
        (10**400, 16),  # a hostile number: compared exactly, never through float()
        (16, 10**400),
        (10**400, 0.001),
        ("1" + "0" * 400, 16),
        ([10**5000], ["q_proj"]),  # past str()'s digit limit
    ],
)
def test_another_value_fails(value: object, recorded: object) -> None:
    assert not same_setting(value, recorded)
