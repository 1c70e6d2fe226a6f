"""Where a document's base is on this machine, for the hash level (bases are
machine-local: never in a commit, looked up beside the real work tree).

Invariant: a base is found, never fetched; a builtin base is built only when the caller
allows it (not in the git hooks, not on a core install: then None, and the checks that
need it are absent).
"""

from __future__ import annotations

import re
from pathlib import Path

from dlm_git.errors import missing_stack_module
from dlm_git.layout import PIPELINE_TINY_DIR

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
