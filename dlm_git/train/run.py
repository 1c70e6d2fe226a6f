"""`train`: validate the lock, tokenize, train, then write adapter, lock, metrics, manifest.

Invariants:
- Nothing a user sees is modified until training has succeeded; then the adapter is
  installed first and the manifest written last, each file atomically.
- `dlm.lock`, `manifest.json`, `metrics.json`, `train_loss.tsv` are pure functions of
  the inputs; wall times and throughput go only to the gitignored run record.
- Lock modes: default (ERROR aborts, WARN warns), strict (WARN aborts too), update
  (no validation; writes with `supersedes` = sha256 of the replaced lock), ignore (no
  validation, lock not written); the decision is `lock.decision`'s, rendered here.
- A run is, in order: numerics plan (here, or a child interpreter), base and environment,
  lock decision, tokens, `build_training` (model, loop, effective config, segment writer;
  segment replay builds its models with the same `build_model`/`loop_config`), `_fit`,
  `_install_adapter` (with `--nproc N > 1` those three are `dlm_git.train.launch.fit_ranks`:
  N ranks, rank 0's adapter installed after all exit 0), lock, `_write_records`,
  `_write_run_record`.
"""

from __future__ import annotations

import contextlib
import platform
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.base.build import built_here
from dlm_git.base.registry import REGISTRY
from dlm_git.base.resolve import ResolvedBase, check_native_model, resolve_base
from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.schema import TrainingConfig
from dlm_git.doc.sources import Outside
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json, canonical_json_sha256, digest_text, float_hex
from dlm_git.lock.decision import LockMode, lock_to_write
from dlm_git.lock.errors import LockValidationError
from dlm_git.lock.io import read_lock, write_lock
from dlm_git.lock.policy import Finding
from dlm_git.lock.schema import LicenseAcceptance, Lock
from dlm_git.manifest.records import adapter_record, sources_record
from dlm_git.manifest.schema import (
    BaseRecord,
    Manifest,
    SegmentsRecord,
    TokensRecord,
    TrainingResult,
)
from dlm_git.output import error_line
from dlm_git.topology import topology_flags
from dlm_git.versions import pinned_versions

if TYPE_CHECKING:
    from dlm_git.determinism import Plan
    from dlm_git.train.loop import ProgressFn

PERMISSIVE_LICENSES = frozenset({"apache-2.0", "mit", "bsd-3-clause", "bsd-2-clause"})
LOSS_POLICY = {"prose": "all tokens", "instruction": "answer tokens"}


class TrainError(DlmGitError):
    """Training cannot proceed (no rows, bad device, ...)."""


@dataclass
class TrainOptions:
    lock_mode: LockMode = "default"
    use_cache: bool = True
    device: str = "auto"
    threads: int | None = None
    accept_license: bool = False
    quiet: bool = False
    segment_every: int | None = None
    tiny_dir: Path | None = None
    """Use this directory as the built-in tiny base (the pipeline's `base` stage output)."""
    base_dir: Path | None = None
    """Use this directory for a local-directory `base_model` (a replay's real base)."""
    numerics: str | None = None
    """Numerics profile (None or `auto`: the document's `training.numerics`, else the
    default for the device)."""
    replay_flags: dict[str, Any] | None = None
    """A replay: the recorded `determinism_flags` (a `native` replay forces them). A replay
    trains a document materialised from a commit, so sources outside the repository are
    refused (`Outside.REFUSE`): what this machine has there is not the commit's."""
    nproc: int = 1
    """Data-parallel processes (`dlm_git.train.launch`); recorded in the lock when > 1."""


@dataclass
class TrainOutcome:
    doc_path: Path
    adapter_sha256: str
    tensor_root: str
    lock: Lock
    lock_written: bool
    manifest: Manifest
    warnings: list[Finding] = field(default_factory=list)
    run_record: dict[str, Any] = field(default_factory=dict)


