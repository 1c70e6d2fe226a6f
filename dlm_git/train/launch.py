"""Train on N data-parallel ranks, launched through torch.distributed's elastic launcher
(torchrun's engine), and install what rank 0 saved.

Invariants:
- `fit_ranks` is `train`'s data-parallel fit: the lock decision and the tokens are made
  before it (in the launcher), the records after it, exactly as for one process.
- The launcher hands the ranks everything in a private job directory (the job, a
  `RankJob`, and the token stream as plain arrays) and gets back rank 0's `RankResult`,
  both through `dlm_git.childproc` (`dlm_git.train.protocol` names them); the adapter rank 0
  saves lands in a staging directory beside `adapter/`, which `fit_ranks` installs only
  after every rank has exited 0 (and removes on any failure).
- The plan line and rank 0's progress are drawn here, as one process draws its own
  (`dlm_git.train.progress.display`: this process's terminal, or its parent's when it
  is a training child): rank 0 leaves its latest step in the job directory, read
  `MAX_RATE` times a second; the other ranks report nothing.
- One node, `max_restarts` 0 (a restarted rank would train from scratch and another run's
  bits would be half-mixed in), a c10d rendezvous on 127.0.0.1 with a free port.
- The effective config is derived as one process derives it (`assemble.run_config`),
  with the world size.
- A failure is one `RankFailedError` line naming the rank that failed first (a rank that
  only lost its peer, or was stopped by the launcher, is not the cause), with how it ended
  (its exit code or signal) and its own last line. The elastic agent stops the other ranks
  (SIGTERM, then SIGKILL) before this returns; ranks die with the launcher.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git.childproc import ProtocolError, ended, read_document, write_document
from dlm_git.errors import DlmGitError
from dlm_git.manifest.records import adapter_record
from dlm_git.token_stream import TokenStream
from dlm_git.topology import BUCKET_ELEMENTS, backend_for, check_nproc
from dlm_git.train.adapter import install_dir, staging_dir, sweep_stale
from dlm_git.train.assemble import resolve_precision, run_config
from dlm_git.train.card import CardFacts, hub_base, write_card
from dlm_git.train.options import TrainError, TrainOptions
from dlm_git.train.progress import (
    MAX_RATE,
    Display,
    Progress,
    Relay,
    checked_loss,
    display,
    outline_for,
)
from dlm_git.train.protocol import (
    JOB,
    PEER_LOST,
    PROGRESS,
    RESULT,
    TOKENS,
    RankJob,
    RankResult,
)
from dlm_git.train.records import Fitted

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from dlm_git.base.resolve import ResolvedBase
    from dlm_git.doc.load import LoadedDocument
    from dlm_git.numerics.prepare import Environment
    from dlm_git.train.loop import LoopResult
    from dlm_git.train.pipeline import TokenizeResult


class RankFailedError(DlmGitError):
    """A rank failed or was killed; nothing was installed."""


def fit_ranks(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    env: Environment,
    tok: TokenizeResult,
    options: TrainOptions,
    card: CardFacts,
) -> Fitted:
    """Train on `options.nproc` data-parallel ranks (`dlm_git.train.launch`), then install
    the adapter rank 0 saved, with its card, only once every rank has exited 0."""
    _check_ranks(loaded, env.device, options)
    layout, training = loaded.layout, loaded.doc.frontmatter.training
    precision = resolve_precision(training.precision, env.device)
    staging = staging_dir(layout.adapter)
    started = time.perf_counter()
    try:
        job = _rank_job(loaded, resolved, env, tok, options, precision, staging)
        out = run_ranks(job, tok.sequences, options.nproc, _display(loaded, tok, job, options))
        if out.flags != env.flags:
            raise TrainError("train", "rank 0 ran under other kernel facts than its launcher")
        result = _rank_result(out)
        config = run_config(loaded, tok, env.device, precision, out.targets, options.nproc).config
        write_card(staging, card, config)
        record = adapter_record(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = time.perf_counter() - started
    install_dir(staging, layout.adapter)
    install_dir(staging_dir(layout.segments), layout.segments)  # no snapshots with ranks
    facts = {"nproc": options.nproc, "rank0": out.rank0}
    return Fitted(config, result, record, None, seconds, facts)


def _display(
    loaded: LoadedDocument, tok: TokenizeResult, job: RankJob, options: TrainOptions
) -> Display | Relay | None:
    """The plan line now, and what draws rank 0's progress (None: not shown here)."""
    from dlm_git.train.assemble import loop_config

    cfg = loop_config(job.training, job.device, job.precision, job.pad_id, job.world_size)
    plan = outline_for(str(loaded.doc.path), cfg, len(tok.sequences), tok.tokens)
    return display(plan, options.quiet)


