"""`diff --forgetting`: B's adapter scored on A's held-out rows, beside A's own.

Invariants:
- The rows are A's: A's document (materialized from its commit as `diff` reads it, with
  A's params.yaml settings) split by A's `training.val_fraction`; without a split on A
  nothing is scored and the reason is said.
- Both adapters are scored by `eval.score` (the same code `dlm-git eval` runs), on A's
  base, in this process, under the numerics profile, threads and seed A's lock records
  (`numerics.prepare`): A's adapter gives the loss A's own `eval.json` records, B's the
  loss on rows it may never have seen. Scoring under one profile makes the two numbers
  comparable, bit for bit on a machine that runs the profile.
- Read-only, like the rest of `diff`: A's rows are tokenized from A's files without the
  token cache (nothing is written to it), the adapters are copies out of the DVC cache.
- Whatever is missing (A's document or lock, an adapter not in the DVC cache, B trained
  on another base, a process that already runs torch under other kernel settings) is
  one reason and no numbers, never an error: the rest of the diff stands.
- torch, peft and transformers are imported only when scoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.docat import DocAt, TreeAt
from dlm_git.errors import DlmGitError
from dlm_git.history.records import json_object
from dlm_git.history.scores import VAL_KEYS, Move, move_json
from dlm_git.history.sides import adapter_weights, describe, load
from dlm_git.layout import ADAPTER_WEIGHTS, LOCK_NAME, MANIFEST_NAME
from dlm_git.safeparse import dig

if TYPE_CHECKING:
    from dlm_git.base.resolve import ResolvedBase
    from dlm_git.doc.load import LoadedDocument
    from dlm_git.verify.fetch import FetchFrom


@dataclass(frozen=True)
class Forgetting:
    """The `val` sections (`eval.record.val_section`) of A's and B's adapters on A's
    held-out rows; `skipped`: why there are none."""

    a: dict[str, Any] | None = None
    b: dict[str, Any] | None = None
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        """`forgetting` of a document in `diff --json` (docs/history.md): per key, the
        loss of A's adapter (`from`) and of B's (`to`) on A's held-out rows."""
        a, b = self.a or {}, self.b or {}
        overall = a.get("overall") or {}
        return {
            "skipped": self.skipped,
            "val_fraction": a.get("val_fraction"),
            "rows": overall.get("rows"),
            "tokens": overall.get("tokens"),
            "val": [
                {
                    "key": key,
                    "loss": move_json(Move(_get(a, key, "loss"), _get(b, key, "loss"))),
                    "loss_hex": {"from": _get(a, key, "loss_hex"), "to": _get(b, key, "loss_hex")},
                }
                for key in VAL_KEYS
                if a.get(key) is not None or b.get(key) is not None
            ],
        }


def _get(section: dict[str, Any], key: str, what: str) -> Any:
    entry = section.get(key)
    return entry.get(what) if isinstance(entry, dict) else None


def forgetting(
    a: TreeAt, b: TreeAt, doc: str, work: Path, fetch: FetchFrom | None, tiny_dir: Path | None
) -> Forgetting:
    """Score both sides' adapters on A's held-out rows of `doc` (see the module)."""
    da, db = a.doc(doc), b.doc(doc)
    got = _rows_of(da, work / "doc-a")
    if isinstance(got, str):
        return Forgetting(skipped=got)
    loaded, flags = got
    if _base(da) != _base(db):
        return Forgetting(skipped=f"{describe(b)} records another base than {describe(a)}")
    dirs = []
    for side, sub in ((da, "adapter-a"), (db, "adapter-b")):
        weights = adapter_weights(side, work / sub, fetch)
        if isinstance(weights, str):
            return Forgetting(skipped=f"{describe(side.tree)}: {weights}")
        unbound = _unbound(side, weights)
        if unbound is not None:
            return Forgetting(skipped=f"{describe(side.tree)}: {unbound}")
        dirs.append(weights.parent)
    try:
        return _score(loaded, flags, dirs, tiny_dir)
    except DlmGitError as exc:
        return Forgetting(skipped=exc.one_line())
    except Exception as exc:  # an adapter the model cannot take: a number is not owed
        return Forgetting(skipped=f"the adapters do not load: {type(exc).__name__}")