def license_acceptance(resolved: ResolvedBase, accept: bool) -> LicenseAcceptance:
    spec = resolved.spec
    if spec.kind == "builtin":
        return LicenseAcceptance(license="MIT", requires_acceptance=False, accepted=True)
    if spec.registry_key is not None:
        lic = REGISTRY[spec.registry_key].license
    elif built_here(resolved.path) is not None:
        lic = "mit"  # random weights drawn by `dlm-git base build`: dlm-git's own license
    else:
        lic = "unknown"
    requires = lic not in PERMISSIVE_LICENSES
    if requires and not accept:
        raise TrainError(
            "base_model",
            f"base '{spec.raw}' has license '{lic}', which must be accepted explicitly",
            "read the license, then re-run with --accept-license (recorded in dlm.lock)",
        )
    return LicenseAcceptance(license=lic, requires_acceptance=requires, accepted=True)


def build_lock(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    hw: Any,
    flags: dict[str, Any],
    klass: str,
    accept_license: bool,
    nproc: int = 1,
) -> Lock:
    fm = loaded.doc.frontmatter
    flags = {**flags, **training_flags(fm.training, hw.device), **topology_flags(nproc, hw.device)}
    return Lock(
        dlm_id=fm.dlm_id,
        dlm_sha256=loaded.doc.sha256,
        base_model=fm.base_model,
        base_model_revision=resolved.identity.revision,
        base_model_sha256=resolved.identity.tensor_root,
        pinned_versions=pinned_versions(),
        cuda_version=hw.details.get("cuda_version") if hw.device == "cuda" else None,
        rocm_version=hw.details.get("rocm_version") if hw.device == "cuda" else None,
        hardware_tier=hw.tier,
        seed=fm.training.seed,
        determinism_flags=flags,
        determinism_class=klass,
        license_acceptance=license_acceptance(resolved, accept_license),
    )


def training_flags(training: TrainingConfig, device: str) -> dict[str, Any]:
    """The training options the lock records beside the kernel facts: the precision a GPU
    run computes in, and gradient checkpointing when on (absent: off, so records made
    before the option existed read the same)."""
    flags: dict[str, Any] = {}
    if device.startswith("cuda"):
        flags["precision"] = resolve_precision(training.precision, device)
    if training.gradient_checkpointing:
        flags["gradient_checkpointing"] = True
    return flags


def validate_lock(
    prior: Lock | None, current: Lock, mode: LockMode, subject: str
) -> tuple[Lock, list[Finding]]:
    """The lock to write and the WARN findings to print; the lock decision's errors
    rendered as a `LockValidationError`."""
    lock, decision = lock_to_write(prior, current, mode)
    if not decision.ok:
        flag = "--update-lock" if mode == "default" else "--update-lock (or drop --strict-lock)"
        raise LockValidationError(
            subject,
            [f"ERROR {f.describe()}" for f in decision.errors],
            f"if the change is intended, re-run with {flag} to accept it and record "
            "`supersedes`; otherwise restore the environment the lock records "
            "(see docs/determinism.md)",
        )
    return lock, list(decision.warnings)


def effective_config(
    training: TrainingConfig,
    system_prompt: str | None,
    target_modules: list[str],
    steps: int,
    warmup: int,
    precision: str,
    template_kind: str,
) -> dict[str, Any]:
    from dlm_git.train.loop import MAX_GRAD_NORM, OPTIMIZER

    excluded = {"cache", "sources", "sources_policy", "segment_every", "numerics"}
    if not training.gradient_checkpointing:  # off is the default, and older records' form
        excluded.add("gradient_checkpointing")
    cfg = training.model_dump(mode="json", exclude=excluded)
    cfg.update(
        {
            "target_modules": sorted(target_modules),
            "total_steps": steps,
            "warmup_steps": warmup,
            "precision": precision,
            "optimizer": OPTIMIZER,
            "max_grad_norm": MAX_GRAD_NORM,
            "system_prompt": system_prompt,
            "template": template_kind,
            "loss": LOSS_POLICY,
        }
    )
    return cfg


