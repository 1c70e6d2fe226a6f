"""Git access through git's own plumbing commands: the one place dlm-git talks to git.

This package is that one place, and its names below are its API (callers write
`from dlm_git import gitio` and `gitio.<name>`). The rooms, each stating its invariant:
`process` (every git child and its environment), `repo` (work tree, git directory,
configuration), `listing` (what the index and a tree hold), `objects` (objects by id
through `cat-file --batch`), `files` (a commit's files read and written out), `history`
(commits, parents, a path's changes).

Invariants of the whole:
- Plain `git` subprocesses started in one place (`process`), so `GIT_INDEX_FILE` (which
  git sets inside hooks) and `GIT_DIR` are honoured exactly as git does.
- A file name never travels on a line: paths are listed NUL-terminated, given as literal
  pathspecs, and blobs are read by *object id*, never by `<rev>:<path>` name. A name
  holding a newline, a carriage return or `:0:` cannot split a request or be read as
  another object: every answer belongs to the path it was asked for.
- One parser per git output format: `<meta> TAB <path> NUL` listings (`ls-tree -z`,
  `ls-files -s -z`), cat-file's batch answers, raw tree and commit objects.
- git answers about the objects themselves, never about a rewriting of them: every git
  child process runs in `child_env()`, with replace refs (`refs/replace/*`, `git replace
  --graft`) and grafts (`info/grafts`, `GIT_GRAFT_FILE`) switched off. They change the
  trees, blobs and parents git returns for an object id without changing the id, and can
  arrive with a fetch, so a verdict reached through them would be remembered for a
  commit whose own objects were never judged. What the auditor's environment and
  repository configure is honoured (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, which
  git sets inside hooks; the object directories and alternates; `GIT_CONFIG_*`):
  none of it travels with a commit, and an object directory only holds objects under
  their own ids. Pathspec modes git refuses beside `--literal-pathspecs` are dropped
  from the environment (`CLEARED`).
- Nothing here imports anything heavy: the hooks use it. `history` (commits and a path's
  changes, which no hook asks about) is imported on first use of one of its names
  (`LAZY`), so a hook's start never pays for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dlm_git.gitio.files import CommitFiles, materialize
from dlm_git.gitio.listing import (
    SUBMODULE_MODE,
    SYMLINK_MODE,
    index_entries,
    ls_files,
    ls_index,
    object_ids,
    tree_entries,
    worktree_files,
)
from dlm_git.gitio.objects import BlobReader, cat_files, parse_tree, read_blobs, read_objects
from dlm_git.gitio.process import (
    CLEARED,
    LITERAL,
    NO_GRAFT_FILE,
    REWRITES_OFF,
    GitError,
    child_env,
    git,
)
from dlm_git.gitio.repo import (
    config_bool,
    config_get,
    config_get_all,
    env_flag,
    git_path,
    hooks_path,
    resolve_commit,
    staged_paths,
    toplevel,
    toplevel_and_head,
)

if TYPE_CHECKING:
    from dlm_git.gitio.history import (
        CommitInfo,
        PathCommit,
        all_commits,
        commit_info,
        first_parent,
        path_history,
    )
else:

    def __getattr__(name: str) -> object:
        """A `LAZY` name, imported from its room when first asked (hidden from the type
        checker, which reads the imports above: a misspelt name stays an error). A room
        that fails to import raises `ImportError` naming the cause: an `AttributeError`
        out of its import would read as "no such name" (`hasattr` False, `from gitio
        import` "cannot import name") and the cause would be lost."""
        room = LAZY.get(name)
        if room is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(room)
        except AttributeError as exc:
            raise ImportError(f"importing {room} failed: {exc}", name=room) from exc
        value = getattr(module, name)
        globals()[name] = value  # asked once: later lookups find it directly
        return value


LAZY = {
    name: "dlm_git.gitio.history"
    for name in (
        "CommitInfo",
        "PathCommit",
        "all_commits",
        "commit_info",
        "first_parent",
        "path_history",
    )
}
"""Names of the API imported from their room on first use (module `__getattr__`)."""


__all__ = [
    "CLEARED",
    "LITERAL",
    "NO_GRAFT_FILE",
    "REWRITES_OFF",
    "SUBMODULE_MODE",
    "SYMLINK_MODE",
    "BlobReader",
    "CommitFiles",
    "CommitInfo",
    "GitError",
    "PathCommit",
    "all_commits",
    "cat_files",
    "child_env",
    "commit_info",
    "config_bool",
    "config_get",
    "config_get_all",
    "env_flag",
    "first_parent",
    "git",
    "git_path",
    "hooks_path",
    "index_entries",
    "ls_files",
    "ls_index",
    "materialize",
    "object_ids",
    "parse_tree",
    "path_history",
    "read_blobs",
    "read_objects",
    "resolve_commit",
    "staged_paths",
    "toplevel",
    "toplevel_and_head",
    "tree_entries",
    "worktree_files",
]
