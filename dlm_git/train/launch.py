"""Launch N data-parallel ranks through torch.distributed's elastic launcher (torchrun's).

Invariants:
- The launcher hands the ranks everything in a private job directory (the job as JSON, the
  token stream as plain arrays) and gets back rank 0's `result.json`; the adapter rank 0
  saves lands in the staging directory the caller named. Nothing is installed here: the
  caller installs only after every rank has exited 0.
- One node, `max_restarts` 0 (a restarted rank would train from scratch and another run's
  bits would be half-mixed in), a c10d rendezvous on 127.0.0.1 with a free port.
- A failure is one `RankFailedError` line naming the rank that failed first (a rank that
  only lost its peer, or was stopped by the launcher, is not the cause), with how it ended
  (its exit code or signal) and its own last line. The elastic agent stops the other ranks
  (SIGTERM, then SIGKILL) before this returns; ranks die with the launcher.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json
from dlm_git.token_stream import TokenStream
from dlm_git.train.rank import JOB, PEER_LOST, RESULT, TOKENS


class RankFailedError(DlmGitError):
    """A rank failed or was killed; nothing was installed."""


def run_ranks(job: dict[str, Any], tokens: TokenStream, nproc: int) -> dict[str, Any]:
    """Run `nproc` ranks on `job` (see `dlm_git.train.rank`); rank 0's result record."""
    with tempfile.TemporaryDirectory(prefix="dlm-git-ranks-") as tmp:
        job_dir = Path(tmp)
        atomic_write_bytes(job_dir / JOB, canonical_json(job))
        _save_tokens(job_dir / TOKENS, tokens)
        _launch(job_dir, nproc)
        try:
            record: dict[str, Any] = json.loads((job_dir / RESULT).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise RankFailedError("train", f"rank 0 left no readable result: {exc}") from None
        return record


def _save_tokens(path: Path, tokens: TokenStream) -> None:
    import numpy as np

    with path.open("wb") as fh:
        np.savez(
            fh,
            row_ids=np.array(tokens.row_ids, dtype=str),
            counts=np.array(tokens.counts, dtype=np.int64),
            lengths=tokens.lengths,
            masked=tokens.masked,
            ids=tokens.ids,
        )


def _launch(job_dir: Path, nproc: int) -> None:
    from torch.distributed.elastic.multiprocessing.api import (
        DefaultLogsSpecs,
        SignalException,
        Std,
    )
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=uuid.uuid4().hex,
        rdzv_backend="c10d",
        rdzv_endpoint="127.0.0.1:0",
        local_addr="127.0.0.1",
        max_restarts=0,
        monitor_interval=0.1,
        logs_specs=DefaultLogsSpecs(log_dir=str(job_dir / "logs"), redirects=Std.ALL),
    )
    try:
        with _agent_silenced():
            elastic_launch(config, sys.executable)("-m", "dlm_git.train.rank", str(job_dir))
    except ChildFailedError as exc:
        raise _failure(exc.failures, job_dir, nproc) from None
    except SignalException as exc:  # the launcher itself was told to stop
        stopped = RankFailedError(
            "train",
            f"{ended(-int(exc.sigval)).removeprefix('was ')}; the {nproc} ranks were stopped",
            "nothing was installed; the previous outputs are as they were",
        )
        stopped.exit_code = 128 + int(exc.sigval)
        raise stopped from None


@contextlib.contextmanager
def _agent_silenced() -> Iterator[None]:
    """The elastic agent logs every start and stop; the caller reports what matters."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def _failure(failures: dict[int, Any], job_dir: Path, nproc: int) -> RankFailedError:
    rank, failure = root_cause(failures)
    how = ended(failure.exitcode)
    last = _last_line(job_dir, int(getattr(failure, "local_rank", rank)))
    text = f"rank {rank} of {nproc} {how}" + (f": {last}" if last else "")
    return RankFailedError(
        "train", text, "nothing was installed; the previous outputs are as they were"
    )


def root_cause(failures: dict[int, Any]) -> tuple[int, Any]:
    """The rank that failed first on its own: not one that lost a peer or was stopped."""

    def consequence(f: Any) -> bool:
        return bool(f.exitcode == PEER_LOST or f.exitcode == -15)

    ranked = sorted(failures.items(), key=lambda kv: (consequence(kv[1]), kv[1].timestamp, kv[0]))
    return ranked[0]


def ended(exitcode: int) -> str:
    if exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}"
    return f"exited {exitcode}"


def _last_line(job_dir: Path, local_rank: int) -> str:
    for log in sorted((job_dir / "logs").glob(f"*/attempt_*/{local_rank}/stderr.log")):
        with contextlib.suppress(OSError):
            lines = [ln for ln in log.read_text("utf-8", "replace").splitlines() if ln.strip()]
            if lines:
                return lines[-1].removeprefix("dlm-git: ")[:300]
    return ""
