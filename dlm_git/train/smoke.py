"""`--max-steps N`: a smoke run's step limit, without editing the document.

Invariants:
- The limit replaces the document's `training.max_steps` before anything is derived from
  it (`with_max_steps`), so the effective config the manifest digests records it
  (`max_steps`, `total_steps`) and the adapter it gives is its own identity.
- The lock says so: `determinism_flags.max_steps` = N (absent without the option), so a
  lock of a smoke run is never mistaken for the document's full run (the drift policy
  reports a change of it) and a replay (`verify --level replay|segments`) trains with the
  same N, read from the commit's lock (`recorded_max_steps`) as the other recorded flags.
- One bound for the option and the record: 1 to `MAX_STEPS` (`dlm_git.numerics.flags`,
  which judges every recorded flag).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dlm_git.doc.load import LoadedDocument
from dlm_git.numerics.flags import MAX_STEPS
from dlm_git.train.options import TrainError

FLAG = "max_steps"
"""The key of `determinism_flags` that records a `--max-steps` run."""


def max_steps_problem(value: object) -> str | None:
    """Why `value` is not a step limit (an int from 1 to `MAX_STEPS`), or None."""
    if type(value) is int and 1 <= value <= MAX_STEPS:
        return None
    return f"{value!r:.60} is not a step count from 1 to {MAX_STEPS}"


def recorded_max_steps(flags: Mapping[str, Any] | None) -> int | None:
    """The step limit recorded flags carry (None: a full run). The lock's reader refuses
    any other value (`dlm_git.numerics.flags`); one here is a `TrainError`, never a run of
    another length."""
    value = (flags or {}).get(FLAG)
    if value is None:
        return None
    problem = max_steps_problem(value)
    if problem is not None:
        raise TrainError("dlm.lock", f"determinism_flags.{FLAG} {problem}")
    return int(value)


def effective_max_steps(asked: int | None, replay_flags: Mapping[str, Any] | None) -> int | None:
    """The limit a run trains under: `--max-steps`, else a replay's recorded one."""
    return asked if asked is not None else recorded_max_steps(replay_flags)


def with_max_steps(loaded: LoadedDocument, steps: int | None) -> LoadedDocument:
    """`loaded` with its `training.max_steps` replaced by `steps` (None: as written)."""
    if steps is None:
        return loaded
    fm = loaded.doc.frontmatter
    training = fm.training.model_copy(update={"max_steps": steps})
    doc = dataclasses.replace(loaded.doc, frontmatter=fm.model_copy(update={"training": training}))
    return dataclasses.replace(loaded, doc=doc)


def smoke_flags(steps: int | None) -> dict[str, int]:
    """What the lock's `determinism_flags` records of the limit (nothing for a full run)."""
    return {} if steps is None else {FLAG: steps}