def resolve_targets(model: Any, requested: str | tuple[str, ...]) -> list[str]:
    """LoRA targets by module name: `auto` takes every linear layer inside the repeated
    decoder blocks (a numbered path component: `model.layers.3.self_attn.q_proj`,
    `gpt_neox.layers.0.attention.query_key_value`, `transformer.h.1.mlp.c_fc`), whatever
    the family calls them; the output head and embeddings are never targets."""
    names = sorted({leaf for leaf in _block_linears(model)})
    if requested == "auto":
        if not names:
            raise TrainError("target_modules", "no linear layers found inside decoder blocks")
        return names
    missing = sorted(set(requested) - set(names))
    if missing:
        raise TrainError(
            "training.target_modules",
            f"not linear modules of the base: {', '.join(missing)}",
            f"available: {', '.join(names)}",
        )
    return sorted(requested)


def _block_linears(model: Any) -> list[str]:
    """The last name component of each linear (or transformers Conv1D) module that sits
    inside a numbered block."""
    import torch
    from transformers.pytorch_utils import Conv1D

    head = model.get_output_embeddings()
    out = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear | Conv1D) or module is head:
            continue
        parts = name.split(".")
        if any(p.isdigit() for p in parts[:-1]):
            out.append(parts[-1])
    return out


