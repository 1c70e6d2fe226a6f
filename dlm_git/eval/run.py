"""`dlm-git eval DOC`: score a trained document and write its record.

Invariants:
- The inputs are checked before anything loads a model: the document's `adapter/`
  weights, `manifest.json` and `dlm.lock` exist, the weights are the ones the manifest
  records, and the lock's numerics record is well formed. Any other state is one
  `EvalError` line naming the file and the fix, and nothing is written.
- The evaluation runs under the lock's numerics profile, threads and device, pinned as a
  replay pins them (`numerics.plan` with the recorded flags, then `numerics.prepare`
  with the document's seed): here when this process can still be pinned, else in a
  fresh interpreter (`python -m dlm_git.eval.child`, through `dlm_git.childproc`).
- The record is computed whole, then written (`record.write_if_changed`): the same
  inputs under the same profile give the same bytes, and an unchanged record is not
  rewritten.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.eval.probes import PROBE_SAMPLE, select_probes
from dlm_git.eval.record import (
    BATCH_SIZE,
    EVAL_VERSION,
    MAX_NEW_TOKENS,
    EvalError,
    metrics_of,
    record_bytes,
    write_if_changed,
)
from dlm_git.hashing import canonical_json, canonical_text, sha256_bytes, sha256_file
from dlm_git.layout import ADAPTER_WEIGHTS, EVAL_METRICS_NAME, EVAL_NAME

CHILD = "dlm_git.eval.child"
_TRAIN_HINT = "train it first: dlm-git train DOC (or dvc repro train@DOC)"


@dataclass(frozen=True)
class Inputs:
    """What an evaluation evaluates, checked: the adapter's sha256, the manifest's
    bytes' sha256, and the lock's numerics record."""

    adapter_sha256: str
    manifest_sha256: str
    flags: dict[str, Any]


@dataclass(frozen=True)
class EvalRequest:
    """Evaluate `target` (the parent checked its inputs and planned the profile)."""

    target: Path
    tiny_dir: Path | None
    replay: bool = False
    """params.yaml read as a replay reads it (verify's `eval.replay`: the document's own
    entry only, what an older dlm-git ignored still ignored)."""


@dataclass(frozen=True)
class EvalResult:
    """What an evaluation wrote: the record's bytes (UTF-8 text) and whether it changed."""

    record: str
    written: bool


def run_eval(target: Path, tiny_dir: Path | None = None, *, replay: bool = False) -> EvalResult:
    """Evaluate `target` under its recorded profile: here, or in a fresh interpreter
    (`replay`: params.yaml read as a replay reads it, `EvalRequest.replay`)."""
    from dlm_git.numerics.activate import apply_to, can_run_in_process

    loaded = _load(target, replay)
    inputs = check_inputs(loaded)
    run_plan = _plan(inputs.flags)
    if can_run_in_process(run_plan.env):
        return eval_in_process(target, tiny_dir, replay=replay)
    from dlm_git.childproc import call_child

    env = apply_to(dict(os.environ), run_plan.env)
    request = EvalRequest(target, tiny_dir, replay)
    return call_child(CHILD, request, EvalResult, env=env, what="the evaluation child")


def eval_in_process(target: Path, tiny_dir: Path | None, *, replay: bool = False) -> EvalResult:
    """Evaluate in this process (pinned here, or a `NumericsError`), then write."""
    loaded = _load(target, replay)
    inputs = check_inputs(loaded)
    record = evaluate(loaded, inputs, tiny_dir, replay=replay)
    data = record_bytes(record)
    directory = loaded.layout.directory
    written = write_if_changed(directory / EVAL_METRICS_NAME, canonical_json(metrics_of(record)))
    written = write_if_changed(directory / EVAL_NAME, data) or written
    return EvalResult(data.decode("utf-8"), written)


def _load(target: Path, replay: bool) -> LoadedDocument:
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params

    loaded = load_document(target)
    # the settings train read (seed, sequence_len): the rows it trained on
    params = read_doc_params(loaded.repo_root, doc_key(loaded), replay=replay)
    return with_params(loaded, params.training)


