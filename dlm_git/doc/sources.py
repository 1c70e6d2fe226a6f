"""Expand `training.sources` directives into source-file sections (a record is compared
with an expansion by `doc.compare`).

Invariants:
- Each directive is resolved here (its path, `~`, the repository's boundary, the policy)
  and walked by `doc.walk` (which files it takes and skips, and why; how each is read
  and hashed). Files are in directive order, each directive's in sorted relpath order;
  a file an earlier directive took is skipped by a later one.
- Under `sources_policy: strict` (the default) a directive that resolves outside the
  repository is refused. Where a path points is one rule (`doc.peek.leaves_repository`):
  absolute and `~` paths are outside (on one machine only), so are `..` past the root.
- A file's relpath is its directive's path as written, normalised (`peek.directive_root`),
  joined with the file's path under it: the same wherever the document sits, for a file
  outside the repository too (`~` is expanded to read, never in the relpath).
- Outside files are read only where this machine's files are the inputs (`Outside.READ`:
  train, `verify --worktree`). Checking a commit (`Outside.SKIP`: verify, the hooks)
  reads none and says which directives it did not read; training from a commit
  (`Outside.REFUSE`: replay) refuses them.
- Symbolic links are never followed, in train, the hooks and verify alike: a directive
  whose path goes through a symlink is refused (the walk skips the links it finds).
- A directive inside the repository whose repository path (what git would write out of
  a commit) the one path rule refuses (`dlm_git.paths`: a backslash, a leading drive
  `C:`, a `.git` component) is refused outright (`_root_refusal`), so no commit dlm-git
  makes records one: verify could never read its files back. A record being checked
  (`checking`: verify) that holds one, made by an older dlm-git, has it named and not
  read (`DirectiveResult.refused`), never an error: its files are not compared.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import Document, key_line
from dlm_git.doc.peek import directive_root, leaves_repository
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section
from dlm_git.doc.walk import SkippedFile, SourceFile, walk_directive
from dlm_git.layout import DocLayout, repo_root_of
from dlm_git.paths import problem


@dataclass(frozen=True)
class DirectiveResult:
    index: int
    path: str
    taken: int
    skipped: int
    root: str = ""
    """What its files' relpaths start with (`peek.directive_root`)."""
    outside: bool = False
    """It names a place outside the repository (`peek.leaves_repository`)."""
    read: bool = True
    """False: not read (outside under `Outside.SKIP`, or `refused`); no files of its."""
    refused: str = ""
    """Why the path rule refuses its repository path (`_root_refusal`; only while a record
    is checked: elsewhere such a directive is an error). Not read."""


class Outside(Enum):
    """What an expansion does with a directive outside the repository (permissive policy)."""

    READ = "read"
    """Read it: this machine's files are the inputs (train, `verify --worktree`)."""
    SKIP = "skip"
    """Read nothing there (checking a commit: verify, the hooks). No commit holds those
    files, and what this machine has there is not what the commit was trained on."""
    REFUSE = "refuse"
    """Refuse the document (training from a commit: replay): it cannot be the commit's."""


RecordedSource = tuple[str, str, int]
"""One file as a manifest records it: relpath, sha256, size (in expansion order)."""


@dataclass(frozen=True)
class ExpandedSources:
    files: tuple[SourceFile, ...]
    skipped: tuple[SkippedFile, ...]
    directives: tuple[DirectiveResult, ...]
    doc_rel: str = "."
    """The document's directory relative to the repository root (POSIX)."""

    def sections(self) -> tuple[Section, ...]:
        return tuple(f.section() for f in self.files)

    def recorded(self) -> list[RecordedSource]:
        """What a manifest records of these files (canonical sha256 and size)."""
        return [(f.relpath, f.sha256, f.size) for f in self.files]

    @property
    def unread(self) -> tuple[DirectiveResult, ...]:
        """Directives outside the repository that were not read (`Outside.SKIP`)."""
        return tuple(d for d in self.directives if d.outside and not d.read)

    @property
    def refused(self) -> tuple[DirectiveResult, ...]:
        """Directives whose repository path the path rule refuses (`_root_refusal`)."""
        return tuple(d for d in self.directives if d.refused)


