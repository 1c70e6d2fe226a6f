"""`diff`'s settings as records hold them (`dlm_git.history.settings`): what two manifests
record differently, which of it the inputs' lines already say, and how a line names where
a value is set. The inputs' side (frontmatter and params.yaml on real git) is specified in
tests/integration/test_diff.py."""

from __future__ import annotations

from typing import Any

from dlm_git.commands.diff import render
from dlm_git.history.diff import AdapterDiff, DocDiff, InputsDiff, LockDiff, TrainingDiff
from dlm_git.history.settings import Change, origin_note, trained_changes

CONFIG = {"learning_rate": 0.002, "max_steps": 4, "total_steps": 4, "warmup_steps": 0}


def manifest(**changed: Any) -> dict[str, Any]:
    return {"training_config": {**CONFIG, **changed, "system_prompt": "Be brief."}}


def test_recorded_changes_are_keyed_as_the_inputs_key_them() -> None:
    got = trained_changes((manifest(), manifest(max_steps=8, total_steps=8)))
    assert got == [Change("training.max_steps", 4, 8), Change("training.total_steps", 4, 8)]
    assert trained_changes((manifest(), {"training_config": "forged"})) == []
    assert trained_changes((None, manifest())) == []


def test_a_line_names_params_yaml_only_where_it_sets_a_value() -> None:
    key = "training.lora_r"
    assert origin_note(Change(key, 8, 4, ("frontmatter", "frontmatter"))) == ""
    assert origin_note(Change(key, 8, 4, ("params.yaml", "params.yaml"))) == "  (params.yaml)"
    assert origin_note(Change(key, None, 4, (None, "params.yaml"))) == "  (params.yaml)"
    moved = Change(key, 8, 4, ("frontmatter", "params.yaml"))
    assert origin_note(moved) == "  (frontmatter -> params.yaml)"


def test_the_terminal_shows_a_recorded_change_the_inputs_do_not_say() -> None:
    """max_steps 4 -> 8 in the frontmatter: the derived total_steps shows as trained, the
    max_steps change once (as config)."""
    said = Change("training.max_steps", 4, 8, ("frontmatter", "frontmatter"))
    training = TrainingDiff(
        settings=trained_changes((manifest(), manifest(max_steps=8, total_steps=8)))
    )
    d = DocDiff("demo", "changed", InputsDiff(config=[said]), LockDiff(), AdapterDiff(), training)
    lines = render(d)
    assert "  config   training.max_steps: 4 -> 8" in lines, lines
    assert "  trained  training.total_steps: 4 -> 8" in lines, lines
    assert not [line for line in lines if line.startswith("  trained  training.max_steps")]
