"""The contract's check list on one staged document, at commit time.

Invariants:
- A staged document is a `DocAt` of the index; HEAD's is the same directory in HEAD's
  tree (both read in batches by the caller). The checks are the contract's, as `verify`
  runs them: the record checks (`contract.records`), the adapter's files and hashes
  where the staged `dvc.lock` names them in the DVC cache (through the stat-keyed hash
  cache; without a `dvc.lock`, the work tree's `adapter/`), sources and sections, the
  signature (judged whether or not one is required: binding and validity; presence and
  trust only when `dlm-git.requireSignature` asks), the eval record against the staged
  adapter and manifest (`verify.evalbinding`, as verify runs it); plus what only a commit being made
  is judged by, against HEAD: `lock.drift` and `determinism` (`contract.commit_time`).
  No base is built or read (the pre-push hook and `verify` check the base).
- Fast paths decide which checks run, never an outcome: a `.dlm` that is not the one the
  manifest records (`doc.sha256` failed) is not re-expanded (retraining fixes both);
  sources whose inputs are HEAD's (`sources_unchanged`) are not re-expanded, and their
  sections are re-derived from HEAD's record (`contract.sources.sections_from_head`); a
  document without directives is judged without the parser. HEAD's record was checked
  when HEAD was committed; a commit made with `--no-verify` is caught by the pre-push
  hook and `dlm-git verify COMMIT`, which always re-expand.
- Imports nothing heavy: the document parser only when sources are re-expanded.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.contract.adapter import file_checks
from dlm_git.contract.commit_time import determinism, head_lock, head_manifest, lock_drift
from dlm_git.contract.outcome import Check, Checks, Outcome
from dlm_git.contract.records import Records, record_checks
from dlm_git.contract.sources import (
    outside_absent,
    sections_from_head,
    sources_checks,
    sources_without_directives,
)
from dlm_git.doc.peek import peek_frontmatter
from dlm_git.docat import NO_PIPELINE, DocAt
from dlm_git.dvcfiles import DvcRecordError
from dlm_git.hooks.findings import require_signature
from dlm_git.hooks.hashcache import HashCache
from dlm_git.safeparse import dig
from dlm_git.severity import Severity
from dlm_git.verify.evalbinding import eval_checks

if TYPE_CHECKING:
    from dlm_git.sign.trust import TrustedKey

UNTRAINED = "document not trained yet (no manifest.json, no dlm.lock)"


def within(path: str, directory: str) -> bool:
    """Whether repository path `path` is `directory` or below it (`.`: everything)."""
    return directory in ("", ".") or path == directory or path.startswith(directory + "/")


def versions_as_head(
    records: Records, head_lock: dict[str, Any] | None, head_record: dict[str, Any] | None
) -> bool:
    """`lock.versions` is a function of the lock's pinned versions and base revision and
    the manifest's base spec (its kind): when all three are HEAD's, HEAD's record vouches
    for it (it was checked when HEAD was committed), and its base spec need not be built
    again."""
    lock = records.lock
    if lock is None or head_lock is None or head_record is None:
        return False
    same = ("pinned_versions", "base_model_revision")
    return all(lock[k] == head_lock[k] for k in same) and (
        records.manifest["base"]["spec"] == head_record["base"]["spec"]
    )


def sources_spec(dlm: bytes | None) -> tuple[Any, Any] | None:
    """What decides which files a document's `training.sources` take (None: unreadable)."""
    training = peek_frontmatter(dlm or b"").get("training") if dlm else None
    if not isinstance(training, dict):
        return None
    return training.get("sources"), training.get("sources_policy")


