"""Where a document's base is on this machine, for the hash level (bases are
machine-local: never in a commit, looked up beside the real work tree).

Invariant: a base is found, never fetched; a builtin base is built only when the caller
allows it (not in the git hooks, not on a core install: then None, and the checks that
need it are absent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git.base.spec import REV_RE, parse_base_spec
from dlm_git.errors import missing_stack_module
from dlm_git.layout import PIPELINE_TINY_DIR

if TYPE_CHECKING:
    from dlm_git.base.resolve import LocatedBase

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
    else the base cache if it holds the build `revision` names (the record's
    `base.revision`: found by its spec file's hash, so a core install without torch,
    transformers or tokenizers finds it too) or the current spec, else a fresh build into
    the cache. Only where no build is allowed (`build=False`: the git hooks, on the
    committer's own work tree) is the repository's pipeline build (`bases/tiny`) looked
    at: a verifier never takes weights from the work tree, which a checked-out commit or
    a `dvc pull` of its outputs may have filled (found by its spec file alone, its
    weights would set the bar the base identity is judged by)."""
    from dlm_git.base.errors import BaseModelError, BaseNotAvailableError
    from dlm_git.base.tiny import (
        built_revision,
        check_tiny_dir,
        default_base_cache,
        ensure_tiny_base,
    )
    from dlm_git.base.tiny import tiny_dir as cached_tiny

    try:
        if parse_base_spec(spec).kind != "builtin":
            return _located_dir(spec, doc_dir, repo_root, revision)
        # builtin:tiny is found by the revision its record names first: the installed
        # libraries' spec (their package metadata) is read only when that build is not here
        work_tree = [] if build else [repo_root / PIPELINE_TINY_DIR]
        if revision is not None and TINY_REVISION_RE.match(revision):
            named = [tiny_dir] if tiny_dir is not None else []
            named += [default_base_cache() / revision, *work_tree]
            for candidate in named:
                if built_revision(candidate) == revision:
                    return candidate
        try:
            if tiny_dir is not None:
                check_tiny_dir(tiny_dir)
                return tiny_dir
            for candidate in (cached_tiny(), *work_tree):
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


def _located_dir(spec: str, doc_dir: Path, repo_root: Path, revision: str | None) -> Path | None:
    """A registry key's, a Hub snapshot's or a local directory's base (`locate_base`)."""
    from dlm_git.base.resolve import locate_base

    located = locate_base(spec, doc_dir, repo_root)
    if located.spec.registry_key is not None:
        return _recorded_snapshot(located, revision)
    return located.path if located.available else None


def _recorded_snapshot(located: LocatedBase, revision: str | None) -> Path | None:
    """A registry key's base at the revision the record names. The key's pinned revision
    may differ from the one an older dlm-git resolved (the cache's `refs/main`) and
    recorded: the record says which snapshot trained the adapter. Only a 40-hex name is
    looked up, beside the key's own snapshot."""
    if revision is None or revision == located.revision or located.path is None:
        return located.path if located.available else None
    if not REV_RE.fullmatch(revision):
        return None
    snapshot = located.path.parent / revision
    return snapshot if snapshot.is_dir() else None


def base_missing(spec: str, doc_dir: Path, repo_root: Path) -> str:
    """Why `locate_base_dir` found no base for `spec`, with where it looked: the Hugging
    Face cache directory and the setting that chose it, or the local directory."""
    from dlm_git.base.errors import BaseModelError
    from dlm_git.base.resolve import hf_cache_setting, locate_base

    try:
        located = locate_base(spec, doc_dir, repo_root)
    except BaseModelError as exc:
        return f"base {spec} cannot be used here: {exc.message}"
    if located.spec.kind == "builtin":
        return f"base {spec} is not built on this machine (the git hooks never build one)"
    where = located.note
    if located.spec.kind == "hf":
        root, setting = hf_cache_setting()
        where += f"; the cache root {root} comes from {setting}"
    return f"base {spec} is not available on this machine: {where}"