def _check_ranks(loaded: LoadedDocument, device: str, options: TrainOptions) -> None:
    check_nproc(options.nproc)
    every = options.segment_every
    if every is None:
        every = loaded.doc.frontmatter.training.segment_every
    if every:
        raise TrainError(
            "--nproc",
            f"segment snapshots are taken by one process; this run has {options.nproc}",
            "set --segment-every 0 (or training.segment_every: 0), or train with --nproc 1",
        )
    if device == "mps":
        raise TrainError("--nproc", "data-parallel training runs on cpu or cuda, not mps")
    if device.startswith("cuda:"):
        raise TrainError(
            "--nproc",
            f"ranks take one GPU each (cuda:0 to cuda:{options.nproc - 1}); {device} names one",
            "use --device cuda, and CUDA_VISIBLE_DEVICES to choose the GPUs",
        )
    if device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < options.nproc:
            raise TrainError(
                "--nproc",
                f"{options.nproc} ranks need {options.nproc} GPUs;"
                f" {torch.cuda.device_count()} visible",
                "use --nproc <= the GPU count, or --device cpu",
            )


def _rank_job(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    env: Environment,
    tok: TokenizeResult,
    options: TrainOptions,
    precision: str,
    staging: Path,
) -> RankJob:
    """What every rank is told (`dlm_git.train.rank`): the same plan, base and config."""
    from dlm_git.numerics.plan import check_threads

    hub = hub_base(resolved)
    fm = loaded.doc.frontmatter
    return RankJob(
        launcher_pid=os.getpid(),
        device=env.device,
        numerics=env.profile.name,
        replay_flags=options.replay_flags,
        threads=check_threads(options.threads),
        training=fm.training,
        base_path=resolved.path.resolve(),
        base_repo_id=hub.repo_id,
        base_revision=hub.revision,
        precision=precision,
        pad_id=tok.pad_id,
        world_size=options.nproc,
        backend=backend_for(env.device),
        bucket_elements=BUCKET_ELEMENTS,
        staging=staging.resolve(),
    )


def _rank_result(out: RankResult) -> LoopResult:
    from dlm_git.train.loop import LoopResult

    try:
        losses = [float.fromhex(h) for h in out.losses_hex]
    except ValueError:
        raise RankFailedError("train", "rank 0's result records a loss that is no float") from None
    return LoopResult(
        losses=losses,
        steps=out.steps,
        tokens=out.tokens,
        loss_tokens=out.loss_tokens,
        sequences_seen=out.sequences_seen,
    )


def run_ranks(
    job: RankJob, tokens: TokenStream, nproc: int, shown: Display | Relay | None = None
) -> RankResult:
    """Run `nproc` ranks on `job` (see `dlm_git.train.rank`); rank 0's result record.
    `shown` draws (or relays) rank 0's steps as they come (`_watching`)."""
    # a SIGKILLed launcher leaves its job directory (the document's tokens) behind: the
    # next launch sweeps those of dead launchers, as a train sweeps dead trains' staging
    temp = Path(tempfile.gettempdir())
    sweep_stale(temp, (JOB_NAME,))
    with tempfile.TemporaryDirectory(prefix=f".{JOB_NAME}.new.{os.getpid()}.", dir=temp) as tmp:
        job_dir = Path(tmp)
        try:
            write_document(job_dir / JOB, job)
        except ValueError as exc:  # a value JSON cannot carry: nothing is launched
            raise RankFailedError("train", f"the ranks' job cannot be written: {exc}") from None
        _save_tokens(job_dir / TOKENS, tokens)
        with _watching(job_dir / PROGRESS, shown):
            _launch(job_dir, nproc)
        try:
            return read_document(job_dir / RESULT, RankResult, "rank 0's result")
        except ProtocolError as exc:
            raise RankFailedError("train", f"rank 0 left no readable result: {exc}") from None