def build_model(base_path: Path, training: TrainingConfig, device: str) -> tuple[Any, list[str]]:
    """The base with fresh LoRA layers, initialised from the seed (train and replay)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    check_native_model(base_path)
    torch.manual_seed(training.seed)
    # never run code shipped with a base; the config is loaded under the same flag
    model: Any = AutoModelForCausalLM.from_pretrained(
        str(base_path), dtype=torch.float32, trust_remote_code=False
    )
    if training.gradient_checkpointing:
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    targets = resolve_targets(model, training.target_modules)
    lora = LoraConfig(
        r=training.lora_r,
        lora_alpha=training.lora_alpha,  # type: ignore[arg-type]  # peft takes floats
        lora_dropout=training.lora_dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(training.seed)
    peft_model: Any = get_peft_model(model, lora)
    peft_model.to(device)
    return peft_model, targets


def loop_config(
    training: TrainingConfig, device: str, precision: str, pad_id: int, world_size: int = 1
) -> Any:
    from dlm_git.train.loop import LoopConfig

    return LoopConfig(
        learning_rate=training.learning_rate,
        lr_scheduler=training.lr_scheduler,
        warmup_ratio=training.warmup_ratio,
        num_epochs=training.num_epochs,
        max_steps=training.max_steps,
        micro_batch_size=training.micro_batch_size,
        grad_accum=training.grad_accum,
        seed=training.seed,
        device=device,
        precision=precision,
        pad_id=pad_id,
        world_size=world_size,
    )


def resolve_precision(requested: str, device: str) -> str:
    if device == "cpu":
        if requested in ("bf16", "fp16"):
            raise TrainError(
                "training.precision", f"{requested} is not supported on CPU", "use fp32 or auto"
            )
        return "fp32"
    return "fp32" if requested == "auto" else requested


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


def run_train(target: Path, options: TrainOptions) -> TrainOutcome:
    """Train `target` under its numerics profile: here, or in a fresh interpreter when
    torch already runs in this process under other kernel settings."""
    from dlm_git import numerics
    from dlm_git.determinism import check_threads, plan

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
    if not numerics.can_run_in_process(run_plan.env):
        from dlm_git.train.child import train_in_child

        name = run_plan.profile.name if run_plan.profile is not None else None
        return train_in_child(target, options, name, run_plan.device, run_plan.env)
    numerics.activate(run_plan.env)  # before anything below imports torch
    return _train_here(loaded, options, run_plan)


def _train_here(loaded: LoadedDocument, options: TrainOptions, run_plan: Plan) -> TrainOutcome:
    """Train in this process (its kernel variables are the plan's): base and environment,
    lock decision, tokens, model and loop, training, then the outputs."""
    from dlm_git.train.adapter import sweep_stale

    t_start = time.perf_counter()
    resolved, env = _base_and_environment(loaded, options, run_plan)
    lock, lock_warnings = _decide_lock(loaded, resolved, env, options)
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
    manifest = _write_records(loaded, resolved, tok, fit, lock)
    timings = {"wall": time.perf_counter() - t_start, "tokenize": t_tok, "train": fit.seconds}
    run_record = _write_run_record(layout, env, tok, fit, timings)
    return TrainOutcome(
        doc_path=loaded.doc.path,
        adapter_sha256=fit.record.files["adapter_model.safetensors"].sha256,
        tensor_root=fit.record.tensor_root,
        lock=lock,
        lock_written=lock_written,
        manifest=manifest,
        warnings=lock_warnings,
        run_record=run_record,
    )


def _base_and_environment(
    loaded: LoadedDocument, options: TrainOptions, run_plan: Plan
) -> tuple[ResolvedBase, Any]:
    from dlm_git.determinism import prepare

    fm = loaded.doc.frontmatter
    resolved = resolve_base(
        fm.base_model,
        loaded.doc.directory,
        loaded.repo_root,
        tiny_dir=options.tiny_dir,
        local_dir=options.base_dir,
    )
    return resolved, prepare(fm.training.seed, run_plan, options.threads)


def _decide_lock(
    loaded: LoadedDocument, resolved: ResolvedBase, env: Any, options: TrainOptions
) -> tuple[Lock, list[Finding]]:
    """The lock this run records and the WARN findings it prints (ERROR raises)."""
    current = build_lock(
        loaded,
        resolved,
        env.hardware,
        env.flags,
        env.klass,
        options.accept_license,
        options.nproc,
    )
    layout = loaded.layout
    warnings_: list[Finding] = []
    if options.lock_mode == "ignore":  # no validation, nothing written: don't even read it
        lock = current
    elif options.lock_mode == "update" and _corrupt(layout.lock):
        # Accepting over a corrupt lock binds the acceptance to the exact bytes replaced.
        # (in the form git stores, as the hook hashes HEAD's lock: `canonical_text`)
        replaced = digest_text(layout.lock.read_bytes()).sha256
        lock = current.model_copy(update={"supersedes": replaced})
    else:
        prior = read_lock(layout.lock)
        lock, warnings_ = validate_lock(prior, current, options.lock_mode, str(layout.lock))
    for f in warnings_:
        error_line(f"{layout.lock}: WARN {f.describe()}")  # the lock's values, escaped
    return lock, warnings_


def _tokens(
    loaded: LoadedDocument, resolved: ResolvedBase, options: TrainOptions
) -> tuple[Any, float]:
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


def quiet_libraries() -> None:
    """No transformers progress bars or advisory warnings in a training's output."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    warnings.filterwarnings("ignore", category=FutureWarning)


@dataclass
class TrainingRun:
    """A run assembled and ready to train: the model with fresh LoRA layers, the loop's
    configuration, the effective training config the manifest digests, and the segment
    snapshot writer (None when snapshots are off)."""

    model: Any
    loop_cfg: Any
    config: dict[str, Any]
    every: int
    segments: Any


def build_training(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    device: str,
    tok: Any,
    segment_every: int | None,
) -> TrainingRun:
    from dlm_git.train.loop import total_steps, warmup_steps
    from dlm_git.train.segments import SegmentWriter, genesis, resolve_every

    quiet_libraries()
    fm = loaded.doc.frontmatter
    training = fm.training
    precision = resolve_precision(training.precision, device)
    model, targets = build_model(resolved.path, training, device)
    loop_cfg = loop_config(training, device, precision, tok.pad_id)
    steps = total_steps(len(tok.sequences), loop_cfg)
    warmup = warmup_steps(steps, training.warmup_ratio)
    config = effective_config(
        training, fm.system_prompt, targets, steps, warmup, precision, tok.template_kind
    )
    every = resolve_every(
        segment_every if segment_every is not None else training.segment_every, steps
    )
    segments = None
    if every:
        start = genesis(
            canonical_json_sha256(config), tok.stream_root, resolved.identity.tensor_root
        )
        segments = SegmentWriter.create(loaded.layout, every, start)
    return TrainingRun(model, loop_cfg, config, every, segments)


@dataclass
class Fitted:
    """A finished training whose adapter is installed: what the records are made of."""

    config: dict[str, Any]
    result: Any
    record: Any
    segments: SegmentsRecord | None
    seconds: float
    run_facts: dict[str, Any] = field(default_factory=dict)


def _fit_here(
    loaded: LoadedDocument, resolved: ResolvedBase, env: Any, tok: Any, options: TrainOptions
) -> Fitted:
    """Train in this process, then install the adapter (and segment snapshots)."""
    run = build_training(loaded, resolved, env.device, tok, options.segment_every)
    result, seconds = _fit(run, tok, options.quiet)
    record, segments = _install_adapter(run, loaded.layout, loaded.doc.frontmatter.base_model)
    return Fitted(run.config, result, record, segments, seconds)


def _fit(run: TrainingRun, tok: Any, quiet: bool) -> tuple[Any, float]:
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
    run: TrainingRun, layout: Any, base_spec: str
) -> tuple[Any, SegmentsRecord | None]:
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


