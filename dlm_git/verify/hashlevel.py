"""The hash level of `verify` for one document: `DocAt` (a commit's or the work tree's)
through the contract's check list, into a `DocReport`.

Invariants:
- `verify COMMIT` and `verify --worktree` run this one function; what differs is only
  where the bytes come from (`DocAt`) and what the run shares (`Run`: the bases read,
  the signing keys, whether a base may be built).
- The order is the table's: `pipeline.documents` (commits), `docset.dlm_id` (against
  every document of the same tree), the record checks, sources
  and sections, then the adapter's files, tensors and structure, the base and
  `dvc.lock`'s binding, then the signature. A check whose input is absent on this
  machine is ABSENT: a commit's absent adapter is one absent `adapter.files` (the rest
  cannot start); the work tree reports each adapter check absent, and still its base.
  Then the eval record (`verify.evalbinding`; none: the note "not evaluated").
- The verdict is computed from the checks' states only (`report.verdict_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.contract.adapter import (
    BaseReads,
    adapter_checks,
    base_check,
    dvc_binding,
    structure_check,
)
from dlm_git.contract.dlm_ids import id_check, shared_in
from dlm_git.contract.outcome import Checks
from dlm_git.contract.records import Records, record_checks
from dlm_git.contract.signature import signature_checks
from dlm_git.contract.sources import sources_checks
from dlm_git.docat import AdapterAt, DocAt, Rev
from dlm_git.dvcfiles import DvcRecordError
from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.verify.evalbinding import eval_checks
from dlm_git.verify.locate import base_missing, locate_base_dir
from dlm_git.verify.report import DocReport, verdict_of

if TYPE_CHECKING:
    from dlm_git.sign.trust import TrustedKey


@dataclass
class Run:
    """What the documents of one verify run share."""

    root: Path
    """The real repository root: the DVC cache and the bases are looked up beside it."""
    bases: BaseReads = field(default_factory=BaseReads)
    build_base: bool = True
    tiny_dir: Path | None = None
    use_dvc: bool = True
    keys: Callable[[], Sequence[TrustedKey]] | None = None
    """The trusted keys (None: signatures are not judged)."""
    require_signature: bool = False
    key_notes: list[str] = field(default_factory=list)


def check_document(
    doc: DocAt,
    work: Path,
    run: Run,
    adapter_from: Path | None = None,
    listing: tuple[bool, str] | None = None,
) -> DocReport:
    """The hash-level report of `doc`. `adapter_from`: take the adapter's bytes from this
    directory instead (a bitwise replay's output), so every check of the adapter against
    the manifest and dvc.lock still runs. `listing`: check `pipeline.documents`'s result."""
    checks, notes = Checks(), []
    if listing is not None:
        checks.add("pipeline.documents", *listing)
    if doc.dlm_name is not None:
        checks.items.append(id_check(doc.rel, shared_in(doc.tree, [doc.rel]), hint=True))
    records = record_checks(checks, doc)
    if records is not None and doc.dlm_name is not None:
        sources_checks(checks, doc, records.manifest, work / "tree")
        notes += _adapter_level(checks, doc, records, work, run, adapter_from)
        evaluated = eval_checks(checks, doc, records.manifest, records.lock)
        notes += [evaluated] if evaluated is not None else []
    if run.keys is not None and doc.dlm_name is not None:
        said = signature_checks(checks, doc, run.keys, run.require_signature)
        notes += [f"signature: {n}" for n in [*said, *run.key_notes]]
    return _report(doc, checks, notes, records)


def _adapter_level(
    checks: Checks, doc: DocAt, records: Records, work: Path, run: Run, adapter_from: Path | None
) -> list[str]:
    """The adapter, base and dvc.lock checks; the notes about what is absent."""
    manifest = records.manifest
    try:
        found = _adapter(doc, work, adapter_from)
    except DvcRecordError as exc:
        checks.add("dvc.binding", False, f"malformed record: {exc.one_line()}")
        return []
    if isinstance(found, str) and doc.tree.where is not Rev.WORKTREE:
        checks.absent("adapter.files", found)
        return [found]
    adapter = found if isinstance(found, AdapterAt) else None
    if adapter is None:
        checks.absent("adapter.files", f"{found} (run `dvc pull` or `dvc repro`)")
    else:
        adapter_checks(checks, manifest, adapter)
    notes = []
    base_dir = locate_base_dir(
        manifest["base"]["spec"],
        run.root / doc.rel,
        run.root,
        run.tiny_dir,
        build=run.build_base,
        revision=manifest["base"]["revision"],
    )
    missing = None
    if base_dir is None:
        missing = base_missing(manifest["base"]["spec"], run.root / doc.rel, run.root)
        if doc.tree.where is not Rev.WORKTREE:
            notes.append(missing)
    structure_check(checks, manifest, adapter, base_dir, run.bases, missing)
    base_check(checks, manifest, base_dir, run.bases, missing)
    if run.use_dvc:
        files = adapter.files if adapter is not None else None
        dvc_binding(checks, doc.dvc_lock, doc.rel, files, run.root)
    return notes


def _adapter(doc: DocAt, work: Path, adapter_from: Path | None) -> AdapterAt | str:
    if adapter_from is not None:
        return AdapterAt({p.name: p for p in sorted(adapter_from.iterdir())})
    return doc.adapter(work / "adapter")


def _report(doc: DocAt, checks: Checks, notes: list[str], records: Records | None) -> DocReport:
    extra: dict[str, Any] = {}
    if isinstance(doc.tree.where, str):
        extra["commit"] = doc.tree.where
    if records is not None and records.lock is not None:
        extra["determinism_class"] = records.lock["determinism_class"]
    weights = records.manifest["adapter"]["files"].get(ADAPTER_WEIGHTS) if records else None
    return DocReport(
        doc=doc.rel,
        level="hash",
        verdict=verdict_of(checks.items),
        checks=checks.items,
        adapter_sha256=weights["sha256"] if weights else None,
        notes=notes,
        extra=extra,
    )