JOB_NAME = "dlm-git-ranks"


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
        with _agent_scope():
            elastic_launch(config, sys.executable)("-P", "-m", "dlm_git.train.rank", str(job_dir))
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
    except Exception as exc:  # rendezvous, a port, the agent: not a rank's failure
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise RankFailedError(
            "train",
            f"the {nproc} ranks could not be launched: {type(exc).__name__}: {first}",
            "nothing was installed; the previous outputs are as they were",
        ) from None


@contextlib.contextmanager
def _watching(path: Path, shown: Display | Relay | None) -> Iterator[None]:
    """While the ranks run, rank 0's latest step (`path`) drawn by `shown`, read
    `MAX_RATE` times a second; once they have all exited 0, its last step."""
    if shown is None:
        yield
        return
    watcher = _Watcher(path, shown)
    try:
        yield
    finally:
        watcher.stop()
    watcher.poll()


class _Watcher(threading.Thread):
    def __init__(self, path: Path, shown: Display | Relay) -> None:
        super().__init__(daemon=True)
        self.path, self.shown, self.step = path, shown, 0
        self.stopped = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopped.wait(1.0 / MAX_RATE):
            self.poll()

    def stop(self) -> None:
        self.stopped.set()
        self.join()

    def poll(self) -> None:
        """Draw rank 0's step if it is a new one (none yet, or unreadable: nothing)."""
        try:
            got = read_document(self.path, Progress, "rank 0's progress")
            checked_loss(got)
        except ProtocolError:
            return
        if got.step > self.step:
            self.step = got.step
            self.shown.forward(got)


AGENT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


@contextlib.contextmanager
def _agent_scope() -> Iterator[None]:
    """While the elastic agent runs: its logging off (it logs every start and stop; the
    caller reports what matters), and afterwards the signal handlers it installs for the
    launch replaced by the ones this process had (Ctrl-C is KeyboardInterrupt again)."""
    import signal

    kinds = [getattr(signal, name) for name in AGENT_SIGNALS if hasattr(signal, name)]
    saved = {kind: signal.getsignal(kind) for kind in kinds}
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        for kind, handler in saved.items():
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(kind, handler)


def _failure(failures: dict[int, ProcessFailure], job_dir: Path, nproc: int) -> RankFailedError:
    rank, failure = root_cause(failures)
    how = ended(failure.exitcode)
    last = _last_line(job_dir, int(getattr(failure, "local_rank", rank)))
    text = f"rank {rank} of {nproc} {how}" + (f": {last}" if last else "")
    return RankFailedError(
        "train", text, "nothing was installed; the previous outputs are as they were"
    )


def root_cause(failures: dict[int, ProcessFailure]) -> tuple[int, ProcessFailure]:
    """The rank that failed first on its own: not one that lost a peer or was stopped."""

    def consequence(f: ProcessFailure) -> bool:
        return bool(f.exitcode == PEER_LOST or f.exitcode == -15)

    ranked = sorted(failures.items(), key=lambda kv: (consequence(kv[1]), kv[1].timestamp, kv[0]))
    return ranked[0]


def _last_line(job_dir: Path, local_rank: int) -> str:
    for log in sorted((job_dir / "logs").glob(f"*/attempt_*/{local_rank}/stderr.log")):
        with contextlib.suppress(OSError):
            lines = [ln for ln in log.read_text("utf-8", "replace").splitlines() if ln.strip()]
            if lines:
                return lines[-1].removeprefix("dlm-git: ")[:300]
    return ""
