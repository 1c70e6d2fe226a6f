"""The held-out split (`training.val_fraction`), trained for real on the builtin tiny base.

- Training with a split never sees a held-out row: its adapter is bit for bit the one
  trained, without a split, on the document with the held-out pair deleted.
- Turning the split on (here through params.yaml, as `dvc exp run -S` does) is a lock
  ERROR until accepted with `--update-lock`; then the lock and the manifest's config
  record the fraction, the manifest's `tokens` stays the whole document's stream, and
  the committed run verifies at the hash level and replays bitwise.
- A bad fraction in the frontmatter is one line naming the file and the key.
- Off (the default), nothing is recorded: the golden adapter and older records keep
  their bytes (tests/integration/test_determinism_golden.py).

The trainings, evaluation and replay are the CLI in this process
(tests/support/verdicts.py); the refusals (a changed fraction, a bad one), whose exit and
stderr are what a user sees, are the real executable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from dlm_git.doc.load import load_document
from dlm_git.doc.sources import Outside
from dlm_git.train.heldout import is_held_out
from dlm_git.train.rows import section_rows, source_rows
from tests.support.env import run
from tests.support.gitrepo import git
from tests.support.verdicts import Result, assert_verified
from tests.support.verified import DOC, EXTRA_QA, TRAIN_STAGE

pytestmark = pytest.mark.slow

TRAIN = ("train", DOC, "--tiny-dir", "bases/tiny", "--device", "cpu", "--threads", "2")
DLM = f"{DOC}/{DOC}.dlm"


def train(forge: Any, *flags: str) -> Result:
    """`dlm-git train` of the document in this process; exit 0 or the test fails."""
    result: Result = forge._call_main([*TRAIN, "-q", *flags])
    assert result.code == 0, result.stderr
    return result


def split_holding_out_the_extra_pair(forge: Any) -> tuple[int, float]:
    """A (seed, fraction) under which exactly one row is held out: the pair EXTRA_QA."""
    loaded = load_document(forge.root / DLM, Outside.REFUSE)
    rows = section_rows(loaded.doc.sections, None, False)[0] + source_rows(loaded.sources.files)
    extra = next(s.section_id for s in loaded.doc.sections if s.question and s.question in EXTRA_QA)
    for seed in range(1000):
        for fraction in (0.05, 0.1, 0.15, 0.2, 0.25):
            held = [r.section_id for r in rows if is_held_out(r.section_id, 0, seed, fraction)]
            if held == [extra]:
                return seed, fraction
    raise AssertionError("no seed holds out the extra pair alone")


def set_params(forge: Any, training: dict[str, Any]) -> None:
    params = yaml.safe_load(forge.read("params.yaml"))
    params["docs"][DOC] = {"training": training}
    forge.write("params.yaml", yaml.safe_dump(params, sort_keys=False).encode())


def test_a_split_trains_without_its_held_out_rows_and_replays_bitwise(forge: Any) -> None:
    seed, fraction = split_holding_out_the_extra_pair(forge)
    lock_before = forge.read(f"{DOC}/dlm.lock")
    set_params(forge, {"seed": seed, "val_fraction": fraction})

    refused = run(["dlm-git", *TRAIN, "-q"], forge.root, check=False)  # what a user sees
    assert refused.returncode == 1, refused.stderr
    assert "ERROR val_fraction changed: None -> " in refused.stderr, refused.stderr
    assert "--update-lock" in refused.stderr and "Traceback" not in refused.stderr
    assert forge.read(f"{DOC}/dlm.lock") == lock_before

    train(forge, "--update-lock")
    manifest, lock = forge.manifest(), forge.lock()
    assert manifest["training_config"]["val_fraction"] == fraction
    assert lock["val_fraction"] == fraction
    assert manifest["tokens"]["rows"] == 4  # the whole document: prose, 2 pairs, 1 source
    split_root = manifest["adapter"]["tensor_root"]

    # the adapter changed: its eval record is made again (`eval.binding` refuses a stale one)
    evaluated = forge._call_main(["eval", DOC, "--tiny-dir", "bases/tiny"])
    assert evaluated.code == 0, evaluated.stderr
    run(["dvc", "commit", "-f", "-q", TRAIN_STAGE], forge.root)
    git(forge.root, "add", "-A")
    git(forge.root, "commit", "-q", "--no-verify", "-m", "held-out split")
    assert_verified(forge.verify("HEAD"))
    replay = forge.verify_here("HEAD", "--level", "replay")
    assert replay.code == 0 and replay.verdict == "BITWISE", replay.explain()

    # the same training without the split, on the document without the held-out pair
    text = forge.read(DLM).decode()
    assert EXTRA_QA in text
    forge.write(DLM, text.replace(EXTRA_QA, "").encode())
    set_params(forge, {"seed": seed})
    train(forge, "--update-lock")
    assert "val_fraction" not in forge.lock()
    assert "val_fraction" not in forge.manifest()["training_config"]
    assert forge.manifest()["adapter"]["tensor_root"] == split_root
    # ... and trained on the held-out pair, the adapter is another
    forge.write(DLM, text.encode())
    train(forge)
    assert forge.manifest()["adapter"]["tensor_root"] != split_root


@pytest.mark.parametrize(
    ("value", "problem"),
    [("1.5", "less than 1"), ("0", "greater than 0"), ("true", "not the boolean")],
)
def test_a_bad_fraction_is_one_line(forge: Any, value: str, problem: str) -> None:
    text = (
        forge.read(DLM).decode().replace("  seed: 42\n", f"  seed: 42\n  val_fraction: {value}\n")
    )
    forge.write(DLM, text.encode())
    lock_before = forge.read(f"{DOC}/dlm.lock")
    proc = run(["dlm-git", *TRAIN, "-q"], forge.root, check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert f"{DLM}:" in lines[0] and "training.val_fraction" in lines[0], lines
    assert problem in lines[0], lines
    assert forge.read(f"{DOC}/dlm.lock") == lock_before


def test_params_yaml_turning_the_split_off_is_what_was_trained(forge: Any) -> None:
    """`val_fraction: null` is the split off, which the manifest records as nothing."""
    set_params(forge, {"val_fraction": None})
    forge.commit("the split off, explicitly")
    check = forge.verify("HEAD").check("params.training")
    assert check["ok"], json.dumps(check)
