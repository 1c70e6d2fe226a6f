"""Verify what a commit records, reading the commit's objects (never the work tree).

Invariants:
- The documents verified are found from one listing of the commit's tree
  (`dlm_git.docset`), never from params.yaml alone: every `.dlm` beside records and
  every dlm.lock, listed or not, plus what params.yaml lists. Check `pipeline.documents`
  (first) fails for a document dropped from `documents:` while its records remain and for
  a listed directory without a .dlm; params.yaml's own problems are one more report.
- The .dlm, dlm.lock, manifest.json, dvc.lock and sources come from the commit's tree
  (materialized into a temp directory for re-expansion); the adapter bytes come from the
  DVC cache at the md5s the commit's dvc.lock names. The worktree and index are never
  read or modified.
- Each check ends in a state (`Outcome`: ok, failed, absent) set where it runs; the
  verdict is computed from the states only (`report.verdict_of`), never from detail text.
  A missing record (no manifest, no dvc.lock record) fails; what only this machine lacks
  (the adapter's DVC cache object, the base) is absent: `CANNOT_VERIFY`. A record
  that is there but malformed (dvc.lock that does not parse or is wrongly shaped, an md5
  that is not an md5, a `.dir` listing that is not one) is `FAILED` (check
  `dvc.binding`), and nothing it names is opened.
- What the documents of a commit share is read once per run, so a verify costs a fixed
  number of git processes however many documents the commit holds: one listing of the
  tree and one `cat-file` process (`gitio.CommitFiles`), dvc.lock parsed once
  (`dvcfiles.lock_outs`, keyed by its bytes), each base read once (`checks.BaseReads`).
  Every check still runs on every document, in a temp directory of its own, and compares
  that document's own records: one document's verdict never depends on another's.
"""

from __future__ import annotations

import contextlib
import posixpath
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git import gitio, revdoc
from dlm_git.docset import (
    CHECK,
    FIX_PARAMS,
    PARAMS_NAME,
    Params,
    Tree,
    assess,
    documents,
    read_params,
)
from dlm_git.dvcfiles import DvcRecordError, cache_object, copy_object, dir_listing, lock_outs
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME
from dlm_git.safeparse import TooDeep
from dlm_git.sign.bundle import signed_digests
from dlm_git.sign.judge import judge
from dlm_git.sign.trust import TrustedKey, trusted_keys
from dlm_git.verify.checks import (
    BaseReads,
    Checks,
    DocFiles,
    adapter_checks,
    base_check,
    dvc_checks,
    failed,
    lora_structure_check,
    record_checks,
    sources_checks,
)
from dlm_git.verify.report import FAILED, DocReport, verdict_of
from dlm_git.verify.worktree import locate_base_dir

if TYPE_CHECKING:
    from dlm_git.verify.fetch import FetchFrom

ADAPTER_ABSENT_CHECKS = ("adapter.files",)
"""The checks that say the adapter's bytes are absent (state ABSENT) when the DVC cache
lacks them; a bitwise replay can supply those bytes."""


def commit_documents(files: gitio.CommitFiles, sha: str) -> tuple[list[str], Params, Tree]:
    """Document directories of commit `sha` (see `dlm_git.docset`): params.yaml's
    `documents:` (or, without one, every .dlm's directory), then every directory with
    records that the list leaves out. One listing of the commit's tree (`files`)."""
    params_bytes = files.read([PARAMS_NAME])[PARAMS_NAME]
    try:
        params = read_params(params_bytes)
    except TooDeep as exc:
        # refused, not skipped: later levels (replay's tolerance) read this file too
        raise DlmGitError(
            f"{sha[:12]}:{PARAMS_NAME}", f"{exc.problem}", "fix params.yaml"
        ) from None
    tree = Tree.from_paths(files.paths())
    return documents(params, tree), params, tree


def assemble_adapter(root: Path, dvc_lock: bytes | None, doc_rel: str, dest: Path) -> str | None:
    """Copy the commit's adapter out of the DVC cache into `dest`; None if that worked,
    else why it could not be done (absent or malformed alike; `copy_out` tells them
    apart, and the hash level's `dvc.binding` reports a malformed record)."""
    try:
        return copy_out(root, dvc_lock, doc_rel, ADAPTER_DIR, dest)
    except DvcRecordError as exc:
        return exc.one_line()