def _write_records(
    loaded: LoadedDocument, resolved: ResolvedBase, tok: Any, fit: Fitted, lock: Lock
) -> Manifest:
    """metrics.json, train_loss.tsv, then manifest.json last (each atomically)."""
    layout, fm = loaded.layout, loaded.doc.frontmatter
    result, record = fit.result, fit.record
    final_loss = result.losses[-1]
    metrics = {
        "steps": result.steps,
        "final_loss": final_loss,
        "final_loss_hex": float_hex(final_loss),
        "tokens_trained": result.tokens,
        "loss_tokens": result.loss_tokens,
        "sequences": len(tok.sequences),
        "rows": tok.rows,
    }
    atomic_write_bytes(layout.metrics, canonical_json(metrics))
    loss_tsv = "step\tloss\n" + "".join(f"{i + 1}\t{v!r}\n" for i, v in enumerate(result.losses))
    atomic_write_bytes(layout.loss, loss_tsv.encode("utf-8"))
    identity = resolved.identity
    manifest = Manifest(
        dlm_id=fm.dlm_id,
        dlm_sha256=loaded.doc.sha256,
        section_ids=loaded.section_ids,
        sources=sources_record(loaded.sources.recorded()),
        tokens=TokensRecord(
            root=tok.stream_root, rows=tok.rows, sequences=len(tok.sequences), tokens=tok.tokens
        ),
        tokenizer_sha256=identity.tokenizer_sha256,
        base=BaseRecord(
            spec=fm.base_model,
            kind=resolved.spec.kind,
            revision=identity.revision,
            tensor_root=identity.tensor_root,
            tokenizer_sha256=identity.tokenizer_sha256,
            config_sha256=identity.config_sha256,
        ),
        training_config=fit.config,
        config_sha256=canonical_json_sha256(fit.config),
        lock_sha256=lock.sha256(),
        adapter=record,
        training=TrainingResult(
            steps=result.steps,
            final_loss_hex=float_hex(final_loss),
            tokens_trained=result.tokens,
            skipped_preference_sections=tok.skipped_preference,
        ),
        segments=fit.segments,
    )
    atomic_write_bytes(layout.manifest, manifest.to_bytes())
    return manifest


def _write_run_record(
    layout: Any, env: Any, tok: Any, fit: Fitted, seconds: dict[str, float]
) -> dict[str, Any]:
    """run.json (gitignored): wall times, throughput and the machine, not a pure function
    of the inputs."""
    train, result = seconds["train"], fit.result
    run_record = {
        "wall_seconds": round(seconds["wall"], 3),
        "tokenize_seconds": round(seconds["tokenize"], 3),
        "train_seconds": round(train, 3),
        "tokens_per_second": round(result.tokens / train, 1) if train > 0 else None,
        "cache": tok.cache_stats,
        "tokens_source": tok.source,
        "host_python": platform.python_version(),
        "numerics": env.profile.name,
        **peak_memory(env.device),
        **fit.run_facts,
        "machine": {k: v for k, v in env.hardware.details.items() if k != "threads"},
    }
    atomic_write_bytes(layout.run_record, canonical_json(run_record))
    return run_record


def peak_memory(device: str) -> dict[str, int]:
    """The process's peak resident set (and the GPU's peak allocation) so far, in bytes."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_bytes": peak if sys.platform == "darwin" else peak * 1024}
    if device.startswith("cuda"):
        import torch

        out["peak_cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    return out


def _corrupt(path: Path) -> bool:
    from dlm_git.lock.errors import LockError

    try:
        read_lock(path)
    except LockError:
        return True
    return False
