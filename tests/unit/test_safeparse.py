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
        safeparse.check_yaml_bounds(DEEP)
    many = "stages:\n" + "".join(f"  s{i}:\n    outs:\n    - path: d{i}\n" for i in range(100))
    safeparse.check_yaml_bounds(many)  # over MAX_DEPTH openers, shallow: measured, accepted


def laughs(levels: int, width: int = 10) -> str:
    """A few hundred bytes of nested anchors that expand to width**levels nodes."""
    lines = ["a0: &a0 x"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + f"\ndocs: {{d: {{training: {{target_modules: *a{levels}}}}}}}\n"


def test_aliases_expanding_past_the_bound_are_an_error_before_anything_is_built() -> None:
    """A walk of the result (a comparison, a repr) would visit every expansion: 10**9
    nodes from 500 bytes. Refused in the event pass, in well under a second."""
    text = laughs(9)
    assert len(text) < 600
    with pytest.raises(safeparse.TooLarge) as caught:
        safeparse.load_yaml(text)
    assert "aliases expand it past" in str(caught.value)
    assert isinstance(caught.value, safeparse.Unbounded)


def test_aliases_within_the_bound_load_as_written() -> None:
    data = safeparse.load_yaml(laughs(3))
    assert len(data["a3"]) == 10 and data["a3"][0][0] == ["x"] * 10


def test_a_params_yaml_of_nested_aliases_is_the_one_refusal() -> None:
    from dlm_git.docset import read_params
    from dlm_git.errors import DlmGitError

    with pytest.raises(DlmGitError, match=r"HEAD:params.yaml.*aliases expand it past"):
        read_params(laughs(8).encode(), "HEAD")


def test_json_nested_past_the_parser_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        safeparse.load_json(b"[" * 100_000 + b"]" * 100_000)


def test_json_keys_twice_are_refused_only_when_asked() -> None:
    text = '{"a": {"b": 1, "b": 2}}'
    assert safeparse.load_json(text) == {"a": {"b": 2}}  # JSON's own rule: the last wins
    with pytest.raises(safeparse.DuplicateKey) as caught:
        safeparse.load_json(text, unique_keys=True)
    assert caught.value.key == "b" and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',
        '{"a\\udc00": 1}',
        '[[1, {"k": ["x", "\\uD8FF"]}]]',
        '"\\ude00\\ud83d"',  # a low surrogate before a high one pairs nothing
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_json_string_or_key_with_a_lone_surrogate_is_a_value_error(
    text: str, as_bytes: bool
) -> None:
    """Legal JSON, but no Unicode text: nothing could hash it as canonical JSON, write it
    back as UTF-8 or print it."""
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        safeparse.load_json(text.encode() if as_bytes else text)


def test_a_surrogate_pair_an_escaped_backslash_and_text_decoded_raw_are_read_as_they_are() -> None:
    assert safeparse.load_json('"\\ud83d\\ude00"') == "\U0001f600"  # one code point
    assert safeparse.load_json('"\\\\ud800"') == "\\ud800"  # a backslash, then text
    raw = b'"\xff"'.decode("utf-8", "surrogateescape")  # a surrogate held raw in a str
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        safeparse.load_json(raw)


def test_yaml_keys_twice_are_refused_with_their_line_when_asked() -> None:
    text = "training:\n  seed: 1\ntraining:\n  seed: 2\n"
    assert safeparse.load_yaml(text) == {"training": {"seed": 2}}
    with pytest.raises(yaml.YAMLError) as caught:
        safeparse.load_yaml(text, unique_keys=True)
    assert "duplicate key 'training'" in str(caught.value)
    assert caught.value.problem_mark.line == 2


@pytest.mark.parametrize("unique_keys", [False, True])
def test_an_integer_too_long_for_python_is_a_yaml_error_at_its_mark(unique_keys: bool) -> None:
    """PyYAML raises CPython's bare `ValueError` for an integer of more than 4300 digits
    (`sys.get_int_max_str_digits`): every reader's YAML-error handling must see it."""
    text = "seed: 1\nmax_steps: " + "9" * 4301 + "\n"
    with pytest.raises(yaml.YAMLError) as caught:
        safeparse.load_yaml(text, unique_keys=unique_keys)
    assert "integer of more than 4300 digits" in str(caught.value)
    assert (caught.value.problem_mark.line, caught.value.problem_mark.column) == (1, 11)
    assert safeparse.load_yaml("n: " + "9" * 4300 + "\n") == {"n": int("9" * 4300)}


@pytest.mark.parametrize(
    "value",
    [
        "0x" + "f" * 3600,  # fewer hex digits, more than 4300 decimal ones: no text of it
        "0b" + "1" * 20000,
        "0" + "7" * 6000,
        "1" + ":0" * 2600,
        "!!int 1" + "_0" * 4400,
    ],
)
def test_an_integer_python_cannot_print_is_refused_in_any_base(value: str) -> None:
    with pytest.raises(yaml.YAMLError) as caught:
        safeparse.load_yaml(f"seed: 1\nmax_steps: {value}\n")
    assert "more than 4300 digits" in str(caught.value)
    assert caught.value.problem_mark.line == 1


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("2024-02-30", "not a valid timestamp (day is out of range for month)"),
        ("2024-99-99", "not a valid timestamp (month must be in 1..12)"),
        ("2024-01-01 25:00:00", "not a valid timestamp (hour must be in 0..23)"),
        ("!!bool maybe", "not a valid bool (maybe)"),
        ("!!float abc", "not a valid float (could not convert string to float)"),
        ("!!int abc", "not a valid int (invalid literal for int() with base 10)"),
        ("1" + ":0" * 2400 + ".5", "not a valid float (int too large to convert to float)"),
    ],
)
def test_a_scalar_pyyaml_cannot_build_is_a_yaml_error_at_its_mark(value: str, problem: str) -> None:
    """PyYAML lets these through as bare ValueError, KeyError or OverflowError: past every
    reader's YAML-error handling (a hostile dvc.lock or params.yaml was a traceback)."""
    for unique_keys in (False, True):
        with pytest.raises(yaml.YAMLError) as caught:
            safeparse.load_yaml(f"a: 1\nwhen: {value}\n", unique_keys=unique_keys)
        assert caught.value.problem == problem
        assert (caught.value.problem_mark.line, caught.value.problem_mark.column) == (1, 6)


