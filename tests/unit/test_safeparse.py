"""Bounded YAML parsing: the nesting is measured by libyaml's event parser where PyYAML has
libyaml (the pure-Python parser takes seconds on a dvc.lock of a few hundred documents),
and too deep is an error either way."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dlm_git import safeparse

DEEP = "a: " + "[" * 100 + "]" * 100 + "\n"


def test_too_deep_is_an_error_with_its_line() -> None:
    with pytest.raises(safeparse.TooDeep) as caught:
        safeparse.load_yaml("ok: 1\n" + DEEP)
    assert caught.value.problem_mark.line == 1


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
def test_depth_is_measured_by_libyaml_when_pyyaml_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def pure_python(*_: Any) -> None:
        raise AssertionError("measured with PyYAML's pure-Python parser")

    monkeypatch.setattr(yaml, "SafeLoader", pure_python)
    with pytest.raises(safeparse.TooDeep):
        safeparse.check_yaml_depth(DEEP)
    many = "stages:\n" + "".join(f"  s{i}:\n    outs:\n    - path: d{i}\n" for i in range(100))
    safeparse.check_yaml_depth(many)  # over MAX_DEPTH openers, shallow: measured, accepted
