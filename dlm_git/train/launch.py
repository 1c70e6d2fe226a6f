"""Train on N data-parallel ranks, launched through torch.distributed's elastic launcher
(torchrun's engine), and install what rank 0 saved.

Invariants:
- `fit_ranks` is `train`'s data-parallel fit: the lock decision and the tokens are made
  before it (in the launcher), the records after it, exactly as for one process.
- The launcher hands the ranks everything in a private job directory (the job as JSON, the
  token stream as plain arrays) and gets back rank 0's `result.json`; the adapter rank 0
  saves lands in a staging directory beside `adapter/`, which `fit_ranks` installs only
  after every rank has exited 0 (and removes on any failure).
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
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json
from dlm_git.manifest.records import adapter_record
from dlm_git.token_stream import TokenStream
from dlm_git.topology import BUCKET_ELEMENTS, backend_for, check_nproc
from dlm_git.train.adapter import install_dir, staging_dir, sweep_stale
from dlm_git.train.rank import JOB, PEER_LOST, RESULT, TOKENS
from dlm_git.train.run import (
    Fitted,
    TrainError,
    TrainOptions,
    effective_config,
    loop_config,
    resolve_precision,
)

if TYPE_CHECKING:
    from dlm_git.base.resolve import ResolvedBase
    from dlm_git.doc.load import LoadedDocument


class RankFailedError(DlmGitError):
    """A rank failed or was killed; nothing was installed."""


def fit_ranks(
    loaded: LoadedDocument, resolved: ResolvedBase, env: Any, tok: Any, options: TrainOptions
) -> Fitted:
    """Train on `options.nproc` data-parallel ranks (`dlm_git.train.launch`), then install
    the adapter rank 0 saved, only once every rank has exited 0."""
    _check_ranks(loaded, env.device, options)
    layout, training = loaded.layout, loaded.doc.frontmatter.training
    precision = resolve_precision(training.precision, env.device)
    staging = staging_dir(layout.adapter)
    started = time.perf_counter()
    try:
        job = _rank_job(loaded, resolved, env, tok, options, precision, staging)
        out = run_ranks(job, tok.sequences, options.nproc)
        if out.get("flags") != env.flags:
            raise TrainError("train", "rank 0 ran under other kernel facts than its launcher")
        record = adapter_record(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = time.perf_counter() - started
    install_dir(staging, layout.adapter)
    install_dir(staging_dir(layout.segments), layout.segments)  # no snapshots with ranks
    result = _rank_result(out)
    config = _rank_config(loaded, tok, precision, options.nproc, list(out["targets"]))
    facts = {"nproc": options.nproc, "rank0": out.get("rank0", {})}
    return Fitted(config, result, record, None, seconds, facts)


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
    env: Any,
    tok: Any,
    options: TrainOptions,
    precision: str,
    staging: Path,
) -> dict[str, Any]:
    """What every rank is told (`dlm_git.train.rank`): the same plan, base and config."""
    import os

    from dlm_git.determinism import check_threads

    fm = loaded.doc.frontmatter
    return {
        "launcher_pid": os.getpid(),
        "device": env.device,
        "numerics": env.profile.name,
        "replay_flags": options.replay_flags,
        "threads": check_threads(options.threads),
        "training": fm.training.model_dump(mode="json"),
        "base_path": str(resolved.path.resolve()),
        "base_spec": fm.base_model,
        "precision": precision,
        "pad_id": tok.pad_id,
        "world_size": options.nproc,
        "backend": backend_for(env.device),
        "bucket_elements": BUCKET_ELEMENTS,
        "staging": str(staging.resolve()),
    }


def _rank_result(out: dict[str, Any]) -> Any:
    from dlm_git.train.loop import LoopResult

    return LoopResult(
        losses=[float.fromhex(h) for h in out["losses_hex"]],
        steps=int(out["steps"]),
        tokens=int(out["tokens"]),
        loss_tokens=int(out["loss_tokens"]),
        sequences_seen=int(out["sequences_seen"]),
    )


def _rank_config(
    loaded: LoadedDocument, tok: Any, precision: str, nproc: int, targets: list[str]
) -> dict[str, Any]:
    """The effective config of a data-parallel run: the world size is part of what was
    trained (each step reads `grad_accum x world_size` micro-batches)."""
    from dlm_git.train.loop import total_steps, warmup_steps

    fm = loaded.doc.frontmatter
    training = fm.training
    cfg = loop_config(training, "cpu", precision, tok.pad_id, nproc)
    steps = total_steps(len(tok.sequences), cfg)
    warmup = warmup_steps(steps, training.warmup_ratio)
    config = effective_config(
        training, fm.system_prompt, targets, steps, warmup, precision, tok.template_kind
    )
    config["world_size"] = nproc
    return config


def run_ranks(job: dict[str, Any], tokens: TokenStream, nproc: int) -> dict[str, Any]:
    """Run `nproc` ranks on `job` (see `dlm_git.train.rank`); rank 0's result record."""
    # a SIGKILLed launcher leaves its job directory (the document's tokens) behind: the
    # next launch sweeps those of dead launchers, as a train sweeps dead trains' staging
    temp = Path(tempfile.gettempdir())
    sweep_stale(temp, (JOB_NAME,))
    with tempfile.TemporaryDirectory(prefix=f".{JOB_NAME}.new.{os.getpid()}.", dir=temp) as tmp:
        job_dir = Path(tmp)
        try:
            atomic_write_bytes(job_dir / JOB, canonical_json(job))
        except ValueError as exc:  # a value JSON cannot carry: nothing is launched
            raise RankFailedError("train", f"the ranks' job cannot be written: {exc}") from None
        _save_tokens(job_dir / TOKENS, tokens)
        _launch(job_dir, nproc)
        try:
            record: dict[str, Any] = json.loads((job_dir / RESULT).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise RankFailedError("train", f"rank 0 left no readable result: {exc}") from None
        return record


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
    except Exception as exc:  # rendezvous, a port, the agent: not a rank's failure
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise RankFailedError(
            "train",
            f"the {nproc} ranks could not be launched: {type(exc).__name__}: {first}",
            "nothing was installed; the previous outputs are as they were",
        ) from None


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
