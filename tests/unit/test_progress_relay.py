"""The parent's side of a training child's reports (`dlm_git.train.progress.Relayed`):
notices always reach stderr, the plan and progress only when this process shows them,
and an update no training loop gives (step 0, a step past the total, a loss that is no
float hex, seconds that are negative or past `MAX_SECONDS`, counts of 2**63 or more) is
one `ProtocolError`, never an overflow, a division by zero or a traceback. A relayed
line is drawn on the seconds the update carries (the trainer's clock), never on how late
it reached the parent."""

from __future__ import annotations

import math
import time

import pytest

from dlm_git.childproc import ProtocolError
from dlm_git.train.progress import Notice, Outline, Progress, Relayed, clock

PLAN = Outline("demo/demo.dlm", 3, 1.5, 100)


def test_a_relay_not_shown_says_its_notices_only(capsys: pytest.CaptureFixture[str]) -> None:
    relayed = Relayed(shown=False)
    for got in (Notice("demo/.gitignore: added /adapter"), PLAN, Progress(3, 3, "0x1p+0", 9, 0.5)):
        relayed.handle(got)
    assert capsys.readouterr().err == "demo/.gitignore: added /adapter\n"


def test_a_notice_is_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    Relayed(shown=False).handle(Notice("demo\x1b[2J/.gitignore"))
    assert capsys.readouterr().err == "demo\\x1b[2J/.gitignore\n"


@pytest.mark.parametrize(
    "bad",
    [
        Progress(0, 3, "0x1p+0", 9, 0.5),
        Progress(4, 3, "0x1p+0", 9, 0.5),
        Progress(1, 3, "zz", 9, 0.5),
        Progress(1, 3, "0x1p+0", 9, -0.5),
        Progress(1, 3, "0x1p+0", 9, math.nan),
        Progress(1, 3, "0x1p+0", 9, math.inf),
        Progress(1, 20, "0x1p+0", 9, 1e308),  # its ETA would overflow
        Progress(1, 2**63, "0x1p+0", 9, 0.5),
        Progress(1, 3, "0x1p+0", 2**63, 0.5),
    ],
)
def test_an_update_no_loop_gives_is_a_protocol_error(
    bad: Progress, capsys: pytest.CaptureFixture[str]
) -> None:
    relayed = Relayed(shown=True)
    relayed.handle(PLAN)
    relayed.handle(Progress(1, 3, "nan", 9, 0.5))  # a step without loss tokens: drawn
    with pytest.raises(ProtocolError, match="is not a progress update"):
        relayed.handle(bad)
    err = capsys.readouterr().err
    assert err.startswith("train demo/demo.dlm: 3 steps") and "step 1/3  loss nan" in err


def test_a_relayed_line_is_drawn_on_the_trainers_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The parent saw the plan long before the last update (a slow pipe, a busy parent):
    the rate and the time it took are still the trainer's, 9,000 tokens in 2 s."""
    relayed = Relayed(shown=True)
    relayed.handle(PLAN)
    time.sleep(0.3)
    relayed.handle(Progress(1, 3, "0x1p+0", 3000, 0.5))
    relayed.handle(Progress(3, 3, "0x1p+0", 9000, 2.0))
    err = capsys.readouterr().err
    assert "step 1/3  loss 1.0000  6,000 tok/s  ETA 0:01" in err, err
    assert err.endswith("step 3/3  loss 1.0000  4,500 tok/s  0:02 elapsed\n"), err


def test_a_clock_of_no_finite_duration_is_unknown() -> None:
    assert (clock(0.2), clock(61), clock(3600), clock(math.inf)) == (
        "0:01",
        "1:01",
        "1:00:00",
        "?:??",
    )
