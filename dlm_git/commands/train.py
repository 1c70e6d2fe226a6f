"""`dlm-git train DOC [--strict-lock | --update-lock | --ignore-lock] [--no-cache]
[--max-steps N] [--quiet] [--no-progress]`.

Invariant: the command line is checked here (misuse exits 2 before anything is read);
the training is `dlm_git.train.run.run_train`'s. stdout holds the summary (none with
`--quiet`, JSON with `--json`); the plan and progress go to stderr, on a terminal only
and not with `--no-progress` (`dlm_git.train.progress`): `--quiet` does not hide them,
since the pipeline's stage command passes it and a terminal under `dvc repro` should
see a long training move. This process decides that, also for a training that runs in a
child interpreter or on `--nproc` ranks (drawn here). The `--json` output is for users and
documented; no dlm-git process reads it (children answer through
`dlm_git.childproc`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from dlm_git.clidecl import Argument, Option
from dlm_git.errors import UsageError
from dlm_git.layout import MANIFEST_NAME
from dlm_git.lock.decision import LockMode
from dlm_git.output import echo, emit_json
from dlm_git.topology import FLAG, check_nproc

if TYPE_CHECKING:
    from dlm_git.lock.schema import Lock
    from dlm_git.train.options import TrainOutcome

LOCK_MODES: dict[str, LockMode] = {
    "default": "default",
    "strict": "strict",
    "update": "update",
    "ignore": "ignore",
}
LOCK_NOT_WRITTEN = "lock not written (--ignore-lock)"


_Doc = Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")]
_StrictLock = Annotated[bool, Option("--strict-lock", help="Treat lock WARN drift as ERROR.")]
_UpdateLock = Annotated[
    bool,
    Option("--update-lock", help="Skip validation; accept drift and record `supersedes`."),
]
_IgnoreLock = Annotated[bool, Option("--ignore-lock", help="Skip validation; don't write.")]
_NoCache = Annotated[bool, Option("--no-cache", help="Bypass the tokenized-section cache.")]
_Device = Annotated[str, Option("--device", help="auto, cpu, cuda or mps.")]
_Threads = Annotated[
    int | None,
    Option("--threads", help="CPU threads, 1-1024 (default: DLM_GIT_THREADS or 2)."),
]
_Numerics = Annotated[
    str | None,
    Option(
        "--numerics",
        help="Numerics profile: x86-64-v3, armv8-a, native, cuda or auto (default: the"
        " document's training.numerics, else the device's default).",
    ),
]
_SegmentEvery = Annotated[
    int | None,
    Option("--segment-every", help="Segment snapshot interval in steps (0: none)."),
]
_Nproc = Annotated[
    int,
    Option(
        "--nproc",
        help="Data-parallel processes through torch.distributed (gloo on cpu, NCCL on cuda),"
        " 1-64; recorded in dlm.lock.",
    ),
]
_AcceptLicense = Annotated[
    bool,
    Option("--accept-license", help="Accept the base model's license (recorded in the lock)."),
]
_TinyDir = Annotated[
    Path | None, Option("--tiny-dir", help="Use this directory as the built-in tiny base.")
]
_BaseDir = Annotated[
    Path | None,
    Option(
        "--base-dir",
        help="Use this directory for a local-directory base_model (as --tiny-dir for builtin).",
    ),
]
_LockMode = Annotated[
    str, Option("--lock-mode", help="default, strict, update or ignore (same as the flags).")
]
_Quiet = Annotated[
    bool,
    Option(
        "--quiet",
        "-q",
        help="No summary on stdout (errors, warnings and an unwritten lock are still said).",
    ),
]
_NoProgress = Annotated[
    bool,
    Option(
        "--no-progress",
        help="No plan line or progress on stderr (shown only when stderr is a terminal).",
    ),
]
_MaxSteps = Annotated[
    int | None,
    Option(
        "--max-steps",
        metavar="N",
        help="Stop after N optimizer steps (a smoke run; recorded in the manifest and"
        " dlm.lock, so its adapter is its own, and verify replays it with the same N).",
    ),
]
_AsJson = Annotated[bool, Option("--json", help="Print the outcome as JSON.")]


def train(
    doc: _Doc,
    strict_lock: _StrictLock = False,
    update_lock: _UpdateLock = False,
    ignore_lock: _IgnoreLock = False,
    no_cache: _NoCache = False,
    device: _Device = "auto",
    threads: _Threads = None,
    numerics: _Numerics = None,
    segment_every: _SegmentEvery = None,
    nproc: _Nproc = 1,
    accept_license: _AcceptLicense = False,
    tiny_dir: _TinyDir = None,
    base_dir: _BaseDir = None,
    lock_mode: _LockMode = "",
    quiet: _Quiet = False,
    no_progress: _NoProgress = False,
    max_steps: _MaxSteps = None,
    as_json: _AsJson = False,
) -> None:
    """Train the document's LoRA adapter deterministically; write dlm.lock and manifest.json."""
    from dlm_git.train.options import TrainOptions
    from dlm_git.train.run import run_train

    mode = _lock_mode(strict_lock, update_lock, ignore_lock, lock_mode)
    _check_options(device, segment_every, nproc, numerics)
    _check_max_steps(max_steps)
    options = TrainOptions(
        lock_mode=mode,
        use_cache=not no_cache,
        device=device,
        threads=threads,
        accept_license=accept_license,
        quiet=no_progress,
        tiny_dir=tiny_dir,
        base_dir=base_dir,
        numerics=numerics,
        segment_every=segment_every,
        nproc=nproc,
        max_steps=max_steps,
    )
    outcome = run_train(doc, options)
    if as_json:
        emit_json(_as_json(outcome))
    elif not quiet:
        _echo_outcome(outcome)
    elif not outcome.lock_written:  # quiet: only what the records do not show
        echo(f"{outcome.doc_path}: {LOCK_NOT_WRITTEN}")


