"""Verify what a commit records, reading the commit's objects (never the work tree).

Invariants:
- The commit is a `docat.TreeAt` and each document a `DocAt` of it, judged by the one
  check list (`verify.hashlevel.check_document`, the contract's checks) that the
  pre-commit hook runs on the index and `verify --worktree` on the work tree.
- The documents verified are found from one listing of the commit's tree
  (`TreeAt.documents`, the `docset` rule), never from params.yaml alone: every `.dlm`
  beside records and every dlm.lock, listed or not, plus what params.yaml lists. Check
  `pipeline.documents` (first) fails for a document dropped from `documents:` while its
  records remain and for a listed directory without a .dlm; params.yaml's own problems
  are one more report. A params.yaml nested too deep is one error naming
  `<commit>:params.yaml`, as in every reader.
- The .dlm, dlm.lock, manifest.json, dvc.lock and sources come from the commit's tree
  (materialized into a temp directory for re-expansion); the adapter bytes come from the
  DVC cache at the md5s the commit's dvc.lock names. The worktree and index are never
  read or modified.
- Each check ends in a state (`Outcome`: ok, failed, absent) set where it runs; the
  verdict is computed from the states only (`report.verdict_of`), never from detail text.
  A missing record (no manifest) fails; what only this machine lacks (the adapter's DVC
  cache object or its `dvc.lock` record, the base) is absent: `CANNOT_VERIFY`. A record
  that is there but malformed (dvc.lock that does not parse or is wrongly shaped, an md5
  that is not an md5, a `.dir` listing that is not one) is `FAILED` (check
  `dvc.binding`), and nothing it names is opened.
- What the documents of a commit share is read once per run, so a verify costs a fixed
  number of git processes however many documents the commit holds: one listing of the
  tree and one `cat-file` process (`TreeAt` over `gitio.CommitFiles`), dvc.lock parsed
  once (`dvcfiles.lock_outs`, keyed by its bytes), each base read once
  (`contract.adapter.BaseReads`). Every check still runs on every document, in a temp
  directory of its own, and compares that document's own records: one document's
  verdict never depends on another's.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git import gitio
from dlm_git.contract.outcome import failed
from dlm_git.docat import TreeAt, copy_out, doc_rel
from dlm_git.docset import CHECK, FIX_PARAMS, PARAMS_NAME, assess
from dlm_git.dvcfiles import DvcRecordError
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.layout import ADAPTER_DIR
from dlm_git.sign.trust import TrustedKey, trusted_keys
from dlm_git.verify.hashlevel import Run, check_document
from dlm_git.verify.report import DocReport, Verdict

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from dlm_git.verify.fetch import FetchFrom

ADAPTER_ABSENT_CHECKS = ("adapter.files",)
"""The checks that say the adapter's bytes are absent (state ABSENT) when the DVC cache
lacks them; a bitwise replay can supply those bytes."""


def assemble_adapter(root: Path, dvc_lock: bytes | None, doc: str, dest: Path) -> str | None:
    """Copy the commit's adapter out of the DVC cache into `dest`; None if that worked,
    else why it could not be done (absent or malformed alike; `docat.copy_out` tells them
    apart, and the hash level's `dvc.binding` reports a malformed record)."""
    try:
        return copy_out(root, dvc_lock, doc, ADAPTER_DIR, dest)
    except DvcRecordError as exc:
        return exc.one_line()


def verify_commit_doc(
    root: Path,
    sha: str,
    doc: str,
    work: Path,
    *,
    adapter_from: Path | None = None,
    listing: tuple[bool, str] | None = None,
    run: Run | None = None,
    tree: TreeAt | None = None,
) -> DocReport:
    """The hash-level report of document `doc` of commit `sha` (`hashlevel.check_document`).
    `adapter_from`: the adapter's bytes from this directory (a bitwise replay's output).
    `listing`: check `pipeline.documents`'s result. `tree`: the commit, listed once for
    all its documents (else listed here); `run`: what the run's documents share."""
    if tree is None:
        with TreeAt(root, sha) as own:
            return verify_commit_doc(
                root, sha, doc, work, adapter_from=adapter_from, listing=listing, run=run, tree=own
            )
    return check_document(tree.doc(doc), work, run or Run(root), adapter_from, listing)


@dataclass
class Signing:
    """How a commit's signatures are judged: the trusted keys (the auditor's own and the
    policy of the commit's first parent; loaded on first use)."""

    root: Path
    sha: str
    _keys: list[TrustedKey] | None = None
    ignored: list[str] = field(default_factory=list)
    """Policy files that are not EC public keys (reported, never trusted)."""

    def keys(self) -> list[TrustedKey]:
        if self._keys is None:
            parent = gitio.first_parent(self.sha, self.root)
            self._keys, bad = trusted_keys(self.root, parent)
            self.ignored[:] = [f"{path} is not an EC public key: ignored" for path in bad]
        return self._keys


class NoDocuments(DlmGitError):
    """The commit holds no `.dlm` document: nothing to verify (the pre-push hook skips it)."""


def verify_commit(
    root: Path,
    rev: str,
    doc: Path | None,
    *,
    build_base: bool = True,
    require_signature: bool = False,
    fetch: tuple[str, ...] = (),
    source: FetchFrom | None = None,
) -> list[DocReport]:
    """Hash-level reports for `rev`'s documents. `build_base=False` (the git hooks) never
    builds builtin:tiny: without a built base those checks are CANNOT_VERIFY.
    `require_signature`: a missing or untrusted signature fails (else it is a note).
    `fetch`: the directory outs (`adapter`, `segments`) to fetch from the DVC remote
    first where the cache lacks them (`dlm_git.verify.fetch`), from `source` (None: DVC's
    default remote)."""
    sha = gitio.resolve_commit(rev, root)
    if sha is None:
        raise UsageError("verify", f"'{rev}' is not a commit", "give a commit, branch or tag")
    signing = Signing(root, sha)
    run = Run(
        root,
        build_base=build_base,
        keys=signing.keys,
        require_signature=require_signature,
        key_notes=signing.ignored,
    )
    with TreeAt(root, sha) as tree:
        docs = _documents(tree, root, rev, doc)
        return _verify_documents(tree, docs, run, fetch, source, params=doc is None)


def _documents(tree: TreeAt, root: Path, rev: str, doc: Path | None) -> list[str]:
    """The commit's documents (`docset`'s rule), or only `--doc`'s."""
    docs = tree.documents()
    if doc is not None:
        wanted = doc_rel(root, doc, "verify")
        docs = [d for d in docs if d == wanted] or ([wanted] if tree.dlms(wanted) else [])
        if not docs:
            raise UsageError("verify", f"{doc}: no document at {rev}", "check --doc")
    elif not docs and not tree.params.problems:
        raise NoDocuments("verify", f"commit {str(tree.where)[:12]} has no .dlm documents")
    return docs


def _verify_documents(
    tree: TreeAt,
    docs: list[str],
    run: Run,
    fetch: tuple[str, ...],
    source: FetchFrom | None,
    params: bool,
) -> list[DocReport]:
    """Each document judged on its own records, in a temp directory of its own; then
    params.yaml's own problems as one more report (`params`: when all were asked for)."""
    reports = []
    with _WorkDirs() as work_dirs:
        for i, rel in enumerate(docs):
            fetched: list[str] = []
            if fetch:
                from dlm_git.verify.fetch import fetch_outs

                fetched = fetch_outs(run.root, tree.dvc_lock, rel, fetch, source)
            with work_dirs.one(last=i == len(docs) - 1) as work:
                ok, detail, fix = assess(tree.params, tree.tree, rel)
                listing = (ok, detail if ok else f"{detail} (hint: {fix})")
                report = check_document(tree.doc(rel), work, run, None, listing)
            report.notes[:0] = fetched
            reports.append(report)
    problems = tree.params.problems if params else []
    if problems:
        checks = [failed(CHECK, f"{s}: {what} (hint: {FIX_PARAMS})") for s, what in problems]
        reports.append(
            DocReport(
                PARAMS_NAME, "hash", Verdict.FAILED, checks, extra={"commit": str(tree.where)}
            )
        )
    return reports


class _WorkDirs:
    """A fresh temp directory for each document, removed when that document is done by a
    thread of its own: removing directories can wait on the file system's journal for
    milliseconds each, which then overlaps with the next document's checks. The last
    document's is removed where it is done, as leaving the block would wait for it
    anyway: a one-document verify starts no thread (nor imports `concurrent.futures`).
    Leaving the block waits until every directory is gone (a removal that failed is
    raised, the first in document order)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._removals: list[Future[None] | BaseException | None] = []

    @contextlib.contextmanager
    def one(self, last: bool) -> Iterator[Path]:
        tmp = tempfile.TemporaryDirectory(prefix="dlm-git-verify-")
        try:
            yield Path(tmp.name)
        finally:
            self._removals.append(self._removed(tmp) if last else self._submit(tmp))

    def _submit(self, tmp: tempfile.TemporaryDirectory[str]) -> Future[None]:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1)
        return self._pool.submit(tmp.cleanup)

    @staticmethod
    def _removed(tmp: tempfile.TemporaryDirectory[str]) -> BaseException | None:
        try:
            tmp.cleanup()
        except Exception as exc:  # raised on leaving the block, as a thread's would be
            return exc
        return None

    def __enter__(self) -> _WorkDirs:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if kind is None:
            for removal in self._removals:
                if isinstance(removal, BaseException):
                    raise removal
                if removal is not None:
                    removal.result()


def is_params_report(report: DocReport) -> bool:
    """A report about params.yaml itself (no document behind it: nothing to replay)."""
    return report.doc == PARAMS_NAME and all(c.name == CHECK for c in report.checks)
