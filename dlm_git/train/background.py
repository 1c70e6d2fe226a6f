"""Ordered work off the training thread: one writer thread and a bounded queue.

Invariants:
- Jobs run one at a time, in the order they were submitted (a segment boundary's digest
  chains to the one before it).
- At most `pending` jobs wait in the queue: `submit` blocks while it is full, so memory
  held by waiting jobs (a snapshot's tensors, copied at its step) stays bounded.
- The first job that raises stops the work: later jobs are dropped, and the error is the
  caller's, raised as it was by the next `submit` or by `wait` (never lost, never
  printed by the thread).
- `wait` returns once every job submitted has finished, so what they wrote is on disk
  before anything that names it is written; `cancel` drops what is still queued and
  joins the thread. The thread is a daemon: a caller that never waits cannot hang the
  interpreter's exit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Job = Callable[[], None]


class BackgroundWriter:
    """Runs submitted jobs in order on one thread, started by the first `submit`."""

    def __init__(self, name: str, pending: int = 1) -> None:
        self._name = name
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=pending)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._cancelled = False

    def submit(self, job: Job) -> None:
        """Queue `job` (blocking while the queue is full); the error of an earlier job,
        if one failed, is raised here instead."""
        self._raise_error()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put(job)

    def wait(self) -> None:
        """Return once every submitted job has finished; raise the first job's error."""
        self._stop()
        self._raise_error()

    def cancel(self) -> None:
        """Drop the jobs still queued, let the running one end, and join the thread."""
        self._cancelled = True
        self._stop()

    def _stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            if self._error is not None or self._cancelled:
                continue  # drain: a blocked `submit` must not wait forever
            try:
                job()
            except BaseException as exc:  # the caller's error, raised on its thread
                self._error = exc
