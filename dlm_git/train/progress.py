"""What a training shows while it runs: a plan line, then one progress line, on stderr.

Invariants:
- Shown only when stderr is a terminal (`dvc repro` hands its terminal to the stage's
  command), and never with `--no-progress`: a log, a pipe and a test's captured output
  get nothing from here.
- The progress line (step, loss, tokens/s, ETA) is rewritten in place (`\\r`, erase to the
  end of the line) at most `MAX_RATE` times a second, and always at the last step, which
  ends it with a newline. Tokens/s and the ETA are on `time.perf_counter`, the clock the
  run record's `train_seconds` and `wall_seconds` are measured on.
- Nothing here reads a random number or touches a record: the loop calls the progress
  function under `kept_rngs`, so a run on a terminal writes the piped run's records.
- Text that came from outside (the document's path) goes out through `dlm_git.output.printable`;
  the only control characters written are this module's own (`\\r`, erase line).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from dlm_git.output import printable

MAX_RATE = 4.0
"""Progress lines per second, at most."""


@dataclass(frozen=True)
class Outline:
    """What a run is about to do: the document, its optimizer steps, epochs and tokens."""

    doc: str
    steps: int
    epochs: float
    tokens: int

    def line(self) -> str:
        return (
            f"train {printable(self.doc)}: {self.steps} steps ({self.epochs:.3g} epochs),"
            f" ~{self.tokens:,} tokens; estimate after step 1"
        )


def outline_of(doc: str, steps: int, steps_per_epoch: int, tokens_per_epoch: int) -> Outline:
    """The plan of `steps` optimizer steps over an epoch of `steps_per_epoch` steps and
    `tokens_per_epoch` tokens (a `--max-steps` run may stop inside an epoch)."""
    epochs = steps / max(1, steps_per_epoch)
    return Outline(doc, steps, epochs, round(tokens_per_epoch * epochs))


def clock(seconds: float) -> str:
    """`m:ss` (or `h:mm:ss`) of a duration."""
    whole = max(0, math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Display:
    """The plan line and the rewritten progress line on `stream` (a terminal)."""

    def __init__(self, stream: TextIO, plan: Outline) -> None:
        self.stream, self.plan = stream, plan
        self.started = time.perf_counter()
        self.shown = -math.inf
        self.stream.write(plan.line() + "\n")
        self.stream.flush()

    def update(self, step: int, total: int, loss: float, tokens: int) -> None:
        """The loop's progress callback (`dlm_git.train.loop.ProgressFn`)."""
        now = time.perf_counter()
        last = step >= total
        if not last and now - self.shown < 1.0 / MAX_RATE:
            return
        self.shown = now
        elapsed = max(now - self.started, 1e-9)
        rate = tokens / elapsed
        tail = (
            f"{clock(elapsed)} elapsed" if last else f"ETA {clock(elapsed / step * (total - step))}"
        )
        line = f"  step {step}/{total}  loss {loss:.4f}  {rate:,.0f} tok/s  {tail}"
        self.stream.write("\r\x1b[K" + line + ("\n" if last else ""))
        self.stream.flush()


def display(plan: Outline, quiet: bool, stream: TextIO | None = None) -> Display | None:
    """A display of `plan` on `stream` (stderr), or None: `quiet`, or not a terminal."""
    out = sys.stderr if stream is None else stream
    if quiet or not _is_terminal(out):
        return None
    return Display(out, plan)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
