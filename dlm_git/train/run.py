"""`train`: validate the lock, tokenize, train, then write adapter, lock, metrics, manifest.

Invariants:
- Nothing a user sees is modified until training has succeeded; then the adapter is
  installed first and the manifest written last, each file atomically
  (`dlm_git.train.records` says what each record holds).
- A run is, in order: numerics plan (here, or a child interpreter when this process
  already runs torch under other kernel settings: `python -m dlm_git.train.child`,
  asked and answering through `dlm_git.childproc`), base and environment, lock
  decision, tokens, `build_training` (`dlm_git.train.assemble`: model, loop, effective
  config, segment writer), `_fit`, `_install_adapter` (with `--nproc N > 1` those three
  are `dlm_git.train.launch.fit_ranks`: N ranks, rank 0's adapter installed after all
  exit 0), lock, records, run record.
- The progress bar never changes a record: see `_progress_bar`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.base.resolve import ResolvedBase, resolve_base
from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.sources import Outside
from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.lock.io import write_lock
from dlm_git.manifest.records import adapter_record
from dlm_git.manifest.schema import AdapterRecord, SegmentsRecord
from dlm_git.train.assemble import TrainingRun, build_training
from dlm_git.train.options import TrainError, TrainOptions, TrainOutcome
from dlm_git.train.records import (
    Fitted,
    decide_lock,
    report_warnings,
    write_records,
    write_run_record,
)

if TYPE_CHECKING:
    from dlm_git.layout import DocLayout
    from dlm_git.numerics.plan import Plan
    from dlm_git.numerics.prepare import Environment
    from dlm_git.train.loop import LoopResult, ProgressFn
    from dlm_git.train.pipeline import TokenizeResult

CHILD = "dlm_git.train.child"


def run_train(target: Path, options: TrainOptions) -> TrainOutcome:
    """Train `target` under its numerics profile: here, or in a fresh interpreter when
    torch already runs in this process under other kernel settings."""
    from dlm_git.numerics.activate import activate, can_run_in_process

    loaded, run_plan = _plan(target, options)
    if not can_run_in_process(run_plan.env):
        return _train_in_child(target, loaded, options, run_plan)
    activate(run_plan.env)  # before anything below imports torch
    return _train_here(loaded, options, run_plan)


def train_in_process(target: Path, options: TrainOptions) -> TrainOutcome:
    """Train `target` in this process (the training child's side): its kernel settings
    are pinned here, or this is a `NumericsError` (never a child of a child)."""
    from dlm_git.numerics.activate import activate

    loaded, run_plan = _plan(target, options)
    activate(run_plan.env)
    return _train_here(loaded, options, run_plan)


def _plan(target: Path, options: TrainOptions) -> tuple[LoadedDocument, Plan]:
    from dlm_git.numerics.plan import check_threads, plan

    # a replay trains a commit's inputs: a source outside the repository is not one of them
    outside = Outside.READ if options.replay_flags is None else Outside.REFUSE
    loaded = load_document(target, outside)
    check_threads(options.threads)
    run_plan = plan(
        options.device,
        options.numerics,
        loaded.doc.frontmatter.training.numerics,
        options.replay_flags,
    )
    return loaded, run_plan


def _train_in_child(
    target: Path, loaded: LoadedDocument, options: TrainOptions, run_plan: Plan
) -> TrainOutcome:
    """The same training in `python -m dlm_git.train.child`, whose environment holds the
    plan's kernel variables; its lock WARN findings are printed here, as a run here
    prints them."""
    from dlm_git.childproc import call_child
    from dlm_git.numerics.activate import apply_to
    from dlm_git.train.protocol import TrainRequest, TrainResult

    profile = run_plan.profile.name if run_plan.profile is not None else None
    asked = replace(options, numerics=profile, device=run_plan.device, quiet=True)
    result = call_child(
        CHILD,
        TrainRequest(target, asked),
        TrainResult,
        env=apply_to(dict(os.environ), run_plan.env),
        what="the training child",
    )
    outcome = result.outcome()
    report_warnings(loaded.layout.lock, outcome.warnings)
    return outcome


def _train_here(loaded: LoadedDocument, options: TrainOptions, run_plan: Plan) -> TrainOutcome:
    """Train in this process (its kernel variables are the plan's): base and environment,
    lock decision, tokens, model and loop, training, then the outputs."""
    from dlm_git.train.adapter import sweep_stale

    t_start = time.perf_counter()
    resolved, env = _base_and_environment(loaded, options, run_plan)
    lock, lock_warnings = decide_lock(
        loaded, resolved, env, options.lock_mode, options.accept_license, options.nproc
    )
    layout = loaded.layout
    sweep_stale(layout.directory, (layout.adapter.name, layout.segments.name))
    tok, t_tok = _tokens(loaded, resolved, options)
    if options.nproc > 1:
        from dlm_git.train.launch import fit_ranks

        fit = fit_ranks(loaded, resolved, env, tok, options)
    else:
        fit = _fit_here(loaded, resolved, env, tok, options)
    lock_written = options.lock_mode != "ignore"
    if lock_written:
        write_lock(layout.lock, lock)
    manifest = write_records(loaded, resolved, tok, fit, lock)
    timings = {"wall": time.perf_counter() - t_start, "tokenize": t_tok, "train": fit.seconds}
    run_record = write_run_record(layout, env, tok, fit, timings)
    return TrainOutcome(
        doc_path=loaded.doc.path,
        adapter_sha256=fit.record.files[ADAPTER_WEIGHTS].sha256,
        tensor_root=fit.record.tensor_root,
        lock=lock,
        lock_written=lock_written,
        manifest=manifest,
        warnings=lock_warnings,
        run_record=run_record,
    )


def _base_and_environment(
    loaded: LoadedDocument, options: TrainOptions, run_plan: Plan
) -> tuple[ResolvedBase, Environment]:
    from dlm_git.numerics.prepare import prepare

    fm = loaded.doc.frontmatter
    resolved = resolve_base(
        fm.base_model,
        loaded.doc.directory,
        loaded.repo_root,
        tiny_dir=options.tiny_dir,
        local_dir=options.base_dir,
    )
    return resolved, prepare(fm.training.seed, run_plan, options.threads)


def _tokens(
    loaded: LoadedDocument, resolved: ResolvedBase, options: TrainOptions
) -> tuple[TokenizeResult, float]:
    from dlm_git.train.pipeline import load_or_tokenize, tokenize_document

    started = time.perf_counter()
    if options.use_cache:
        enabled = loaded.doc.frontmatter.training.cache.enabled
        tok = load_or_tokenize(loaded, resolved, use_cache=enabled)
    else:  # --no-cache: tokenize from scratch, touching neither the cache nor tokens/
        tok = tokenize_document(loaded, resolved, use_cache=False)
    if not tok.sequences:
        raise TrainError(
            str(loaded.doc.path), "no trainable rows (no prose, instructions or sources)"
        )
    return tok, time.perf_counter() - started


def _fit_here(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    env: Environment,
    tok: TokenizeResult,
    options: TrainOptions,
) -> Fitted:
    """Train in this process, then install the adapter (and segment snapshots)."""
    run = build_training(loaded, resolved, env.device, tok, options.segment_every)
    result, seconds = _fit(run, tok, options.quiet)
    record, segments = _install_adapter(run, loaded.layout, loaded.doc.frontmatter.base_model)
    return Fitted(run.config, result, record, segments, seconds)


def _fit(run: TrainingRun, tok: TokenizeResult, quiet: bool) -> tuple[LoopResult, float]:
    from dlm_git.train.loop import train_loop

    boundary = run.segments.on_boundary if run.segments is not None else None
    started = time.perf_counter()
    try:
        with _progress_bar(quiet) as update:
            result = train_loop(
                run.model,
                tok.sequences,
                run.loop_cfg,
                progress=update,
                boundary_every=run.every,
                on_boundary=boundary,
            )
    except BaseException:
        if run.segments is not None:
            run.segments.abort()
        raise
    return result, time.perf_counter() - started


def _install_adapter(
    run: TrainingRun, layout: DocLayout, base_spec: str
) -> tuple[AdapterRecord, SegmentsRecord | None]:
    """Save the adapter through a staging directory and install it (then the segments)."""
    from dlm_git.train.adapter import install_dir, save_adapter, staging_dir

    staging = staging_dir(layout.adapter)
    try:
        save_adapter(run.model, staging, base_spec)
        record = adapter_record(staging)
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        if run.segments is not None:
            run.segments.abort()
        raise
    install_dir(staging, layout.adapter)
    if run.segments is not None:
        return record, run.segments.finish()
    # keep the pipeline's `segments/` out present (empty) when snapshots are off
    install_dir(staging_dir(layout.segments), layout.segments)
    return record, None


PROGRESS_REFRESH_S = 0.1


@contextlib.contextmanager
def _progress_bar(quiet: bool) -> Iterator[ProgressFn | None]:
    """A progress bar on a terminal's stderr (None: quiet, or not a terminal).

    Importing rich draws from Python's `random` (`rich.style` seeds a counter with
    `getrandbits`), so its import, start and stop run under `kept_rngs`, and it never
    refreshes from a thread of its own: it renders only inside the loop's progress
    callback, which the loop runs under `kept_rngs` too. The records of a run on a
    terminal are therefore those of the same run piped (tests/integration/test_train_terminal.py).
    """
    from dlm_git.train.loop import kept_rngs

    if quiet or not sys.stderr.isatty():
        yield None
        return
    with kept_rngs():
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        prog = Progress(
            TextColumn("train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}"),
            TextColumn("{task.fields[tps]:.0f} tok/s"),
            TimeRemainingColumn(),
            transient=True,
            auto_refresh=False,
        )
        prog.start()
    started = time.perf_counter()
    state: dict[str, Any] = {"task": None, "shown": 0.0}

    def update(step: int, total: int, loss: float, tokens: int) -> None:
        if state["task"] is None:
            state["task"] = prog.add_task("train", total=total, loss=loss, tps=0.0)
        now = time.perf_counter()
        due = step == total or now - state["shown"] >= PROGRESS_REFRESH_S
        tps = tokens / max(1e-9, now - started)
        prog.update(state["task"], completed=step, loss=loss, tps=tps, refresh=due)
        if due:
            state["shown"] = now

    try:
        yield update
    finally:
        with kept_rngs():
            prog.stop()
