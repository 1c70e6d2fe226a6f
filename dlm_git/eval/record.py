"""The evaluation record `<doc>/eval.json` and its numbers `<doc>/eval_metrics.json`.

Invariants:
- `eval.json` is canonical JSON (`hashing.canonical_json`) with `eval_version`
  `EVAL_VERSION`; it names what it evaluated (the adapter weights' sha256, the sha256 of
  the `manifest.json` bytes, the lock's numerics profile and threads), the settings it
  ran under, `val`, `probes` and `tasks`. Its keys and their meaning are `docs/eval.md`.
- Every float is recorded twice: as a JSON number and as `float.hex` text (`*_hex`), so a
  replay compares bits, not printed digits. A loss that is not finite is an error: no
  record holds NaN or infinity.
- `eval_metrics.json` holds numbers only (val loss and perplexity overall and per mode,
  the probes' exact-match rate), nested objects and no lists, so `dvc metrics show/diff`
  and `dvc exp show` compare it.
- Both files are written atomically, after everything was computed, and only when their
  bytes change: a failed evaluation leaves the old record as it was.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json, float_hex

EVAL_VERSION = 1
BATCH_SIZE = 1
"""Sequences per forward pass (val) and per generation (probes): padding changes numerics."""
MAX_NEW_TOKENS = 32
"""The most tokens a probe's answer is given (greedy decoding stops earlier at EOS)."""
MODES = ("prose", "instruction")
"""Val loss is split by row mode: prose (text rows) and instruction (chat rows)."""


class EvalError(DlmGitError):
    """An evaluation cannot be made or recorded; nothing was written."""


class LossSum(NamedTuple):
    """Summed token losses of some rows: the negative log-likelihood, in float64."""

    nll: float
    tokens: int
    rows: int

    def plus(self, other: LossSum) -> LossSum:
        return LossSum(self.nll + other.nll, self.tokens + other.tokens, self.rows + other.rows)


def loss_entry(total: LossSum, where: str) -> dict[str, Any] | None:
    """Mean loss per scored token and its perplexity, with their bits; None for no rows."""
    if total.tokens == 0:
        return None
    loss = total.nll / total.tokens
    if not math.isfinite(loss):
        raise EvalError(where, f"the loss is {loss} (not a finite number)", _NAN_HINT)
    try:
        ppl = math.exp(loss)
    except OverflowError:
        ppl = math.inf
    if not math.isfinite(ppl):
        raise EvalError(where, f"the perplexity of loss {loss} overflows", _NAN_HINT)
    return {
        "loss": loss,
        "loss_hex": float_hex(loss),
        "perplexity": ppl,
        "perplexity_hex": float_hex(ppl),
        "tokens": total.tokens,
        "rows": total.rows,
    }


_NAN_HINT = "retrain the adapter (lower the learning rate); the old eval.json is kept"


def val_section(by_mode: dict[str, LossSum], fraction: float, where: str) -> dict[str, Any]:
    """`val`: overall and per mode (`MODES`), and the `val_fraction` it was split by."""
    empty = LossSum(0.0, 0, 0)
    overall = empty
    for mode in MODES:
        overall = overall.plus(by_mode.get(mode, empty))
    out: dict[str, Any] = {"val_fraction": fraction}
    out["overall"] = loss_entry(overall, f"{where}: val")
    for mode in MODES:
        out[mode] = loss_entry(by_mode.get(mode, empty), f"{where}: val {mode}")
    return out


def metrics_of(record: dict[str, Any]) -> dict[str, Any]:
    """The numbers `dvc metrics` compares, from a record (no lists, no text)."""
    out: dict[str, Any] = {}
    val = record.get("val")
    if isinstance(val, dict):
        part: dict[str, Any] = {}
        for key in ("overall", *MODES):
            entry = val.get(key)
            if isinstance(entry, dict):
                part[key] = {"loss": entry["loss"], "perplexity": entry["perplexity"]}
        out["val"] = part
    probes = record.get("probes") or []
    matched = sum(1 for p in probes if p["exact_match"])
    out["probes"] = {"count": len(probes), "exact_match": matched / len(probes) if probes else 0.0}
    tasks = record.get("tasks") or {}
    if tasks:  # each task's scores, as lm-eval names them (`acc,none`)
        out["tasks"] = {
            name: {key: score["value"] for key, score in task["metrics"].items()}
            for name, task in tasks.items()
        }
    return out


def write_if_changed(path: Path, data: bytes) -> bool:
    """Write `data` atomically unless `path` already holds exactly it; whether it wrote."""
    try:
        if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write_bytes(path, data)
    return True


def record_bytes(record: dict[str, Any]) -> bytes:
    return canonical_json(record)
