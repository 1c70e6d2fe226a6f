"""Hostile bytes in a commit's records reach `diff`, `log` and `verify --level replay`:
each is described, never a traceback (the findings of a review of those commands)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dlm_git.gitio.history import _parse_commit
from dlm_git.history.records import json_object
from dlm_git.history.tensors import compare
from dlm_git.lock.policy import classify
from dlm_git.verify.profile import recorded_setup
from dlm_git.verify.report import Verdict

TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
PARENT = "a" * 40


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"torch": "2.13.0"}, 5),
        ({"torch": "2.13.0"}, ["x"]),
        ({"torch": 2}, {"torch": "3.0"}),
        (None, {"torch": "2.13.0"}),
    ],
)
def test_the_lock_table_judges_any_shape(old: object, new: object) -> None:
    findings = classify({"pinned_versions": old}, {"pinned_versions": new})
    assert findings and all(f.field.startswith("pinned_versions") for f in findings)
    if not isinstance(new, dict):
        assert [f.severity for f in findings] == ["ERROR"]  # malformed: the whole field


@pytest.mark.parametrize(
    "data", [b'{"seed": NaN}', b'{"x": Infinity}', b'{"final_loss": 1e999}', b"[1]", b"{"]
)
def test_records_json_cannot_carry_read_as_none(data: bytes) -> None:
    assert json_object(data) is None


def test_equal_tensors_with_non_finite_values_are_equal() -> None:
    a = {"t.lora_A.weight": np.array([[np.inf, 1.0, np.nan]]), "t.lora_B.weight": np.ones((2, 1))}
    delta = compare(a, {k: v.copy() for k, v in a.items()}, (2.0, 2.0))
    assert {(t.rel_l2, t.max_abs) for t in delta.tensors} == {(0.0, 0.0)}
    assert [g.rel_l2 for g in delta.modules + delta.layers] == [0.0, 0.0]  # ΔW too


def test_a_parent_line_after_the_author_is_not_a_parent() -> None:
    raw = (
        f"tree {TREE}\nauthor A <a@x> 99999999999999999999 +0000\n"
        f"committer A <a@x> 1 +0000\nparent {PARENT}\n\nsubject\x1b[31m\n"
    ).encode()
    info = _parse_commit("b" * 40, raw)
    assert info.parents == () and info.time == 99999999999999999999
    assert info.subject == "subject\x1b[31m"
    honest = f"tree {TREE}\nparent {PARENT}\nparent zz\nauthor A <a@x> 5 +0000\n\nok".encode()
    assert _parse_commit("c" * 40, honest).parents == (PARENT,)


def test_log_prints_odd_commit_times_as_a_question_mark() -> None:
    from dlm_git.commands.log import _utc

    assert _utc(99999999999999999999, "%Y") == "?"


def test_replay_refuses_flags_json_cannot_carry(tmp_path: Path) -> None:
    flags = {"numerics": "x86-64-v3", "threads": 2, "distributed": {"world_size": 2}}
    flags["distributed"]["x"] = math.nan  # type: ignore[index]
    check, verdict = recorded_setup({"determinism_flags": flags}, tmp_path, "demo")  # type: ignore[misc]
    assert verdict == Verdict.FAILED and "NaN" in check.detail
