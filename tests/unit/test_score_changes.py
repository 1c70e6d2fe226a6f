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
