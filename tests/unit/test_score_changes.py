"""A change of two hostile but finite scores that overflows is no number, never `inf`
(which `--json` output cannot hold: it was a traceback)."""

from __future__ import annotations

from dlm_git.commands.log import _change
from dlm_git.history.scores import Move
from dlm_git.output import emit_json


def test_an_overflowing_change_is_no_number_and_json_still_prints(capsys) -> None:  # type: ignore[no-untyped-def]
    assert Move(-1.7e308, 1.7e308).change is None
    assert _change(1.7e308, -1.7e308) is None
    assert Move(1.0, 2.5).change == 1.5 and _change(2.5, 1.0) == 1.5
    emit_json({"change": Move(-1.7e308, 1.7e308).change})
    assert capsys.readouterr().out.strip() == '{\n  "change": null\n}'


def test_hex_bits_past_any_float_are_a_malformed_record_not_a_traceback() -> None:
    """`0x1p+99999` is float hex syntax for no float (Python raises OverflowError): a
    commit's eval.json holding it is malformed in one line, for `log` and `diff` alike."""
    import json

    from dlm_git.history.scores import read_side

    record = {
        "eval_version": 1,
        "val": {"overall": {"loss": 1.0, "loss_hex": "0x1p+99999", "perplexity": 2.0}},
    }
    side = read_side(json.dumps(record).encode())
    assert side.state == "malformed", side
    assert side.problem == "eval.json: val.overall.loss and its hex bits are different numbers"