class StagedChecks:
    """The checks of the staged documents of one hook run. `staged`: the paths whose
    index entry differs from HEAD's; `symlinks`: the index's symbolic links under the
    documents and their source directories; `head`: HEAD's commit (None: none yet)."""

    def __init__(
        self, root: Path, staged: list[str], symlinks: list[str], head: str | None
    ) -> None:
        self.root, self.staged, self.symlinks, self.head = root, staged, symlinks, head
        self.hashes = HashCache(root)

    def check(self, doc: DocAt, head: DocAt | None) -> list[Check]:
        """Every check of `doc` (its state set), against `head`, HEAD's same document."""
        checks = Checks()
        if doc.lock is None and doc.manifest is None:
            if doc.dlm_name is not None:
                checks.add("doc.trained", False, UNTRAINED)
                self.signature(checks, doc)  # a dlm.sig here signs records that are not
            return checks.items
        before = head_lock(head.lock) if head is not None else None
        head_record = head_manifest(head.manifest) if head is not None else None
        records = record_checks(checks, doc, lambda r: versions_as_head(r, before, head_record))
        lock = records.lock if records is not None else None
        if lock is not None and before is not None and head is not None:
            checks.items += lock_drift(lock, before, head.lock or b"")
        if records is None or lock is None or doc.dlm_name is None:
            return checks.items
        manifest = records.manifest
        self.adapter(checks, doc, manifest)
        stale = checks.get("doc.sha256")
        if stale is not None and stale.ok:
            self.sources(checks, doc, manifest, head, head_record)
        eval_checks(checks, doc, manifest, lock)
        if head_record is not None and before is not None:
            found = determinism(manifest, lock, head_record, before)
            checks.items += [found] if found is not None else []
        self.signature(checks, doc)
        return checks.items

    def adapter(self, checks: Checks, doc: DocAt, manifest: dict[str, Any]) -> None:
        """`adapter.files` and `adapter.sha256` where the index says the adapter is."""
        try:
            found = doc.adapter(self.root)  # the index's adapter is read in place
        except DvcRecordError as exc:
            what = f"malformed record: {exc.subject}: {exc.message}"
            checks.items.append(Check("dvc.binding", Outcome.FAILED, what, fix=exc.hint))
            return
        if isinstance(found, str):
            quiet = found == NO_PIPELINE  # no DVC pipeline at all: said, not refused
            checks.items.append(
                Check(
                    "adapter.files",
                    Outcome.ABSENT,
                    found,
                    Severity.WARN if quiet else None,
                    f"run `dlm-git train {doc.rel}`" if quiet else "run `dvc pull` or `dvc repro`",
                )
            )
            return
        file_checks(checks, manifest, found, lambda _name, path: self.hashes.sha256(path))

    def sources(
        self,
        checks: Checks,
        doc: DocAt,
        manifest: dict[str, Any],
        head: DocAt | None,
        head_record: Any,
    ) -> None:
        """`sources.root` and `sections.order`, re-expanding only when HEAD's record
        cannot vouch for the sources."""
        if (
            head is not None
            and head_record is not None
            and self.sources_unchanged(doc, manifest, head, head_record)
        ):
            found = Checks()
            if sections_from_head(found, doc, manifest, head, head_record):
                outside_absent(checks, doc)
                checks.items += found.items
                return
        if sources_without_directives(checks, doc, manifest):
            return
        import tempfile

        with tempfile.TemporaryDirectory(prefix="dlm-git-hook-") as tmp:
            sources_checks(checks, doc, manifest, Path(tmp))

    def sources_unchanged(
        self, doc: DocAt, manifest: dict[str, Any], head: DocAt, head_record: dict[str, Any]
    ) -> bool:
        """The staged sources root is HEAD's, without re-expanding: the same `.dlm` path
        with the same `training.sources` / `sources_policy`, nothing staged under the
        source directories (the index holds HEAD's files there), no symbolic links there
        (their targets may lie elsewhere), and the staged manifest records HEAD's root."""
        if head.dlm_name != doc.dlm_name or head.dlm is None:
            return False
        spec = sources_spec(doc.dlm)
        if spec is None or spec != sources_spec(head.dlm):
            return False
        dirs = doc.source_dirs
        if any(within(p, d) for d in dirs for p in [*self.staged, *self.symlinks]):
            return False
        root = dig(head_record, "sources", "merkle_root", kind=str)
        return root is not None and root == manifest["sources"]["merkle_root"]

    def signature(self, checks: Checks, doc: DocAt) -> None:
        """A staged `dlm.sig` judged as `verify` will judge the commit: a signature that no
        longer signs the staged records, is malformed or fails a trusted key fails, a
        signature required or not; a missing or untrusted one only when it is required.
        No key is read for an unsigned document."""
        if doc.signature is None and not self.required:
            return
        from dlm_git.contract.signature import signature_checks

        signature_checks(checks, doc, self.keys, self.required)

    @functools.cached_property
    def required(self) -> bool:
        """`dlm-git.requireSignature` (read once, only when a document needs it)."""
        return require_signature(self.root)

    @functools.cache  # noqa: B019 (one checker per hook run)
    def keys(self) -> list[TrustedKey]:
        """The keys that judge a staged signature, read once: the user's own and the
        policy of HEAD, the parent of the commit being made (as `verify` will judge it)."""
        from dlm_git.sign.trust import trusted_keys

        return trusted_keys(self.root, self.head)[0]