def _lock_mode(strict: bool, update: bool, ignore: bool, named: str) -> LockMode:
    """The one lock mode the flags (and `--lock-mode`) choose."""
    chosen: tuple[tuple[LockMode, bool], ...] = (
        ("strict", strict),
        ("update", update),
        ("ignore", ignore),
    )
    flagged: list[LockMode] = [mode for mode, on in chosen if on]
    if named:
        mode = LOCK_MODES.get(named)
        if mode is None:
            raise UsageError(
                "train",
                f"unknown --lock-mode '{named}'",
                "use default, strict, update or ignore",
            )
        if mode != "default":
            flagged.append(mode)
    if len(flagged) > 1:
        raise UsageError(
            "train", "--strict-lock, --update-lock and --ignore-lock are mutually exclusive"
        )
    return flagged[0] if flagged else "default"


def _check_options(
    device: str, segment_every: int | None, nproc: int, numerics: str | None
) -> None:
    if device not in ("auto", "cpu", "cuda", "mps") and not device.startswith("cuda:"):
        raise UsageError("train", f"unknown --device '{device}'", "use auto, cpu, cuda or mps")
    if segment_every is not None and segment_every < 0:
        raise UsageError("train", "--segment-every must be 0 or more")
    check_nproc(nproc)
    if numerics is not None and numerics != "auto":
        from dlm_git.numerics.table import profile_named

        profile_named(numerics)


def _check_max_steps(max_steps: int | None) -> None:
    from dlm_git.train.smoke import max_steps_problem

    problem = None if max_steps is None else max_steps_problem(max_steps)
    if problem is not None:
        raise UsageError("train", f"--max-steps {problem}")


def _as_json(outcome: TrainOutcome) -> dict[str, Any]:
    """The documented `--json` output (for users: no dlm-git process reads it)."""
    m = outcome.manifest
    return {
        "doc": str(outcome.doc_path),
        "adapter_sha256": outcome.adapter_sha256,
        "tensor_root": outcome.tensor_root,
        "determinism_class": outcome.lock.determinism_class,
        "hardware_tier": outcome.lock.hardware_tier,
        "numerics": outcome.lock.determinism_flags.get("numerics"),
        "steps": m.training.steps,
        "final_loss_hex": m.training.final_loss_hex,
        "lock_written": outcome.lock_written,
        "lock_sha256": m.lock_sha256,
        "warnings": [f.describe() for f in outcome.warnings],
        "warning_findings": [asdict(f) for f in outcome.warnings],
        "lock": outcome.lock.model_dump(mode="json"),
        "manifest_path": str(outcome.doc_path.parent / MANIFEST_NAME),
        "run": outcome.run_record,
    }


def _echo_outcome(outcome: TrainOutcome) -> None:
    m, lock = outcome.manifest, outcome.lock
    echo(
        f"{outcome.doc_path}: trained {m.training.steps} steps, {m.training.tokens_trained} tokens"
    )
    echo(f"  adapter sha256   {outcome.adapter_sha256}")
    echo(f"  tensor root      {outcome.tensor_root}")
    echo(
        f"  determinism      {lock.determinism_class} on {lock.hardware_tier},"
        f" numerics {lock.determinism_flags.get('numerics')}"
        f" (threads={lock.determinism_flags.get('threads')}{_ranks(lock)})"
    )
    echo(
        f"  final loss       {float.fromhex(m.training.final_loss_hex):.6f}"
        f" ({m.training.final_loss_hex})"
    )
    if m.training.skipped_preference_sections:
        echo(
            f"  note             {m.training.skipped_preference_sections} preference section(s) "
            "not trained on (SFT only)"
        )
    if not outcome.lock_written:
        echo(f"  lock             {LOCK_NOT_WRITTEN}")
    run = outcome.run_record
    echo(f"  wall             {run['wall_seconds']} s")
    echo(f"  training         {run['train_seconds']} s ({run['tokens_per_second']} tok/s)")


def _ranks(lock: Lock) -> str:
    topo = lock.determinism_flags.get(FLAG)
    if not isinstance(topo, dict):
        return ""
    return f", {topo.get('world_size')} ranks over {topo.get('backend')}"
