"""The evaluation record's numbers: exact bits, no NaN, a flat metrics file, no rewrite."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from dlm_git.eval.record import (
    EvalError,
    LossSum,
    loss_entry,
    metrics_of,
    val_section,
    write_if_changed,
)


def test_a_loss_is_the_mean_over_scored_tokens_with_its_bits() -> None:
    entry = loss_entry(LossSum(nll=6.0, tokens=4, rows=2), "doc")
    assert entry is not None
    assert entry["loss"] == 1.5 and float.fromhex(entry["loss_hex"]) == 1.5
    assert float.fromhex(entry["perplexity_hex"]) == math.exp(1.5) == entry["perplexity"]
    assert (entry["tokens"], entry["rows"]) == (4, 2)
    assert loss_entry(LossSum(0.0, 0, 0), "doc") is None  # no rows of that mode


@pytest.mark.parametrize("nll", [math.nan, math.inf, 1e6])
def test_a_loss_or_perplexity_that_is_not_finite_is_one_error(nll: float) -> None:
    with pytest.raises(EvalError) as caught:
        loss_entry(LossSum(nll, 1, 1), "demo/demo.dlm: val")
    line = caught.value.one_line()
    assert line.startswith("demo/demo.dlm: val: ") and "hint:" in line and "\n" not in line


def test_val_is_split_by_mode_and_summed_overall() -> None:
    val = val_section({"prose": LossSum(3.0, 3, 1), "instruction": LossSum(1.0, 1, 1)}, 0.2, "doc")
    assert val["val_fraction"] == 0.2
    assert val["overall"]["loss"] == 1.0 and val["overall"]["rows"] == 2
    assert val["prose"]["loss"] == 1.0 and val["instruction"]["tokens"] == 1
    only_prose = val_section({"prose": LossSum(3.0, 3, 1)}, 0.2, "doc")
    assert only_prose["instruction"] is None


def test_metrics_hold_numbers_only() -> None:
    record = {
        "val": val_section({"prose": LossSum(2.0, 2, 1)}, 0.1, "doc"),
        "probes": [{"exact_match": True}, {"exact_match": False}],
    }
    metrics = metrics_of(record)
    assert metrics == {
        "val": {
            "overall": {"loss": 1.0, "perplexity": math.e},
            "prose": {"loss": 1.0, "perplexity": math.e},
        },
        "probes": {"count": 2, "exact_match": 0.5},
    }
    assert metrics_of({"val": None, "probes": []}) == {"probes": {"count": 0, "exact_match": 0.0}}


def test_an_unchanged_record_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "eval.json"
    assert write_if_changed(path, b"{}\n")
    os.utime(path, (1, 1))
    assert not write_if_changed(path, b"{}\n")
    assert path.stat().st_mtime == 1
    assert write_if_changed(path, b"[]\n") and path.read_bytes() == b"[]\n"
