"""Expand `training.sources` directives into source-file sections, and compare a recorded
file list with an expansion.

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
- `compare_sources` is the one comparison of a recorded file list with an expansion. A
  recorded file is compared unless it cannot be read here: one of an unread directive's
  (outside the repository), or one whose name under a directive's root today's path
  rule refuses (`walk.recorded_refusal`: an older dlm-git took it; no checkout holds it
  now). Those are named, never a difference and never a match.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import Document, key_line
from dlm_git.doc.peek import directive_root, leaves_repository
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section
from dlm_git.doc.walk import SkippedFile, SourceFile, recorded_refusal, walk_directive
from dlm_git.hashing import TextForm
from dlm_git.layout import DocLayout, repo_root_of


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
    """False: outside, and not read (`Outside.SKIP`); its files are not in `files`."""


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
        return tuple(d for d in self.directives if not d.read)


@dataclass(frozen=True)
class SourcesComparison:
    """A recorded file list against a re-expansion (`compare_sources`). Recorded files that
    cannot be read here (`unread_files`, `refused`) are not compared."""

    changed: tuple[str, ...]
    new: tuple[str, ...]
    """Expanded, not recorded."""
    gone: tuple[str, ...]
    """Recorded (and not one of those that cannot be read here), not expanded."""
    reordered: bool
    """Same files, another order (or a file recorded twice)."""
    legacy: int
    """Files whose record holds the raw bytes' digest (records from before the line-end
    rule, `hashing.TextForm.RAW`)."""
    unread: tuple[str, ...]
    """The unread directives' paths, as written."""
    unread_files: int
    """Recorded files taken as theirs: not compared."""
    refused: tuple[SkippedFile, ...]
    """Recorded files whose names under a directive's root today's path rule refuses
    (`walk.recorded_refusal`), with the reason: not compared."""
    section_ids: tuple[str | None, ...]
    """The ids the record's `section_ids` must be: None where a file was not read."""
    compared: int
    """Recorded files compared (all but those that cannot be read here)."""

    @property
    def differs(self) -> bool:
        return bool(self.changed or self.new or self.gone or self.reordered)

    def describe(self) -> str:
        parts = [
            f"{what}: {', '.join(names[:5])}"
            for what, names in (("changed", self.changed), ("new", self.new), ("gone", self.gone))
            if names
        ]
        if self.reordered:
            parts.append("the same files in another order, or one listed twice")
        return "; ".join(parts)

    def sections_match(self, recorded: Sequence[str]) -> bool:
        return len(recorded) == len(self.section_ids) and all(
            want is None or want == got
            for want, got in zip(self.section_ids, recorded, strict=True)
        )


def compare_sources(
    doc: Document, expanded: ExpandedSources, recorded: Sequence[RecordedSource]
) -> SourcesComparison:
    """Compare what a manifest records (`recorded`) with `expanded`, the same document's
    sources expanded again: the hooks and verify judge a record by this one rule. A file
    matches in its canonical form, or in its raw form for older records.

    When directives were not read (`Outside.SKIP`), a recorded file that is not one of the
    expanded files and whose relpath leaves the repository (`peek.leaves_repository`:
    absolute, `~`, `..` past the root; also the relpaths older records computed from the
    document's directory) is taken as one of theirs. One that is not expanded and whose
    name under the root of a directive that was read is one today's walk skips for the
    path rule (`walk.recorded_refusal`) is one an older dlm-git took and no checkout
    holds now. Neither is compared, and its section id is not known. Every other
    recorded file must be an expanded one, in order."""
    actual = {f.relpath: f for f in expanded.files}
    unread = expanded.unread
    outside = [
        bool(unread) and rel not in actual and leaves_repository(expanded.doc_rel, rel)
        for rel, _, _ in recorded
    ]
    refused = _refused(recorded, outside, actual, expanded.directives)
    skip = [out or rel in refused for (rel, _, _), out in zip(recorded, outside, strict=True)]
    inside = [entry for entry, out in zip(recorded, skip, strict=True) if not out]
    named = {rel for rel, _, _ in inside}
    changed: list[str] = []
    legacy = 0
    for rel, sha256, size in inside:
        form = actual[rel].digest.form_of(sha256, size) if rel in actual else None
        if rel in actual and form is None:
            changed.append(rel)
        legacy += form is TextForm.RAW
    new = [f.relpath for f in expanded.files if f.relpath not in named]
    gone = [rel for rel, _, _ in inside if rel not in actual]
    order = [rel for rel, _, _ in inside] != [f.relpath for f in expanded.files]
    ids: list[str | None] = [s.section_id for s in doc.sections]
    if unread or refused:  # where the record puts them; "" (no id) for a file not there
        ids += [
            None if out else actual[rel].section_id if rel in actual else ""
            for (rel, _, _), out in zip(recorded, skip, strict=True)
        ]
    else:
        ids += [f.section_id for f in expanded.files]
    return SourcesComparison(
        changed=tuple(changed),
        new=tuple(new),
        gone=tuple(gone),
        reordered=order and not (new or gone),
        legacy=legacy,
        unread=tuple(d.path for d in unread),
        unread_files=sum(outside),
        refused=tuple(SkippedFile(rel, why) for rel, why in refused.items()),
        section_ids=tuple(ids),
        compared=len(inside),
    )


def _refused(
    recorded: Sequence[RecordedSource],
    outside: list[bool],
    actual: dict[str, SourceFile],
    directives: Sequence[DirectiveResult],
) -> dict[str, str]:
    """relpath -> the path rule's reason, for each recorded file that is neither expanded
    nor taken as an unread directive's and whose name under the root of a directive that
    was read today's walk skips (`walk.recorded_refusal`), in record order."""
    roots = [d.root for d in directives if d.read]
    found: dict[str, str] = {}
    for (rel, _, _), out in zip(recorded, outside, strict=True):
        if out or rel in actual:
            continue
        reason = next(filter(None, (recorded_refusal(rel, root) for root in roots)), None)
        if reason is not None:
            found[rel] = reason
    return found


def expand_sources(
    doc: Document, repo_root: Path | None = None, outside: Outside = Outside.READ
) -> ExpandedSources:
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
        out = leaves_repository(doc_rel, spec.path)
        if out:
            _check_outside(doc, index, spec, training.sources_policy == "strict", outside)
            if outside is Outside.SKIP:
                directives.append(
                    DirectiveResult(index, spec.path, 0, 0, directive_root(spec.path), True, False)
                )
                continue
        taken, skips = _expand_one(
            doc, index, spec, doc_dir, root, training.sources_policy == "strict", outputs
        )
        kept = taken
        if seen:  # a file a directive shares with an earlier one is taken by the first
            kept = []
            for f in taken:
                if f.relpath in seen:
                    by = seen[f.relpath]
                    skips.append(SkippedFile(f.relpath, f"already included by sources[{by}]"))
                else:
                    kept.append(f)
        if index + 1 < len(training.sources):
            seen.update((f.relpath, index) for f in kept)
        files.extend(kept)
        skipped.extend(skips)
        directives.append(
            DirectiveResult(index, spec.path, len(kept), len(skips), directive_root(spec.path), out)
        )
    return ExpandedSources(tuple(files), tuple(skipped), tuple(directives), doc_rel)


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
