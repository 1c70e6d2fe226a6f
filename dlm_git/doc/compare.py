"""The one comparison of a manifest's recorded source files with the same document's
sources expanded again (`doc.sources.expand_sources`): the hooks and verify judge a
record by it alone.

Invariants:
- A recorded file matches an expanded one of the same relpath in its canonical form, or
  in its raw form for records from before the line-end rule (`hashing.TextForm.RAW`).
- A recorded file is compared unless it cannot be read here: one of an unread
  directive's (outside the repository under `Outside.SKIP`, or under a root the path
  rule refuses, `DirectiveResult.refused`), or one whose name under a directive's root
  today's path rule refuses (`walk.recorded_refusal`: an older dlm-git took it; no
  checkout holds it now). Those are named, never a difference and never a match, and
  their section ids are not known (None). A file the expansion took is always compared.
- Every other recorded file must be an expanded one, in order: a changed, new or gone
  file, or another order, is a difference (`SourcesComparison.differs`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from dlm_git.doc.parser import Document
from dlm_git.doc.peek import leaves_repository
from dlm_git.doc.sources import DirectiveResult, ExpandedSources, RecordedSource
from dlm_git.doc.walk import SkippedFile, SourceFile, recorded_refusal
from dlm_git.hashing import TextForm


@dataclass(frozen=True)
class RefusedDirective:
    """A directive of a checked record whose path the path rule refuses: not read."""

    path: str
    """As written."""
    reason: str
    """Why, in words (`DirectiveResult.refused`)."""
    files: int
    """Recorded files under its root: not compared."""


@dataclass(frozen=True)
class SourcesComparison:
    """A recorded file list against a re-expansion (`compare_sources`). Recorded files that
    cannot be read here (`unread_files`, `refused`, `refused_directives`) are not
    compared."""

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
    refused_directives: tuple[RefusedDirective, ...]
    """Directives not read for the path rule (`DirectiveResult.refused`), each with how
    many recorded files lie under its root: not compared."""
    section_ids: tuple[str | None, ...]
    """The ids the record's `section_ids` must be: None where a file was not read."""
    compared: int
    """Recorded files compared (all but those that cannot be read here)."""

    @property
    def differs(self) -> bool:
        return bool(self.changed or self.new or self.gone or self.reordered)

    def describe(self, doc_rel: str = ".") -> str:
        """The differences, each file by the path `git status` shows for it (`doc_rel`: the
        document directory's repository path; a file outside the repository as recorded)."""
        parts = [
            f"{what}: {_named(names, doc_rel)}"
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


def _named(relpaths: Sequence[str], doc_rel: str, shown: int = 5) -> str:
    names = [
        rel if leaves_repository(doc_rel, rel) else posixpath.normpath(posixpath.join(doc_rel, rel))
        for rel in relpaths[:shown]
    ]
    more = f" and {len(relpaths) - shown} more" if len(relpaths) > shown else ""
    return ", ".join(names) + more


def compare_sources(
    doc: Document, expanded: ExpandedSources, recorded: Sequence[RecordedSource]
) -> SourcesComparison:
    """Compare what a manifest records (`recorded`) with `expanded`, the same document's
    sources expanded again. The recorded files that cannot be read here (`_excused`) are
    not compared and their section ids are not known; every other recorded file must be
    an expanded one, in order."""
    actual = {f.relpath: f for f in expanded.files}
    outside, blocked, refused = _excused(expanded, recorded, actual)
    skip = [
        out or by is not None or rel in refused
        for (rel, _, _), out, by in zip(recorded, outside, blocked, strict=True)
    ]
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
    ids = [s.section_id for s in doc.sections]
    by_record = bool(expanded.unread or refused or expanded.refused)
    return SourcesComparison(
        changed=tuple(changed),
        new=tuple(new),
        gone=tuple(gone),
        reordered=order and not (new or gone),
        legacy=legacy,
        unread=tuple(d.path for d in expanded.unread),
        unread_files=sum(outside),
        refused=tuple(SkippedFile(rel, why) for rel, why in refused.items()),
        refused_directives=tuple(
            RefusedDirective(d.path, d.refused, blocked.count(i))
            for i, d in enumerate(expanded.refused)
        ),
        section_ids=(*ids, *_source_ids(expanded, recorded, skip if by_record else None)),
        compared=len(inside),
    )


def _excused(
    expanded: ExpandedSources, recorded: Sequence[RecordedSource], actual: dict[str, SourceFile]
) -> tuple[list[bool], list[int | None], dict[str, str]]:
    """Which recorded files cannot be read here, none of them expanded (`actual`): (1)
    when directives outside the repository were not read (`Outside.SKIP`), each whose
    relpath leaves the repository (`peek.leaves_repository`: absolute, `~`, `..` past the
    root; also the relpaths older records computed from the document's directory) is
    taken as one of theirs; (2) the index in `expanded.refused` of the directive the path
    rule refused whose root holds it (`_blocked`); (3) relpath -> reason, for the others
    whose name under the root of a directive that was read today's walk skips for the
    path rule (`walk.recorded_refusal`): one an older dlm-git took and no checkout holds
    now."""
    unread = expanded.unread
    outside = [
        bool(unread) and rel not in actual and leaves_repository(expanded.doc_rel, rel)
        for rel, _, _ in recorded
    ]
    blocked = _blocked(recorded, outside, actual, expanded.refused)
    held = [out or by is not None for out, by in zip(outside, blocked, strict=True)]
    return outside, blocked, _refused(recorded, held, actual, expanded.directives)


def _source_ids(
    expanded: ExpandedSources, recorded: Sequence[RecordedSource], skip: list[bool] | None
) -> list[str | None]:
    """The sources' section ids the record must hold: the expansion's; or, where some
    recorded files are not compared (`skip`), where the record puts each file: None for
    one not compared, "" (no id) for one the expansion did not take."""
    if skip is None:
        return [f.section_id for f in expanded.files]
    actual = {f.relpath: f for f in expanded.files}
    return [
        None if out else actual[rel].section_id if rel in actual else ""
        for (rel, _, _), out in zip(recorded, skip, strict=True)
    ]


def _blocked(
    recorded: Sequence[RecordedSource],
    outside: list[bool],
    actual: dict[str, SourceFile],
    refused: Sequence[DirectiveResult],
) -> list[int | None]:
    """For each recorded file that is neither expanded nor taken as an unread outside
    directive's, the index in `refused` of the first refused directive whose root holds
    it (None for every other file)."""
    found: list[int | None] = []
    for (rel, _, _), out in zip(recorded, outside, strict=True):
        under = (i for i, d in enumerate(refused) if rel == d.root or rel.startswith(d.root + "/"))
        found.append(None if out or rel in actual else next(under, None))
    return found


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