def expand_sources(
    doc: Document,
    repo_root: Path | None = None,
    outside: Outside = Outside.READ,
    *,
    checking: bool = False,
) -> ExpandedSources:
    """`doc`'s directives expanded in order (see the invariants). `checking`: a record is
    being checked (verify), so a directive whose path the rule refuses is named and not
    read (`DirectiveResult.refused`) rather than refused."""
    training = doc.frontmatter.training
    root = (repo_root or repo_root_of(doc.path)).resolve()
    doc_dir = doc.path.parent.resolve()
    doc_rel = Path(os.path.relpath(doc_dir, root)).as_posix()
    outputs = {os.path.realpath(p) for p in DocLayout(doc_dir / doc.path.name).outputs()}
    outputs.add(os.path.realpath(doc.path))
    files: list[SourceFile] = []
    skipped: list[SkippedFile] = []
    directives: list[DirectiveResult] = []
    seen: dict[str, int] = {}
    for index, spec in enumerate(training.sources):
        unread = _not_read(doc, index, doc_rel, outside, checking)
        if unread is not None:
            directives.append(unread)
            continue
        taken, skips = _expand_one(
            doc, index, spec, doc_dir, root, training.sources_policy == "strict", outputs
        )
        kept = _first_taken(taken, skips, seen)
        if index + 1 < len(training.sources):
            seen.update((f.relpath, index) for f in kept)
        files.extend(kept)
        skipped.extend(skips)
        out = leaves_repository(doc_rel, spec.path)
        root_of = directive_root(spec.path)
        directives.append(DirectiveResult(index, spec.path, len(kept), len(skips), root_of, out))
    return ExpandedSources(tuple(files), tuple(skipped), tuple(directives), doc_rel)


def _first_taken(
    taken: list[SourceFile], skips: list[SkippedFile], seen: dict[str, int]
) -> list[SourceFile]:
    """`taken` less the files an earlier directive took (`seen`: relpath -> its index),
    each of those added to `skips`: a file two directives share is the first one's."""
    if not seen:
        return taken
    kept = []
    for f in taken:
        if f.relpath in seen:
            skips.append(SkippedFile(f.relpath, f"already included by sources[{seen[f.relpath]}]"))
        else:
            kept.append(f)
    return kept


def _not_read(
    doc: Document, index: int, doc_rel: str, outside: Outside, checking: bool
) -> DirectiveResult | None:
    """Directive `index`'s result when it is not read here: outside the repository under
    `Outside.SKIP`, or a repository path the path rule refuses while a record is checked.
    None when it is read; a `SourcesError` when it must not be read at all."""
    training = doc.frontmatter.training
    spec = training.sources[index]
    root = directive_root(spec.path)
    if leaves_repository(doc_rel, spec.path):
        _check_outside(doc, index, spec, training.sources_policy == "strict", outside)
        if outside is Outside.SKIP:
            return DirectiveResult(index, spec.path, 0, 0, root, outside=True, read=False)
        return None
    why = _root_refusal(doc_rel, spec.path)
    if why is None:
        return None
    if not checking:
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' {why}: the path rule"
            " (dlm_git.paths) refuses that name, so verify could never read its files back"
            " out of a commit",
            line=_path_line(doc, index),
            hint="rename it: a path with no backslash, no leading drive `C:` and no `.git`"
            " component",
        )
    return DirectiveResult(index, spec.path, 0, 0, root, read=False, refused=why)


