"""Verify what a commit records, reading the commit's objects (never the work tree).

Invariants:
- The .dlm, dlm.lock, manifest.json, dvc.lock and sources come from the commit's tree
  (materialized into a temp directory for re-expansion); the adapter bytes come from the
  DVC cache at the md5s the commit's dvc.lock names. The worktree and index are never
  read or modified.
- Missing expected values (no manifest, no dvc.lock record, adapter not in the cache,
  base not available) are failures (`CANNOT_VERIFY` when it is only absence). A record
  that is there but malformed (dvc.lock that does not parse or is wrongly shaped, an md5
  that is not an md5, a `.dir` listing that is not one) is `FAILED` (check
  `dvc.binding`), and nothing it names is opened.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from pathlib import Path

import yaml

from dlm_git import gitio
from dlm_git.doc.peek import source_dirs
from dlm_git.dvcfiles import DvcRecordError, cache_object, dir_listing, find_out, parse_dvc_lock
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME
from dlm_git.safeparse import TooDeep, load_yaml
from dlm_git.verify.checks import (
    Checks,
    DocFiles,
    adapter_checks,
    base_check,
    dvc_checks,
    lora_structure_check,
    record_checks,
    sources_checks,
)
from dlm_git.verify.report import CANNOT_VERIFY, FAILED, VERIFIED, DocReport
from dlm_git.verify.worktree import locate_base_dir

UNAVAILABLE_CHECKS = ("adapter.files",)


def commit_documents(root: Path, sha: str) -> list[str]:
    """Document directories of a commit: params.yaml's `documents`, else every .dlm's dir."""
    params = gitio.cat_files([f"{sha}:params.yaml"], root).get(f"{sha}:params.yaml")
    if params:
        try:
            listed = (load_yaml(params.decode("utf-8")) or {}).get("documents") or []
        except TooDeep as exc:
            # refused, not skipped: later levels (replay's tolerance) read this file too
            raise DlmGitError(
                f"{sha[:12]}:params.yaml", f"{exc.problem}", "fix params.yaml"
            ) from None
        except (yaml.YAMLError, UnicodeDecodeError, AttributeError):
            listed = []
        docs = [posixpath.normpath(str(d)) for d in listed if isinstance(d, str)]
        if docs:
            return docs
    files = gitio.ls_files(["."], root, rev=sha)
    return sorted({posixpath.dirname(f) or "." for f in files if f.endswith(".dlm")})


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
    lock = parse_dvc_lock(dvc_lock)
    out_path = name if doc_rel in ("", ".") else f"{doc_rel}/{name}"
    out = find_out(lock, out_path)
    if out is None:
        return f"the commit's dvc.lock records no {out_path}"
    listing = dir_listing(root, out.md5)
    if listing is None:
        return f"{name}/ {out.md5} is not in the DVC cache (run `dvc fetch` / `dvc pull`)"
    dest.mkdir(parents=True, exist_ok=True)
    for rel, md5 in listing.items():
        if not _plain_name(rel):
            continue  # never written outside `dest`; dvc.binding reports the entry
        src = cache_object(root, md5)
        if not src.is_file():
            return f"{name}/{rel} ({md5}) is not in the DVC cache (run `dvc fetch`)"
        shutil.copyfile(src, dest / rel)
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
) -> DocReport:
    """The hash-level report of one document. `adapter_from`: take the adapter's bytes
    from this directory instead of the DVC cache (a bitwise replay's output), so every
    check of the adapter against the manifest and dvc.lock still runs."""
    prefix = "" if doc_rel in ("", ".") else doc_rel + "/"
    listed = gitio.ls_files([doc_rel], root, rev=sha)
    dlms = [p for p in listed if p.endswith(".dlm") and "/" not in p[len(prefix) :]]
    names = [f"{sha}:{prefix}{LOCK_NAME}", f"{sha}:{prefix}{MANIFEST_NAME}", f"{sha}:dvc.lock"]
    names += [f"{sha}:{d}" for d in dlms[:1]]
    blobs = gitio.cat_files(names, root)
    files = DocFiles(
        doc_rel=doc_rel,
        dlm_bytes=blobs.get(f"{sha}:{dlms[0]}") if len(dlms) == 1 else None,
        lock_bytes=blobs.get(f"{sha}:{prefix}{LOCK_NAME}"),
        manifest_bytes=blobs.get(f"{sha}:{prefix}{MANIFEST_NAME}"),
        dvc_lock_bytes=blobs.get(f"{sha}:dvc.lock"),
    )
    checks = Checks()
    manifest, lock = record_checks(checks, files)
    notes: list[str] = []
    unavailable = False
    if manifest is not None and len(dlms) == 1:
        tree = work / "tree"
        (tree / ".git").mkdir(parents=True, exist_ok=True)
        dirs = [doc_rel, *source_dirs(doc_rel, files.dlm_bytes or b"")]
        gitio.materialize(dirs, tree, root, rev=sha)
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
                unavailable = True
                checks.add("adapter.files", False, why)
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
                unavailable = True
                notes.append(f"base {manifest.base.spec} is not available on this machine")
            lora_structure_check(checks, manifest, adapter_dir, base_dir)
            base_check(checks, manifest, base_dir, manifest.base.revision)
            dvc_checks(checks, files, adapter_dir, root)
    elif len(dlms) != 1:
        checks.add("doc.sha256", False, f"expected one .dlm in {doc_rel}, found {len(dlms)}")
    adapter_sha = manifest.adapter.files.get("adapter_model.safetensors") if manifest else None
    failed_for_absence_only = unavailable and all(
        c.ok or c.name in UNAVAILABLE_CHECKS or "not available" in c.detail for c in checks.items
    )
    verdict = VERIFIED if checks.ok else (CANNOT_VERIFY if failed_for_absence_only else FAILED)
    return DocReport(
        doc=doc_rel,
        level="hash",
        verdict=verdict,
        checks=checks.items,
        adapter_sha256=adapter_sha.sha256 if adapter_sha else None,
        notes=notes,
        extra={"commit": sha, **({"determinism_class": lock["determinism_class"]} if lock else {})},
    )


def verify_commit(
    root: Path, rev: str, doc: Path | None, *, build_base: bool = True
) -> list[DocReport]:
    """Hash-level reports for `rev`'s documents. `build_base=False` (the git hooks) never
    builds builtin:tiny: without a built base those checks are CANNOT_VERIFY."""
    sha = gitio.resolve_commit(rev, root)
    if sha is None:
        raise UsageError("verify", f"'{rev}' is not a commit", "give a commit, branch or tag")
    docs = commit_documents(root, sha)
    if doc is not None:
        wanted = _doc_rel(root, doc)
        docs = [d for d in docs if d == wanted] or ([wanted] if _has_dlm(root, sha, wanted) else [])
        if not docs:
            raise UsageError("verify", f"{doc}: no document at {rev}", "check --doc")
    if not docs:
        raise DlmGitError("verify", f"commit {sha[:12]} has no .dlm documents")
    reports = []
    for rel in docs:
        with tempfile.TemporaryDirectory(prefix="dlm-git-verify-") as tmp:
            reports.append(verify_commit_doc(root, sha, rel, Path(tmp), build_base))
    return reports


def _doc_rel(root: Path, doc: Path) -> str:
    path = Path(os.path.abspath(doc))
    if path.suffix == ".dlm":
        path = path.parent
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        raise UsageError("verify", f"{doc} is outside the repository") from None


def _has_dlm(root: Path, sha: str, rel: str) -> bool:
    prefix = "" if rel == "." else rel + "/"
    return any(
        p.endswith(".dlm") and "/" not in p[len(prefix) :]
        for p in gitio.ls_files([rel], root, rev=sha)
    )