def _unbound(side: DocAt, weights: Path) -> str | None:
    """Why these weights are not the adapter the side's manifest records (dvc.lock, which
    named them, is the commit's bytes), or None."""
    from dlm_git.hashing import sha256_file
    from dlm_git.safeparse import dig, load_json

    try:
        manifest = load_json((side.manifest or b"").decode("utf-8"), finite=True)
    except (UnicodeDecodeError, ValueError):
        return "its manifest.json does not parse"
    recorded = dig(manifest, "adapter", "files", ADAPTER_WEIGHTS, "sha256")
    if not isinstance(recorded, str) or recorded != sha256_file(weights):
        return "its adapter is not the one its manifest.json records"
    return None


def _rows_of(side: DocAt, tmp: Path) -> tuple[LoadedDocument, dict[str, Any]] | str:
    """A's document with its params.yaml settings and its lock's numerics record, or why
    there are no held-out rows to score."""
    from dlm_git.lock.io import parse_lock_json
    from dlm_git.numerics.flags import malformed_setting
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params

    where = describe(side.tree)
    loaded = load(side, tmp)
    if isinstance(loaded, str):
        return f"{where}: {loaded}"
    try:
        params = read_doc_params(loaded.repo_root, doc_key(loaded), replay=True)
        loaded = with_params(loaded, params.training)
        # tokenized afresh, not through this machine's token cache: a diff writes nothing
        cache = loaded.doc.frontmatter.training.cache.model_dump()
        loaded = with_params(loaded, {"cache": {**cache, "enabled": False}})
        lock_bytes = side.tree.read([f"{side.prefix}{LOCK_NAME}"])[f"{side.prefix}{LOCK_NAME}"]
        if lock_bytes is None:
            return f"{where}: no {LOCK_NAME}: the document is not trained there"
        lock = parse_lock_json(lock_bytes, f"{where}: {side.prefix}{LOCK_NAME}")
    except DlmGitError as exc:
        return f"{where}: {exc.one_line()}"
    if loaded.doc.frontmatter.training.val_fraction is None:
        return f"{where} has no held-out split (training.val_fraction): nothing to score"
    flags = lock.get("determinism_flags")
    bad = malformed_setting(flags) if isinstance(flags, dict) else "not an object"
    if bad is not None or not isinstance(flags, dict):
        return f"{where}: {LOCK_NAME}: determinism_flags: {bad}"
    return loaded, flags


def _base(side: DocAt) -> object:
    """The base a side's manifest records (its spec and tensor root)."""
    data = side.tree.read([f"{side.prefix}{MANIFEST_NAME}"])[f"{side.prefix}{MANIFEST_NAME}"]
    manifest = json_object(data)
    return (dig(manifest, "base", "spec"), dig(manifest, "base", "tensor_root"))


def _score(
    loaded: LoadedDocument, flags: dict[str, Any], dirs: list[Path], tiny_dir: Path | None
) -> Forgetting:
    from dlm_git.eval.run import recorded_plan
    from dlm_git.numerics.activate import can_run_in_process
    from dlm_git.numerics.prepare import prepare

    run_plan = recorded_plan(flags)
    if not can_run_in_process(run_plan.env):
        return Forgetting(skipped="this process already runs torch under other kernel settings")
    fm = loaded.doc.frontmatter
    env = prepare(fm.training.seed, run_plan, int(flags["threads"]))
    resolved = _resolve(loaded, tiny_dir)
    a, b = (_val(loaded, resolved, d, env.device) for d in dirs)
    return Forgetting(a, b)


def _resolve(loaded: LoadedDocument, tiny_dir: Path | None) -> ResolvedBase:
    from dlm_git.base.resolve import resolve_base

    fm = loaded.doc.frontmatter
    return resolve_base(
        fm.base_model, loaded.doc.directory, loaded.repo_root, tiny_dir, where=loaded.base_model_at
    )


def _val(
    loaded: LoadedDocument, resolved: ResolvedBase, adapter: Path, device: str
) -> dict[str, Any] | None:
    from dlm_git.eval.score import held_out_losses, load_model

    return held_out_losses(loaded, resolved, load_model(resolved.path, adapter, device), device)
