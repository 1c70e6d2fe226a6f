"""Hash-level verification of a document as it is in the working tree (the pipeline's
`verify` stage): files on disk against manifest.json, dlm.lock and dvc.lock."""

from __future__ import annotations

import re
from pathlib import Path

from dlm_git.errors import missing_stack_module
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, read_regular
from dlm_git.layout import PIPELINE_TINY_DIR, DocLayout, find_document, repo_root_of
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
from dlm_git.verify.report import DocReport, verdict_of


def _read(path: Path) -> bytes | None:
    """The work tree's record (None when absent or a directory; a FIFO or device there is
    `NotRegularFile`, one line, never a hang)."""
    try:
        return read_regular(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    except NotRegularFile:
        if path.is_dir():
            return None
        raise


TINY_REVISION_RE = re.compile(r"^tiny-[0-9a-f]{16}$")


def locate_base_dir(
    spec: str,
    doc_dir: Path,
    repo_root: Path,
    tiny_dir: Path | None,
    *,
    build: bool = True,
    revision: str | None = None,
) -> Path | None:
    """Where the base's weights are on this machine. For builtin:tiny: `tiny_dir` if given,
    else the base cache or the repository's pipeline build (`bases/tiny`) if either holds
    the build `revision` names (the record's `base.revision`: found by its spec file's
    hash, so a core install without torch, transformers or tokenizers finds it too) or the
    current spec, else a fresh build (`build=False`, as in the git hooks, or a core
    install: None)."""
    from dlm_git.base.errors import BaseModelError, BaseNotAvailableError
    from dlm_git.base.resolve import locate_base
    from dlm_git.base.tiny import (
        built_revision,
        check_tiny_dir,
        default_base_cache,
        ensure_tiny_base,
    )
    from dlm_git.base.tiny import tiny_dir as cached_tiny

    try:
        located = locate_base(spec, doc_dir, repo_root)
        if located.spec.kind != "builtin":
            return located.path if located.available else None
        if revision is not None and TINY_REVISION_RE.match(revision):
            named = [tiny_dir] if tiny_dir is not None else []
            named += [default_base_cache() / revision, repo_root / PIPELINE_TINY_DIR]
            for candidate in named:
                if built_revision(candidate) == revision:
                    return candidate
        try:
            if tiny_dir is not None:
                check_tiny_dir(tiny_dir)
                return tiny_dir
            for candidate in (cached_tiny(), repo_root / PIPELINE_TINY_DIR):
                try:
                    check_tiny_dir(candidate)
                    return candidate
                except BaseNotAvailableError:
                    continue
            return ensure_tiny_base() if build else None
        except ModuleNotFoundError as exc:  # a core install cannot name or build the spec
            if missing_stack_module(exc) is None:
                raise
            return None
    except BaseModelError:
        return None


def verify_worktree(
    target: Path, *, use_dvc: bool = True, tiny_dir: Path | None = None
) -> DocReport:
    doc_path = find_document(target)
    layout = DocLayout(doc_path)
    repo_root = repo_root_of(doc_path)
    doc_rel = layout.directory.resolve().relative_to(repo_root).as_posix()
    files = DocFiles(
        doc_rel=doc_rel,
        dlm_bytes=_read(doc_path),
        lock_bytes=_read(layout.lock),
        manifest_bytes=_read(layout.manifest),
        dvc_lock_bytes=_read(repo_root / "dvc.lock") if use_dvc else None,
    )
    checks = Checks()
    manifest, lock = record_checks(checks, files)
    adapter_sha = None
    if manifest is not None:
        sources_checks(checks, manifest, doc_path, repo_root, read_outside=True)
        # A missing adapter/ (not pulled yet) is a failed check in each check, never a crash.
        adapter_dir = layout.adapter if layout.adapter.is_dir() else None
        adapter_checks(checks, manifest, adapter_dir)
        base_dir = locate_base_dir(
            manifest.base.spec,
            layout.directory,
            repo_root,
            tiny_dir,
            revision=manifest.base.revision,
        )
        lora_structure_check(checks, manifest, adapter_dir, base_dir)
        base_check(checks, manifest, base_dir, manifest.base.revision)
        if use_dvc:
            dvc_checks(checks, files, adapter_dir, repo_root)
        adapter_sha = manifest.adapter.files.get("adapter_model.safetensors")
    return DocReport(
        doc=doc_rel,
        level="hash",
        verdict=verdict_of(checks.items),
        checks=checks.items,
        adapter_sha256=adapter_sha.sha256 if adapter_sha else None,
        extra={"determinism_class": lock["determinism_class"]} if lock else {},
    )