def copy_out(root: Path, dvc_lock: bytes | None, doc_rel: str, name: str, dest: Path) -> str | None:
    """Copy the directory out `<doc>/<name>` that `dvc_lock` records from the DVC cache
    into `dest`: None if that worked, else what is absent. A malformed record (dvc.lock,
    an md5, the `.dir` listing) raises `DvcRecordError` before anything it names is
    opened."""
    if dvc_lock is None:
        return f"the commit has no dvc.lock recording {name}/"
    out_path = revdoc.prefix_of(doc_rel) + name
    out = lock_outs(dvc_lock).find(out_path)
    if out is None:
        return f"the commit's dvc.lock records no {out_path}"
    listing = dir_listing(root, out.md5)
    if listing is None:
        return f"{name}/ {out.md5} is not in the DVC cache (run `dvc fetch` / `dvc pull`)"
    dest.mkdir(parents=True, exist_ok=True)
    for rel, md5 in listing.items():
        if not _plain_name(rel):
            continue  # never written outside `dest`; dvc.binding reports the entry
        try:
            copy_object(cache_object(root, md5), dest / rel)
        except (FileNotFoundError, NotADirectoryError):
            return f"{name}/{rel} ({md5}) is not in the DVC cache (run `dvc fetch`)"
    return None


def _plain_name(name: str) -> bool:
    """A listing entry that names a file directly inside the adapter directory."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def verify_commit_doc(
    root: Path,
    sha: str,
    doc_rel: str,
    work: Path,
    build_base: bool = True,
    adapter_from: Path | None = None,
    listing: tuple[bool, str] | None = None,
    signing: Signing | None = None,
    commit: gitio.CommitFiles | None = None,
    bases: BaseReads | None = None,
) -> DocReport:
    """The hash-level report of one document. `adapter_from`: take the adapter's bytes
    from this directory instead of the DVC cache (a bitwise replay's output), so every
    check of the adapter against the manifest and dvc.lock still runs. `listing`: the
    result of check `pipeline.documents` for it (see `dlm_git.docset.assess`), recorded
    first. `signing`: judge the document's signature (`dlm_git.sign.judge`) too.
    `commit`: commit `sha`'s files, listed once for all its documents (else listed here);
    `bases`: the run's reads of the bases its documents name (else read here)."""
    if commit is None:
        with gitio.CommitFiles(sha, root) as own:
            return verify_commit_doc(
                root, sha, doc_rel, work, build_base, adapter_from, listing, signing, own, bases
            )
    prefix = revdoc.prefix_of(doc_rel)
    dlms = revdoc.dlms_in((path for *_, path in commit.named([doc_rel])), doc_rel)
    names = [f"{prefix}{LOCK_NAME}", f"{prefix}{MANIFEST_NAME}", "dvc.lock"]
    names += dlms[:1]
    names.append(f"{prefix}{SIGNATURE_NAME}")
    blobs = commit.read(names)
    files = DocFiles(
        doc_rel=doc_rel,
        dlm_bytes=blobs.get(dlms[0]) if len(dlms) == 1 else None,
        lock_bytes=blobs.get(f"{prefix}{LOCK_NAME}"),
        manifest_bytes=blobs.get(f"{prefix}{MANIFEST_NAME}"),
        dvc_lock_bytes=blobs.get("dvc.lock"),
    )
    checks = Checks()
    if listing is not None:
        checks.add(CHECK, *listing)
    manifest, lock = record_checks(checks, files)
    notes: list[str] = []
    if manifest is not None and len(dlms) == 1:
        tree = work / "tree"
        revdoc.write_inputs(root, doc_rel, sha, files.dlm_bytes or b"", tree, commit)
        sources_checks(checks, manifest, tree / dlms[0], tree)
        adapter_dir = adapter_from or work / "adapter"
        assembled = False
        try:
            why = (
                None
                if adapter_from is not None
                else copy_out(root, files.dvc_lock_bytes, doc_rel, ADAPTER_DIR, adapter_dir)
            )
        except DvcRecordError as exc:
            checks.add("dvc.binding", False, f"malformed record: {exc.one_line()}")
        else:
            assembled = why is None
            if why is not None:
                notes.append(why)
                checks.absent("adapter.files", why)
        if assembled:
            adapter_checks(checks, manifest, adapter_dir)
            # bases are machine-local (never in the commit): look beside the real work tree
            base_dir = locate_base_dir(
                manifest.base.spec,
                root / doc_rel,
                root,
                None,
                build=build_base,
                revision=manifest.base.revision,
            )
            if base_dir is None:
                notes.append(f"base {manifest.base.spec} is not available on this machine")
            lora_structure_check(checks, manifest, adapter_dir, base_dir, bases)
            base_check(checks, manifest, base_dir, manifest.base.revision, bases)
            dvc_checks(checks, files, adapter_dir, root)
    elif len(dlms) != 1:
        checks.add("doc.sha256", False, f"expected one .dlm in {doc_rel}, found {len(dlms)}")
    if signing is not None and len(dlms) == 1:
        signature = blobs.get(f"{prefix}{SIGNATURE_NAME}")
        recorded = {n: f.sha256 for n, f in manifest.adapter.files.items()} if manifest else {}
        expected = signed_digests(
            posixpath.basename(dlms[0]),
            files.dlm_bytes,
            files.lock_bytes,
            files.manifest_bytes,
            recorded,
        )
        keys = signing.keys() if signature is not None else []  # unsigned: nothing to load
        decision = judge(signature, expected, keys, signing.required)
        for name, ok, detail in decision.checks:
            checks.add(name, ok, detail)
        notes.extend(f"signature: {n}" for n in [*decision.notes, *signing.ignored])
    adapter_sha = manifest.adapter.files.get("adapter_model.safetensors") if manifest else None
    return DocReport(
        doc=doc_rel,
        level="hash",
        verdict=verdict_of(checks.items),
        checks=checks.items,
        adapter_sha256=adapter_sha.sha256 if adapter_sha else None,
        notes=notes,
        extra={"commit": sha, **({"determinism_class": lock["determinism_class"]} if lock else {})},
    )


@dataclass
class Signing:
    """How a commit's signatures are judged: the trusted keys (the auditor's own and the
    policy of the commit's first parent; loaded on first use) and whether one is required."""

    root: Path
    sha: str
    required: bool
    _keys: list[TrustedKey] | None = None
    ignored: list[str] = field(default_factory=list)
    """Policy files that are not EC public keys (reported, never trusted)."""

    def keys(self) -> list[TrustedKey]:
        if self._keys is None:
            parent = gitio.first_parent(self.sha, self.root)
            self._keys, bad = trusted_keys(self.root, parent)
            self.ignored = [f"{path} is not an EC public key: ignored" for path in bad]
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
    with gitio.CommitFiles(sha, root) as commit:
        return _verify_documents(
            root, sha, rev, doc, commit, build_base, require_signature, fetch, source
        )


def _verify_documents(
    root: Path,
    sha: str,
    rev: str,
    doc: Path | None,
    commit: gitio.CommitFiles,
    build_base: bool,
    require_signature: bool,
    fetch: tuple[str, ...],
    source: FetchFrom | None,
) -> list[DocReport]:
    """`verify_commit` of commit `sha`, its files listed once (`commit`); each document is
    still judged on its own records, in a temp directory of its own."""
    docs, params, tree = commit_documents(commit, sha)
    problems = params.problems
    if doc is not None:
        wanted = revdoc.doc_rel(root, doc, "verify")
        docs = [d for d in docs if d == wanted] or ([wanted] if _has_dlm(commit, wanted) else [])
        if not docs:
            raise UsageError("verify", f"{doc}: no document at {rev}", "check --doc")
        problems = []  # about params.yaml itself, not about this document
    if not docs and not problems:
        raise NoDocuments("verify", f"commit {sha[:12]} has no .dlm documents")
    reports = []
    signing = Signing(root, sha, require_signature)
    bases = BaseReads()
    dvc_lock = commit.read(["dvc.lock"])["dvc.lock"] if fetch else None
    with _WorkDirs() as work_dirs:
        for rel in docs:
            fetched: list[str] = []
            if fetch:
                from dlm_git.verify.fetch import fetch_outs

                fetched = fetch_outs(root, dvc_lock, rel, fetch, source)
            with work_dirs.one() as work:
                ok, detail, fix = assess(params, tree, rel)
                listing = (ok, detail if ok else f"{detail} (hint: {fix})")
                report = verify_commit_doc(
                    root, sha, rel, work, build_base, None, listing, signing, commit, bases
                )
            report.notes[:0] = fetched
            reports.append(report)
    if problems:
        reports.append(
            DocReport(
                doc=PARAMS_NAME,
                level="hash",
                verdict=FAILED,
                checks=[
                    failed(CHECK, f"{subject}: {what} (hint: {FIX_PARAMS})")
                    for subject, what in problems
                ],
                extra={"commit": sha},
            )
        )
    return reports


class _WorkDirs:
    """A fresh temp directory for each document, removed when that document is done by a
    thread of its own: removing directories can wait on the file system's journal for
    milliseconds each, which then overlaps with the next document's checks. Leaving the
    block waits until every directory is gone (a removal that failed is raised)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._removals: list[Future[None]] = []

    @contextlib.contextmanager
    def one(self) -> Iterator[Path]:
        tmp = tempfile.TemporaryDirectory(prefix="dlm-git-verify-")
        try:
            yield Path(tmp.name)
        finally:
            self._removals.append(self._pool.submit(tmp.cleanup))

    def __enter__(self) -> _WorkDirs:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._pool.shutdown(wait=True)
        if kind is None:
            for removal in self._removals:
                removal.result()


def is_params_report(report: DocReport) -> bool:
    """A report about params.yaml itself (no document behind it: nothing to replay)."""
    return report.doc == PARAMS_NAME and all(c.name == CHECK for c in report.checks)


def _has_dlm(commit: gitio.CommitFiles, rel: str) -> bool:
    return bool(revdoc.dlms_in((path for *_, path in commit.named([rel])), rel))