@pytest.mark.parametrize("text", ["x: &a [*a]\n", "x: &a {k: [1, *a]}\n", "x: [&b [*b]]\n"])
def test_a_collection_that_contains_itself_is_refused(text: str) -> None:
    """An alias inside the collection it names builds a structure no walk of which ends."""
    for read in (safeparse.load_yaml, safeparse.compose_yaml):
        with pytest.raises(safeparse.TooLarge, match="inside of"):
            read(text)
    assert safeparse.load_yaml("a: &a [1]\nb: [*a, *a]\n") == {"a": [1], "b": [[1], [1]]}


def test_composing_and_round_trip_reads_are_bounded_too() -> None:
    from ruamel.yaml import YAML

    assert safeparse.compose_yaml("a: [1]\n") is not None
    with pytest.raises(safeparse.TooDeep):
        safeparse.compose_yaml(DEEP)
    assert safeparse.load_yaml_with(YAML(), "a: [1]\n") == {"a": [1]}
    with pytest.raises(safeparse.TooDeep):
        safeparse.load_yaml_with(YAML(), DEEP)


PARSED = {"a": {"b": [{"c": "x"}, 2, True]}, "n": None}


@pytest.mark.parametrize(
    ("keys", "found"),
    [
        (("a", "b", 0, "c"), "x"),
        (("a", "b", -2), 2),
        (("a", "b", 2), True),
        (("n",), None),
        (("a", "b", 3), None),  # out of range
        (("a", "b", -4), None),
        (("a", "b", "c"), None),  # a str key into a list
        (("a", 0), None),  # an int key into a dict
        (("a", "b", 0, "c", "d"), None),  # into a str
        (("a", "b", 1, "c"), None),  # into an int
        (("missing", "x"), None),
        ((), PARSED),
    ],
)
def test_dig_finds_what_is_there_and_none_for_any_other_shape(
    keys: tuple[str | int, ...], found: object
) -> None:
    assert safeparse.dig(PARSED, *keys) == found


def test_dig_with_a_kind_is_none_for_any_other_kind() -> None:
    assert safeparse.dig(PARSED, "a", "b", 0, "c", kind=str) == "x"
    assert safeparse.dig(PARSED, "a", "b", 0, "c", kind=int) is None
    assert safeparse.dig(PARSED, "a", "b", 1, kind=int) == 2
    assert safeparse.dig(PARSED, "a", "b", 2, kind=int) is None  # a bool is not a count
    assert safeparse.dig(PARSED, "a", "b", 2, kind=bool) is True
    assert safeparse.dig(PARSED, "a", kind=dict) == {"b": [{"c": "x"}, 2, True]}
    assert safeparse.dig([], "a", kind=dict) is None
    assert safeparse.dig("text", 0) is None  # a str is not a list