def _root_refusal(doc_rel: str, path: str) -> str | None:
    """Why the path rule (`paths.problem`) refuses the repository path of directive `path`
    (inside the repository): the path git would write out of a commit, the document's
    directory `doc_rel` joined and normalised (`../shared` is `shared`). None when the
    rule takes it; the repository's root itself is no name."""
    repo_path = posixpath.normpath(posixpath.join(doc_rel, path))
    bad = None if repo_path == "." else problem(repo_path)
    return None if bad is None else f"names '{repo_path}' in the repository, which {bad.value}"


def _check_outside(
    doc: Document, index: int, spec: SourceSpec, strict: bool, outside: Outside
) -> None:
    """Refuse a directive outside the repository under the strict policy, or when the
    document is trained from a commit (`Outside.REFUSE`)."""
    where = f"training.sources[{index}].path '{spec.path}'"
    kind = (
        "a home directory (`~`)"
        if spec.path.startswith("~")
        else "an absolute path"
        if spec.path.startswith("/")
        else "`..` past the repository's root"
    )
    if strict:
        raise SourcesError(
            doc.path,
            f"{where} resolves outside the repository ({kind})",
            line=_path_line(doc, index),
            hint="keep sources inside the repository, named relative to the document's"
            " directory, or set training.sources_policy: permissive",
        )
    if outside is Outside.REFUSE:
        raise SourcesError(
            doc.path,
            f"{where} is outside the repository ({kind}): no commit holds those files,"
            " so this document cannot be trained from a commit",
            line=_path_line(doc, index),
            hint="keep sources inside the repository to have them replayed and verified",
        )


def _path_line(doc: Document, index: int) -> int | None:
    """The line of `training.sources[index].path` (for an error: it parses the YAML again)."""
    return key_line(doc.frontmatter_text, ("training", "sources", index, "path"))


def _directive_target(doc: Document, index: int, path: str) -> str:
    """The directive's path to read: `~` and `~user` expanded (to a home directory)."""
    if not path.startswith("~"):
        return path
    expanded = os.path.expanduser(path)
    if expanded.startswith("~"):
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{path}': '{path.split('/')[0]}' is not a home"
            " directory here",
            line=_path_line(doc, index),
            hint="`~` means a home directory; name a directory called ~... as ./~...",
        )
    return expanded


def _through_link(path: str, root: str) -> bool:
    """Whether `path` (normalised) or any directory between `root` and it is a symlink."""
    rel = os.path.relpath(path, root)
    if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
        return os.path.islink(path)
    probe = root
    for part in rel.split(os.sep):
        probe = os.path.join(probe, part)
        if os.path.islink(probe):
            return True
    return False


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _expand_one(
    doc: Document,
    index: int,
    spec: SourceSpec,
    doc_dir: Path,
    repo_root: Path,
    strict: bool,
    outputs: set[str],
) -> tuple[list[SourceFile], list[SkippedFile]]:
    """Directive `index` resolved (refused with the reason where it cannot be walked)
    and walked (`walk.walk_directive`)."""
    base = os.path.normpath(os.path.join(doc_dir, _directive_target(doc, index, spec.path)))
    resolved = os.path.realpath(base)
    refused = _unwalkable(base, resolved, str(repo_root), strict)
    if refused is not None:
        what, hint = refused
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' {what}",
            line=_path_line(doc, index),
            hint=hint,
        )
    return walk_directive(spec, base, resolved, directive_root(spec.path), outputs)


def _unwalkable(base: str, resolved: str, root: str, strict: bool) -> tuple[str, str] | None:
    """Why a directive's path `base` (resolved: `resolved`) cannot be walked, and the
    hint; None when it can."""
    if _through_link(base, root):
        return (
            "goes through a symbolic link",
            "symbolic links are not followed: name the real directory or file",
        )
    if strict and not _inside(resolved, root):
        return (
            "resolves outside the repository",
            "keep sources inside the repository, or set training.sources_policy: permissive",
        )
    if not os.path.exists(resolved):
        return "does not exist", "fix the path (it is relative to the document's directory)"
    return None
