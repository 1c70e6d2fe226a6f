"""`train`: validate the lock, tokenize, train, then write adapter, lock, metrics, manifest.

Invariants:
- No record a user sees is modified until training has succeeded; then the adapter is
  installed first and the manifest written last, each file atomically
  (`dlm_git.train.records` says what each record holds). Only the outputs' ignore rule
  (`dlm_git.train.ignore`) comes first, once the lock allows the run, so that nothing
  written after it (staging directories, tokens, a killed run's leftovers) is staged.
- A run is, in order: numerics plan (here, or a child interpreter when this process
  already runs torch under other kernel settings: `python -m dlm_git.train.child`,
  asked and answering through `dlm_git.childproc`), base and environment, lock
  decision, ignore rule, tokens, `build_training` (`dlm_git.train.assemble`: model,
  loop, effective config, segment writer), `_fit`, `_install_adapter` (with
  `--nproc N > 1` those three are `dlm_git.train.launch.fit_ranks`: N ranks, rank 0's
  adapter installed after all exit 0), lock, records, run record.
- The progress display never changes a record: see `_progress_bar`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git.base.resolve import ResolvedBase, read_config, resolve_base
from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.sources import Outside
from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.lock.io import write_lock
from dlm_git.manifest.records import adapter_record
from dlm_git.manifest.schema import AdapterRecord, SegmentsRecord
from dlm_git.train.assemble import TrainingRun, build_training
from dlm_git.train.doc_params import apply_params
from dlm_git.train.options import TrainError, TrainOptions, TrainOutcome
from dlm_git.train.progress import Outline, display, outline_for
from dlm_git.train.records import (
    Fitted,
    decide_lock,
    write_records,
    write_run_record,
)
from dlm_git.train.smoke import effective_max_steps, with_max_steps

if TYPE_CHECKING:
    from dlm_git.layout import DocLayout
    from dlm_git.lock.schema import Lock
    from dlm_git.numerics.plan import Plan
    from dlm_git.numerics.prepare import Environment
    from dlm_git.train.card import CardFacts
    from dlm_git.train.loop import LoopResult, ProgressFn
    from dlm_git.train.pipeline import TokenizeResult

CHILD = "dlm_git.train.child"


def run_train(target: Path, options: TrainOptions) -> TrainOutcome:
    """Train `target` under its numerics profile: here, or in a fresh interpreter when
    torch already runs in this process under other kernel settings."""
    from dlm_git.numerics.activate import activate, can_run_in_process

    loaded, options, run_plan = _plan(target, options)
    if not can_run_in_process(run_plan.env):
        return _train_in_child(target, options, run_plan)
    activate(run_plan.env)  # before anything below imports torch
    return _train_here(loaded, options, run_plan)


def train_in_process(target: Path, options: TrainOptions) -> TrainOutcome:
    """Train `target` in this process (the training child's side): its kernel settings
    are pinned here, or this is a `NumericsError` (never a child of a child)."""
    from dlm_git.numerics.activate import activate

    loaded, options, run_plan = _plan(target, options)
    activate(run_plan.env)
    return _train_here(loaded, options, run_plan)


def _plan(target: Path, options: TrainOptions) -> tuple[LoadedDocument, TrainOptions, Plan]:
    from dlm_git.numerics.plan import check_threads, plan

    # a replay trains a commit's inputs: a source outside the repository is not one of them
    outside = Outside.READ if options.replay_flags is None else Outside.REFUSE
    steps = effective_max_steps(options.max_steps, options.replay_flags)
    loaded, options = apply_params(load_document(target, outside), options)
    loaded = with_max_steps(loaded, steps)
    check_threads(options.threads)
    run_plan = plan(
        options.device,
        options.numerics,
        loaded.doc.frontmatter.training.numerics,
        options.replay_flags,
    )
    return loaded, options, run_plan


def _train_in_child(target: Path, options: TrainOptions, run_plan: Plan) -> TrainOutcome:
    """The same training in `python -m dlm_git.train.child`, whose environment holds the
    plan's kernel variables. It shows here what it would show here (its lock WARN
    findings, the `.gitignore` line, and, when this process's stderr is a terminal, the
    plan and progress): its reports, drawn by `dlm_git.train.progress.Relayed`."""
    from dlm_git.childproc import call_child
    from dlm_git.numerics.activate import apply_to
    from dlm_git.train.progress import Relayed, shows
    from dlm_git.train.protocol import TrainRequest, TrainResult

    profile = run_plan.profile.name if run_plan.profile is not None else None
    shown = shows(options.quiet)  # decided here: the child's stderr is never a terminal
    asked = replace(options, numerics=profile, device=run_plan.device, quiet=not shown)
    result = call_child(
        CHILD,
        TrainRequest(target, asked),
        TrainResult,
        env=apply_to(dict(os.environ), run_plan.env),
        what="the training child",
        listen=Relayed(shown).listener(),
    )
    return result.outcome()


def _train_here(loaded: LoadedDocument, options: TrainOptions, run_plan: Plan) -> TrainOutcome:
    """Train in this process (its kernel variables are the plan's): base and environment,
    lock decision, tokens, model and loop, training, then the outputs."""
    from dlm_git.train.adapter import sweep_stale
    from dlm_git.train.ignore import ignore_outputs

    t_start = time.perf_counter()
    resolved, env = _base_and_environment(loaded, options, run_plan)
    steps = effective_max_steps(options.max_steps, options.replay_flags)
    lock, lock_warnings = decide_lock(
        loaded, resolved, env, options.lock_mode, options.accept_license, options.nproc, steps
    )
    layout = loaded.layout
    if options.replay_flags is None:  # a replay trains a copy of a commit, outside git
        ignore_outputs(layout)
    sweep_stale(layout.directory, (layout.adapter.name, layout.segments.name))
    tok, t_tok = _tokens(loaded, resolved, options)
    card = _card_facts(loaded, resolved, lock, tok)
    if options.nproc > 1:
        from dlm_git.train.launch import fit_ranks

        fit = fit_ranks(loaded, resolved, env, tok, options, card)
    else:
        fit = _fit_here(loaded, resolved, env, tok, options, card)
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
        where=loaded.base_model_at,
    )
    read_config(resolved.path)  # a config no loader could read fails before torch loads
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


def _card_facts(
    loaded: LoadedDocument, resolved: ResolvedBase, lock: Lock, tok: TokenizeResult
) -> CardFacts:
    """What the adapter's card says besides its config and weights (`dlm_git.train.card`)."""
    from dlm_git.manifest.records import sources_record
    from dlm_git.train.card import card_facts

    sources_root = sources_record(loaded.sources.recorded()).merkle_root
    return card_facts(resolved, lock, tok.stream_root, sources_root)


def _fit_here(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    env: Environment,
    tok: TokenizeResult,
    options: TrainOptions,
    card: CardFacts,
) -> Fitted:
    """Train in this process, then install the adapter (and segment snapshots)."""
    run = build_training(loaded, resolved, env.device, tok, options.segment_every)
    result = _fit(run, tok, options.quiet, _outline(loaded, run, tok))
    record, segments = _install_adapter(run, loaded.layout, card)
    facts = {"snapshot_seconds": round(run.segments.seconds, 3)} if run.segments else {}
    return Fitted(run.config, result, record, segments, result.seconds, facts)


def _fit(run: TrainingRun, tok: TokenizeResult, quiet: bool, plan: Outline) -> LoopResult:
    from dlm_git.train.loop import train_loop

    boundary = run.segments.on_boundary if run.segments is not None else None
    try:
        with _progress_bar(quiet, plan) as update:
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
    return result


def _install_adapter(
    run: TrainingRun, layout: DocLayout, card: CardFacts
) -> tuple[AdapterRecord, SegmentsRecord | None]:
    """Save the adapter and its card through a staging directory (while the segment
    writer finishes the last snapshots), wait until every snapshot is durable, then
    install the adapter and the segments: a failed snapshot write installs nothing."""
    from dlm_git.train.adapter import install_dir, save_adapter, staging_dir
    from dlm_git.train.card import write_card

    staging = staging_dir(layout.adapter)
    try:
        save_adapter(run.model, staging, card.hub)
        write_card(staging, card, run.config)
        record = adapter_record(staging)
        if run.segments is not None:
            run.segments.wait()
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


@contextlib.contextmanager
def _progress_bar(quiet: bool, plan: Outline) -> Iterator[ProgressFn | None]:
    """The plan line and progress on a terminal's stderr (None: quiet, or not a
    terminal): `dlm_git.train.progress`. It draws no random number, and the loop calls it
    under `kept_rngs`, so the records of a run on a terminal are those of the same run
    piped (tests/integration/test_train_terminal.py)."""
    shown = display(plan, quiet)
    yield None if shown is None else shown.update


def _outline(loaded: LoadedDocument, run: TrainingRun, tok: TokenizeResult) -> Outline:
    """What the progress display announces: the run's steps, epochs and tokens."""
    return outline_for(str(loaded.doc.path), run.loop_cfg, len(tok.sequences), tok.tokens)
