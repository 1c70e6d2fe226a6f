"""The parent's side of a training child's reports (`dlm_git.train.progress.Relayed`):
notices always reach stderr, the plan and progress only when this process shows them,
and an update no training loop gives (step 0, a step past the total, a loss that is no
float hex) is one `ProtocolError`, never a division by zero or a traceback."""

from __future__ import annotations

import pytest

from dlm_git.childproc import ProtocolError
from dlm_git.train.progress import Notice, Outline, Progress, Relayed

PLAN = Outline("demo/demo.dlm", 3, 1.5, 100)


def test_a_relay_not_shown_says_its_notices_only(capsys: pytest.CaptureFixture[str]) -> None:
    relayed = Relayed(shown=False)
    for got in (Notice("demo/.gitignore: added /adapter"), PLAN, Progress(3, 3, "0x1p+0", 9)):
        relayed.handle(got)
    assert capsys.readouterr().err == "demo/.gitignore: added /adapter\n"


def test_a_notice_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    Relayed(shown=False).handle(Notice("demo\x1b[2J/.gitignore"))
    assert capsys.readouterr().err == "demo\\x1b[2J/.gitignore\n"


@pytest.mark.parametrize(
    "bad",
    [Progress(0, 3, "0x1p+0", 9), Progress(4, 3, "0x1p+0", 9), Progress(1, 3, "zz", 9)],
)
def test_an_update_no_loop_gives_is_a_protocol_error(
    bad: Progress, capsys: pytest.CaptureFixture[str]
) -> None:
    relayed = Relayed(shown=True)
    relayed.handle(PLAN)
    relayed.handle(Progress(1, 3, "nan", 9))  # a step without loss tokens: drawn
    with pytest.raises(ProtocolError, match="is not a progress update"):
        relayed.handle(bad)
    err = capsys.readouterr().err
    assert err.startswith("train demo/demo.dlm: 3 steps") and "step 1/3  loss nan" in err
