"""What a training shows while it runs: a plan line, then one progress line, on stderr.

Invariants:
- Shown only when stderr is a terminal (`dvc repro` hands its terminal to the stage's
  command), and never with `--no-progress`: a log, a pipe and a test's captured output
  get nothing from here. That is decided once, by the process the user started
  (`shows`), and passed down to whatever trains for it.
- A training in a child interpreter (`dlm_git.train.run`) shows exactly what it would
  show in the user's process: in the child, the plan, the progress and every line for
  the user (`notice`: the `.gitignore` line, a lock WARN) go to the parent as reports
  (`dlm_git.childproc.report`: `Outline`, `Progress`, `Notice`), and the parent draws
  them on its own stderr (`Relayed`). Under `--nproc N` only rank 0 tells its launcher
  how far it is (`dlm_git.train.launch`), which draws it the same way.
- The progress line (step, loss, tokens/s, ETA) is rewritten in place (`\\r`, erase to the
  end of the line) at most `MAX_RATE` times a second, and always at the last step, which
  ends it with a newline. Tokens/s, the ETA and the time it took are on the loop's own
  seconds (`LoopResult.seconds`, which the loop hands the progress function), the run
  record's `train_seconds` (with `--nproc`, rank 0's: `rank0.loop_seconds`): the last
  line's rate is the record's, and a line drawn by a parent or a launcher is on the
  trainer's clock, never late by how long the update took to reach it.
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
from typing import TYPE_CHECKING, TextIO

from dlm_git.childproc import Listener, ProtocolError, report, reporting
from dlm_git.output import error_line, printable

if TYPE_CHECKING:
    from dlm_git.train.loop import LoopConfig

MAX_RATE = 4.0
"""Progress lines per second, at most."""
MAX_SECONDS = 1e9
"""The most seconds an update may say a loop has run (~31 years): what a display can
divide and print."""
MAX_COUNT = 2**63
"""Steps and tokens of an update are below this (a 64-bit count)."""


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


def outline_for(doc: str, cfg: LoopConfig, n_sequences: int, tokens_per_epoch: int) -> Outline:
    """The plan of a loop run by `cfg` over `n_sequences` (`tokens_per_epoch` tokens)."""
    from dlm_git.train.loop import micro_batches_per_epoch, total_steps

    batches = micro_batches_per_epoch(n_sequences, cfg.micro_batch_size)
    per_epoch = math.ceil(batches / cfg.group_size)
    return outline_of(doc, total_steps(n_sequences, cfg), per_epoch, tokens_per_epoch)


def clock(seconds: float) -> str:
    """`m:ss` (or `h:mm:ss`) of a duration (`?:??` for one that is not finite)."""
    if not math.isfinite(seconds):
        return "?:??"
    whole = max(0, math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass(frozen=True)
class Progress:
    """One progress update on the wire: the loss as exact float hex (it may be nan), and
    the loop's seconds so far (`LoopResult.seconds`, the trainer's clock)."""

    step: int
    total: int
    loss_hex: str
    tokens: int
    seconds: float

    def loss(self) -> float:
        return float.fromhex(self.loss_hex)


@dataclass(frozen=True)
class Notice:
    """A line for the user's stderr, said by a training that runs in a child."""

    line: str


class Throttle:
    """Due at most `MAX_RATE` times a second, and always at the last step."""

    def __init__(self) -> None:
        self.shown = -math.inf

    def due(self, step: int, total: int) -> bool:
        now = time.perf_counter()
        if step < total and now - self.shown < 1.0 / MAX_RATE:
            return False
        self.shown = now
        return True


class Display:
    """The plan line and the rewritten progress line on `stream` (a terminal)."""

    def __init__(self, stream: TextIO, plan: Outline) -> None:
        self.stream, self.plan = stream, plan
        self.throttle = Throttle()
        self.stream.write(plan.line() + "\n")
        self.stream.flush()

    def update(self, step: int, total: int, loss: float, tokens: int, seconds: float) -> None:
        """The loop's progress callback (`dlm_git.train.loop.ProgressFn`)."""
        if self.throttle.due(step, total):
            self.draw(step, total, loss, tokens, seconds)

    def forward(self, got: Progress) -> None:
        """An update from the process that trains, drawn on its seconds (unthrottled:
        it was throttled where it was made)."""
        self.draw(got.step, got.total, checked_loss(got), got.tokens, got.seconds)

    def draw(self, step: int, total: int, loss: float, tokens: int, seconds: float) -> None:
        """The progress line for `step`, `seconds` into the loop."""
        last = step >= total
        elapsed = max(seconds, 1e-9)
        rate = tokens / elapsed
        tail = (
            f"{clock(elapsed)} elapsed" if last else f"ETA {clock(elapsed / step * (total - step))}"
        )
        line = f"  step {step}/{total}  loss {loss:.4f}  {rate:,.0f} tok/s  {tail}"
        self.stream.write("\r\x1b[K" + line + ("\n" if last else ""))
        self.stream.flush()


class Relay:
    """A display in a child: `plan` and throttled updates sent to the parent."""

    def __init__(self, plan: Outline) -> None:
        self.throttle = Throttle()
        report(plan)

    def update(self, step: int, total: int, loss: float, tokens: int, seconds: float) -> None:
        if self.throttle.due(step, total):
            report(Progress(step, total, loss.hex(), tokens, seconds))

    def forward(self, got: Progress) -> None:
        """An update from the process that trains (a rank), passed on as it came."""
        report(got)


def shows(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether this process's user sees progress: not `quiet`, and `stream` (stderr) a
    terminal."""
    return not quiet and _is_terminal(sys.stderr if stream is None else stream)


def display(plan: Outline, quiet: bool, stream: TextIO | None = None) -> Display | Relay | None:
    """A display of `plan` on `stream` (stderr), or None: `quiet`, or not a terminal. In
    a child whose parent listens, not `quiet` means the parent draws it: a `Relay`."""
    if reporting():
        return None if quiet else Relay(plan)
    out = sys.stderr if stream is None else stream
    return Display(out, plan) if shows(quiet, out) else None


def notice(line: str) -> None:
    """One line for the user on stderr (the parent's, from a child that reports)."""
    if not report(Notice(line)):
        error_line(line)


class Relayed:
    """The parent's side of a training child's reports: notices on stderr, and the plan
    and progress drawn there when `shown` (this process's `shows`)."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self.display: Display | None = None

    def listener(self) -> Listener:
        return Listener(Outline | Progress | Notice, self.handle)

    def handle(self, got: Outline | Progress | Notice) -> None:
        if isinstance(got, Notice):
            error_line(got.line)
        elif isinstance(got, Outline):
            self.display = Display(sys.stderr, got) if self.shown else None
        elif self.display is not None:
            self.display.forward(got)


def checked_loss(got: Progress) -> float:
    """The loss of an update read back, checked (`ProtocolError`: not one a loop gives)."""
    try:
        loss = got.loss()
    except ValueError:
        loss = None
    counts_ok = 1 <= got.step <= got.total < MAX_COUNT and 0 <= got.tokens < MAX_COUNT
    if loss is None or not counts_ok or not 0 <= got.seconds <= MAX_SECONDS:
        raise ProtocolError(
            "a training's progress report",
            f"is not a progress update (step {got.step}/{got.total},"
            f" loss {got.loss_hex[:40]!r}, {got.tokens} tokens, {got.seconds!r} s)",
        )
    return loss


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
