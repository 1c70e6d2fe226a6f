"""One data-parallel rank: `python -m dlm_git.train.rank JOB_DIR`, started by the launcher.

Invariants:
- A rank reads only what its launcher wrote into JOB_DIR (`job.json`, a
  `dlm_git.train.protocol.RankJob` read back through `dlm_git.childproc`, and
  `tokens.npz`) and
  the base directory named there; it pins the same numerics plan as the launcher before
  torch initialises, builds the model from the seed like every other rank, and trains its
  stride of each step's micro-batches (`dlm_git.train.distributed`).
- Only rank 0 writes, and only into the launcher's staging directory (the adapter) and
  JOB_DIR (`result.json`, a `RankResult`, and its latest step, `progress.json`, each
  atomically); the launcher installs nothing
  until every rank has exited 0. Before rank 0 writes, the ranks check that they hold
  identical weights.
- A rank dies with its launcher (Linux parent-death signal), so a killed launcher leaves
  no rank behind; a rank that loses a peer exits `PEER_LOST`, so the launcher can name the
  rank that failed first rather than the ones that noticed.
- Errors: a one-line message on stderr (the launcher repeats the failing rank's last line).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git.childproc import read_document, write_document
from dlm_git.errors import DlmGitError
from dlm_git.train.protocol import (
    JOB,
    PEER_LOST,
    PROGRESS,
    RESULT,
    TOKENS,
    RankJob,
    RankResult,
)

if TYPE_CHECKING:
    from peft import PeftModel

    from dlm_git.numerics.prepare import Environment
    from dlm_git.token_stream import TokenStream
    from dlm_git.train.loop import LoopResult, ProgressFn


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m dlm_git.train.rank JOB_DIR\n")
        return 2
    job_dir = Path(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    try:
        job = read_document(job_dir / JOB, RankJob, "the ranks' job")
        _die_with(job.launcher_pid)
        _train_rank(job_dir, job, rank, int(os.environ.get("LOCAL_RANK", "0")))
    except DlmGitError as exc:
        sys.stderr.write(f"dlm-git: {exc.one_line()}\n")
        return exc.exit_code
    except Exception as exc:
        if _is_peer_loss(exc):
            sys.stderr.write(f"dlm-git: lost a peer rank: {_first_line(exc)}\n")
            return PEER_LOST
        raise
    return 0


def _die_with(launcher: int) -> None:
    """Ask Linux to kill this rank when its parent dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != launcher:
        raise DlmGitError("rank", "the launcher is gone")


def _train_rank(job_dir: Path, job: RankJob, rank: int, local_rank: int) -> None:
    from dlm_git.numerics.activate import activate
    from dlm_git.numerics.plan import plan
    from dlm_git.numerics.prepare import prepare

    run_plan = plan(job.device, job.numerics, None, job.replay_flags)
    activate(run_plan.env)  # before torch initialises, as the launcher did
    import torch
    import torch.distributed as dist

    if run_plan.device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=job.backend)
    try:
        env = prepare(job.training.seed, run_plan, job.threads)
        model, targets, result = _fit_rank(job_dir, job, env, rank)
        if rank == 0:
            _write_result(job_dir, job, env, (model, targets, result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _fit_rank(
    job_dir: Path, job: RankJob, env: Environment, rank: int
) -> tuple[PeftModel, list[str], LoopResult]:
    from dlm_git.train.assemble import build_model, loop_config, quiet_libraries
    from dlm_git.train.distributed import Rank, seed_rank, weights_agree
    from dlm_git.train.loop import train_loop

    quiet_libraries()
    training = job.training
    me = Rank(rank, job.world_size, job.bucket_elements)
    model, targets = build_model(job.base_path, training, env.device)
    seed_rank(training.seed, me)
    cfg = loop_config(training, env.device, job.precision, job.pad_id, me.world_size)
    tokens = _tokens(job_dir)
    result = train_loop(model, tokens, cfg, progress=_progress(job_dir, rank), rank=me)
    params = [p for p in model.parameters() if p.requires_grad]
    if not weights_agree(params, env.device):
        raise DlmGitError("train", "the ranks ended with different weights (a dlm-git bug)")
    return model, targets, result


def _tokens(job_dir: Path) -> TokenStream:
    import numpy as np

    from dlm_git.token_stream import TokenStream

    with np.load(job_dir / TOKENS, allow_pickle=False) as arrays:
        return TokenStream(
            [str(r) for r in arrays["row_ids"]],
            [int(c) for c in arrays["counts"]],
            arrays["lengths"],
            arrays["masked"],
            arrays["ids"],
        )


def _progress(job_dir: Path, rank: int) -> ProgressFn:
    """Each step on this rank's log (its stdout, a file in JOB_DIR); rank 0 also leaves
    its latest step for the launcher to draw (`PROGRESS`, at most `MAX_RATE` times a
    second and at the last step: `dlm_git.train.launch`)."""
    from dlm_git.train.progress import Progress, Throttle

    throttle = Throttle()

    def show(step: int, total: int, loss: float, tokens: int, seconds: float) -> None:
        print(f"rank {rank} step {step}/{total} loss {loss:.6f} tokens {tokens}", flush=True)
        if rank == 0 and throttle.due(step, total):
            with contextlib.suppress(OSError):  # progress never stops a training
                write_document(
                    job_dir / PROGRESS, Progress(step, total, loss.hex(), tokens, seconds)
                )

    return show


def _write_result(
    job_dir: Path,
    job: RankJob,
    env: Environment,
    trained: tuple[PeftModel, list[str], LoopResult],
) -> None:
    from dlm_git.hashing import float_hex
    from dlm_git.train.adapter import HubBase, save_adapter
    from dlm_git.train.records import peak_memory

    model, targets, result = trained
    save_adapter(model, job.staging, HubBase(job.base_repo_id, job.base_revision))
    record = RankResult(
        losses_hex=[float_hex(v) for v in result.losses],
        steps=result.steps,
        tokens=result.tokens,
        loss_tokens=result.loss_tokens,
        sequences_seen=result.sequences_seen,
        targets=targets,
        flags=env.flags,
        rank0={**peak_memory(env.device), "loop_seconds": round(result.seconds, 3)},
    )
    write_document(job_dir / RESULT, record)


def _is_peer_loss(exc: BaseException) -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    # a broken connection to a peer (its own backend errors are the rank's own failure)
    kinds = tuple(k for k in (getattr(dist, "DistNetworkError", None),) if isinstance(k, type))
    text = str(exc).lower()
    return (bool(kinds) and isinstance(exc, kinds)) or any(
        marker in text for marker in ("connection closed by peer", "connection reset by peer")
    )


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(exc).__name__


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