def check_inputs(loaded: LoadedDocument) -> Inputs:
    """The adapter, manifest and lock of a trained document, or one `EvalError` line."""
    from dlm_git.lock.io import parse_lock_json
    from dlm_git.manifest.records import read_manifest_bytes

    layout = loaded.layout
    weights = layout.adapter / ADAPTER_WEIGHTS
    for path in (weights, layout.manifest, layout.lock):
        if not path.is_file():
            raise EvalError(str(path), "not there: the document is not trained", _TRAIN_HINT)
    manifest_bytes = layout.manifest.read_bytes()
    manifest = read_manifest_bytes(manifest_bytes, str(layout.manifest))
    actual = sha256_file(weights)
    recorded = manifest.adapter.files.get(ADAPTER_WEIGHTS)
    if recorded is None or recorded.sha256 != actual:
        raise EvalError(
            str(weights),
            f"sha256 {actual[:16]} is not the adapter manifest.json records",
            "retrain (dlm-git train DOC), or restore the recorded adapter (dvc checkout)",
        )
    lock = parse_lock_json(layout.lock.read_bytes(), str(layout.lock))
    flags = lock.get("determinism_flags")
    bad = _bad_flags(flags)
    if bad is not None or not isinstance(flags, dict):
        raise EvalError(f"{layout.lock}: determinism_flags", str(bad), _TRAIN_HINT)
    # of the canonical text, as the records are bound: a CRLF checkout records the same
    return Inputs(actual, sha256_bytes(canonical_text(manifest_bytes)), dict(flags))


def _bad_flags(flags: object) -> str | None:
    """What is wrong with a lock's numerics record beyond what the lock's reader checks
    (its thread count among them), as a replay judges it; None if nothing."""
    from dlm_git.numerics.flags import malformed_setting

    if not isinstance(flags, dict):
        return "not an object"
    return malformed_setting(flags)


def _plan(flags: dict[str, Any]) -> Any:
    """The recorded profile's plan (kernel variables, device), as a replay makes it."""
    from dlm_git.numerics.plan import plan
    from dlm_git.numerics.table import NATIVE, PROFILES

    name = flags.get("numerics", NATIVE)
    profile = PROFILES.get(name) if isinstance(name, str) else None
    if profile is None:
        raise EvalError(
            "dlm.lock", f"unknown numerics profile {name!r}", "upgrade dlm-git, or retrain"
        )
    device = "cuda" if profile.device == "cuda" else str(flags.get("device") or "cpu")
    return plan(device, profile.name, None, flags)


def recorded_plan(flags: dict[str, Any]) -> Any:
    """`_plan`, for `diff --forgetting`: it scores under the profile a lock records too."""
    return _plan(flags)


def evaluate(
    loaded: LoadedDocument, inputs: Inputs, tiny_dir: Path | None, *, replay: bool = False
) -> dict[str, Any]:
    """The record of `loaded` (pins this process under the recorded profile first)."""
    from dlm_git.base.resolve import resolve_base
    from dlm_git.eval.harness import run_tasks
    from dlm_git.eval.score import answer_probe, held_out_losses, load_model
    from dlm_git.eval.taskdef import doc_tasks
    from dlm_git.numerics.prepare import prepare
    from dlm_git.train.tokenize import RowTokenizer

    fm = loaded.doc.frontmatter
    tasks = doc_tasks(loaded, replay=replay)  # judged before anything loads (docs/eval.md)
    threads = int(inputs.flags["threads"])  # a count: the lock's reader checked it
    env = prepare(fm.training.seed, _plan(inputs.flags), threads)
    resolved = resolve_base(
        fm.base_model, loaded.doc.directory, loaded.repo_root, tiny_dir, where=loaded.base_model_at
    )
    tokenizer = RowTokenizer(resolved.path, fm.system_prompt, fm.training.sequence_len)
    template = "chat_template" if tokenizer.has_chat_template() else "plain"
    model = load_model(resolved.path, loaded.layout.adapter, env.device)
    probes = select_probes(loaded.doc.sections, fm.training.seed)
    return {
        "eval_version": EVAL_VERSION,
        "adapter_sha256": inputs.adapter_sha256,
        "manifest_sha256": inputs.manifest_sha256,
        "numerics": {"profile": env.profile.name, "threads": threads, "device": env.device},
        "settings": {
            "batch_size": BATCH_SIZE,
            "max_new_tokens": MAX_NEW_TOKENS,
            "seed": fm.training.seed,
            "probe_sample": PROBE_SAMPLE,
            "decoding": "greedy",
            "exact_match": "strip",
        },
        "val": held_out_losses(loaded, resolved, model, env.device, use_cache=not replay),
        "probes": [answer_probe(model, tokenizer, p, env.device, template) for p in probes],
        "tasks": run_tasks(tasks, model, resolved.path, fm.training.seed, loaded.repo_root),
    }
