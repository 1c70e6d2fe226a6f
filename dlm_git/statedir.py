"""Where dlm-git keeps machine-local state: in the git directory, out of every commit's reach.

Invariants:
- One place decides it: `state_dir`. What dlm-git remembers on a machine (the token cache,
  fsck's stat record and quarantine, the pre-commit hook's hash cache, verify's verdicts)
  lives under `dlm-git/` in the repository's git directory, which no commit can create,
  replace or link (git checks out no `.git` path). A commit's files, a `.dlm-git` link
  among them, are never read or written as state.
- Per work tree (`git rev-parse --git-path dlm-git`: `.git/dlm-git`, or
  `.git/worktrees/<name>/dlm-git` in a linked worktree): what describes this work tree's
  files and DVC cache, i.e. fsck's record and quarantine, the hash cache, the verdicts.
  Shared by every work tree of the repository (`<git common dir>/dlm-git`): the token
  cache, whose entries are content-addressed and valid in any of them. In a repository's
  main work tree the two are one directory.
- Outside any git repository (git finds none from `root`, and `root` has no `.git`: a
  document trained in a plain directory): `<root>/.dlm-git`; there is no commit to reach
  it. A `.git` at `root` that git does not take for a repository is refused, never
  taken for "no repository".
- Asked of git once per work tree and process (`_ask`, kept in `_KNOWN`), in one `git
  rev-parse`, and only when state is first needed; or told (`learn`) by a caller whose
  own rev-parse in the work tree asked the same (`ASK`) beside its question (the
  pre-commit hook's).
- Defence in depth: no component of a state path below its anchor (the git directory; the
  root outside git) may be a symbolic link. `StateDirError` says which, in one line,
  before anything is read or written there.
- Clones made before this layout kept state in `<root>/.dlm-git/`. `adopt_legacy` moves
  an entry of it (the token cache) into its new place once, and only when `.dlm-git` and
  the entry are real directories that git does not track (what a commit brought is
  never adopted). The rest is not moved: the stat record and the hash cache are rebuilt
  by the next run, and old quarantines are the user's to inspect and delete.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dlm_git import gitio
from dlm_git.errors import DlmGitError

STATE_NAME = "dlm-git"
LEGACY_NAME = ".dlm-git"
"""The work-tree directory older versions kept state in (still ignored by templates)."""


class StateDirError(DlmGitError):
    """A state path that dlm-git refuses to use (a symbolic link on it, no git directory)."""


ASK = (("--git-path", STATE_NAME), ("--git-common-dir",))
"""What `git rev-parse` is asked for the state directories, one line each; a caller that
starts a rev-parse in the work tree anyway asks it there too and hands the answer over
(`learn`), so the state directories cost no git process of their own."""

Bases = tuple[tuple[Path, Path], tuple[Path, Path]]
"""((per-work-tree dir, its anchor), (shared dir, its anchor))."""

_KNOWN: dict[str, Bases] = {}
"""The bases of each work tree this process has used, asked (`_ask`) or told (`learn`)."""


def learn(root: Path, cwd: Path, answer: list[str]) -> None:
    """git's `answer` to `ASK`, asked in the directory `cwd`, for the work tree `root`
    (an answer of any other shape is not kept: `_ask` asks git itself)."""
    found = _from_answer(Path(cwd).absolute(), answer)
    if found is not None:
        _KNOWN[str(Path(root).absolute())] = found


def _from_answer(where: Path, lines: list[str]) -> Bases | None:
    """The bases from git's two lines (paths relative to `where`, where git ran)."""
    if len(lines) != len(ASK) or not all(lines):
        return None
    own, common = (p if p.is_absolute() else where / p for p in map(Path, lines))
    return (own, own.parent), (common / STATE_NAME, common)


def _ask(root: str) -> Bases:
    """The bases of the work tree `root`, asked of git."""
    top = Path(root)
    out = gitio.git(["rev-parse", *(a for q in ASK for a in q)], top, check=False)
    found = _from_answer(top, out.decode("utf-8", "surrogateescape").splitlines())
    if found is not None:
        return found
    if os.path.lexists(top / ".git"):
        raise StateDirError(
            str(top / ".git"),
            "git does not take it for a git directory",
            "run dlm-git in a working git repository",
        )
    legacy = top / LEGACY_NAME  # no repository: no commit can reach it
    return (legacy, top), (legacy, top)


def _base(root: Path, shared: bool) -> tuple[Path, Path]:
    key = str(Path(root).absolute())
    if key not in _KNOWN:
        _KNOWN[key] = _ask(key)
    own, common = _KNOWN[key]
    return common if shared else own


def state_dir(root: Path, *, shared: bool = False) -> Path:
    """The state directory of the work tree `root` (not created): its own, or with
    `shared` the one all work trees of the repository share."""
    return state_path(root, shared=shared)


def state_path(root: Path, *parts: str, shared: bool = False) -> Path:
    """`state_dir(root, shared=shared) / parts`, refused (`StateDirError`) when any
    existing component below its anchor is a symbolic link."""
    base, anchor = _base(root, shared)
    path = base.joinpath(*parts)
    _refuse_links(anchor, path)
    return path


def make_state_dir(root: Path, *parts: str, shared: bool = False) -> Path:
    """`state_path(...)` created as a directory (with its parents), every component a
    real directory."""
    path = state_path(root, *parts, shared=shared)
    path.mkdir(parents=True, exist_ok=True)
    _refuse_links(_base(root, shared)[1], path)  # a link made meanwhile
    return path


def _refuse_links(anchor: Path, path: Path) -> None:
    here = anchor
    for part in path.relative_to(anchor).parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return
        except NotADirectoryError:
            mode = 0
        if stat.S_ISLNK(mode):
            raise StateDirError(
                str(here),
                "is a symbolic link: dlm-git keeps machine-local state in real directories only",
                "remove the link; dlm-git makes the directory again",
            )
        if not stat.S_ISDIR(mode) and here != path:
            raise StateDirError(
                str(here),
                "is not a directory, yet dlm-git keeps state below it",
                "remove it; dlm-git makes the directory again",
            )


def adopt_legacy(root: Path, name: str, dest: Path) -> None:
    """Move `<root>/.dlm-git/<name>` to `dest` once (see the module invariant); a move
    that cannot be made (another file system, `dest` already there) leaves both alone."""
    old_dir = Path(root) / LEGACY_NAME
    old = old_dir / name
    if os.path.lexists(dest) or not (_real_dir(old_dir) and _real_dir(old)):
        return
    if gitio.ls_files([f"{LEGACY_NAME}/"], Path(root)):
        return  # a commit brought it: never taken for this machine's state
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(old, dest)
    except OSError:
        return


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
