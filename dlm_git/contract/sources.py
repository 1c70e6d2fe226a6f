"""`sources.root` and `sections.order`: the document's `training.sources` re-expanded and
its sections re-derived, against what `manifest.json` records.

Invariants:
- One rule compares a record with a re-expansion: `doc.compare.compare_sources`, on the
  document as its revision holds it (materialized by `DocAt.materialize`; the work tree
  in place). Sources outside the repository are read only in the work tree (this
  machine's files are its inputs); a commit or the index holds no copy of them, so
  there they are absent, naming the paths, while every file inside the repository and
  the record's own root are still compared and a difference there fails.
- A recorded file whose name under its directive's root today's path rule refuses (an
  older dlm-git took it; `doc.walk.recorded_refusal`) cannot be read either: absent,
  naming it with the rule's reason, never a difference (nothing was compared). So is a
  directive whose own repository path the rule refuses (an older dlm-git trained on it;
  no commit's copy can be written out): it is named and not read
  (`expand_sources(checking=True)`), its recorded files are not compared, and every
  other directive and document is judged as usual.
- The document parser (pydantic) is imported only when sources are re-expanded; the
  commit-time shortcuts (`outside_absent`, `sections_from_head`) import nothing heavy.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.contract.outcome import CheckAbsent, CheckFailed, Checks, expect_equal, failed
from dlm_git.contract.records import kind_word
from dlm_git.doc.peek import outside_sources
from dlm_git.docat import DocAt
from dlm_git.errors import DlmGitError
from dlm_git.layout import MANIFEST_NAME

if TYPE_CHECKING:
    from dlm_git.doc.compare import SourcesComparison


def recorded_files(manifest: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(f["relpath"], f["sha256"], f["size"]) for f in manifest["sources"]["files"]]


def sources_checks(checks: Checks, doc: DocAt, manifest: dict[str, Any], work: Path) -> None:
    """Re-expand `doc`'s sources (written under `work` unless it is the work tree's) and
    compare them and its sections with manifest `manifest`."""
    from dlm_git.doc.compare import compare_sources
    from dlm_git.doc.parser import parse_document
    from dlm_git.doc.sources import Outside, expand_sources

    placed = doc.materialize(work)
    if placed is None:
        checks.add("sources.root", False, "the document has no single .dlm to expand")
        checks.add("sections.order", False, "sources could not be expanded")
        return
    dlm_path, root = placed
    outside = Outside.READ if doc.reads_outside else Outside.SKIP
    try:
        parsed = parse_document(dlm_path)
        found = compare_sources(
            parsed, expand_sources(parsed, root, outside, checking=True), recorded_files(manifest)
        )
    except DlmGitError as exc:
        text = exc.one_line().replace(f"{work}/", f"{doc.tree.label}:")
        checks.items.append(failed("sources.root", f"the document does not load: {text}"))
        checks.add("sections.order", False, "sources could not be expanded")
        return
    checks.run("sources.root", lambda: _root(doc, manifest, found))
    checks.run("sections.order", lambda: _sections(manifest, found))


def _root(doc: DocAt, manifest: dict[str, Any], found: SourcesComparison) -> str:
    from dlm_git.manifest.records import sources_record

    recorded = recorded_files(manifest)
    if found.differs:
        raise CheckFailed(
            f"{kind_word(doc)}sources differ from those {MANIFEST_NAME} was trained on"
            f" ({found.describe(doc.rel)})"
        )
    root = sources_record(recorded).merkle_root
    expect_equal(
        "sources merkle root vs the manifest's files", manifest["sources"]["merkle_root"], root
    )
    old = f"; {found.legacy} recorded by their raw bytes (older record)" if found.legacy else ""
    unchecked = _unchecked(found)
    if unchecked:
        n = found.compared
        other = found.refused or found.refused_directives
        match = f"the other {n} match" if other else f"the {n} inside it match"
        raise CheckAbsent(f"{unchecked}; {match}{old}")
    return f"{len(recorded)} files, root {root[:16]}{old}"


def _unchecked(found: SourcesComparison) -> str:
    """Which recorded files were not compared, and why ("" when every one was)."""
    parts = []
    if found.unread:
        parts.append(
            f"{found.unread_files} files from outside the repository"
            f" ({', '.join(found.unread)}) are in no commit and were not checked"
        )
    if found.refused:
        named = ", ".join(f"{s.relpath}: {s.reason}" for s in found.refused[:5])
        parts.append(
            f"{len(found.refused)} recorded files have names this dlm-git's path rule refuses"
            f" ({named}) and were not checked (rename them and train again)"
        )
    parts.extend(
        f"training.sources path '{d.path}' {d.reason}, a name this dlm-git's path rule"
        f" refuses: its files cannot be read out of a commit, and the {d.files} recorded"
        " under it were not checked (rename the directory and train again)"
        for d in found.refused_directives
    )
    return "; ".join(parts)


def _sections(manifest: dict[str, Any], found: SourcesComparison) -> str:
    recorded = manifest["section_ids"]
    if not found.sections_match(recorded):
        expected = [i for i in found.section_ids if i is not None]
        if len(expected) == len(found.section_ids) and sorted(expected) == sorted(recorded):
            raise CheckFailed("section order differs from the manifest")
        raise CheckFailed(
            f"section ids differ from the manifest ({len(found.section_ids)} expected, "
            f"{len(recorded)} recorded)"
        )
    unread = found.section_ids.count(None)
    if unread:
        raise CheckAbsent(
            f"{unread} section ids of files not read here cannot be recomputed;"
            f" the other {len(recorded) - unread} are in order"
        )
    return f"{len(recorded)} sections in order"


def sources_without_directives(checks: Checks, doc: DocAt, manifest: dict[str, Any]) -> bool:
    """Both checks for a document with no `training.sources` at all, without the parser:
    its expansion is empty (the root of the empty tree) and its sections are its own.
    False when it has directives (the caller re-expands)."""
    from dlm_git.doc.body import section_ids
    from dlm_git.merkle import merkle_root

    if doc.source_dirs or outside_sources(doc.rel, doc.dlm or b""):
        return False
    ids = section_ids(doc.dlm or b"")
    if ids is None:
        return False  # the parser says what is wrong with it
    files, root = manifest["sources"]["files"], manifest["sources"]["merkle_root"]
    same = not files and root == merkle_root([])
    what = f"{kind_word(doc)}sources differ from those {MANIFEST_NAME} was trained on"
    checks.add("sources.root", same, "no sources, root of the empty tree" if same else what)
    _order(checks, manifest["section_ids"], ids)
    return True


def _order(checks: Checks, recorded: list[str], expected: list[str]) -> None:
    if recorded == expected:
        checks.add("sections.order", True, f"{len(recorded)} sections in order")
    elif sorted(recorded) == sorted(expected):
        checks.add("sections.order", False, "section order differs from the manifest")
    else:
        checks.add(
            "sections.order",
            False,
            f"section ids differ from the manifest ({len(expected)} expected,"
            f" {len(recorded)} recorded)",
        )


def outside_absent(checks: Checks, doc: DocAt) -> None:
    """`sources.root` absent for the directives outside the repository, named from the
    `.dlm` alone (no re-expansion): for a commit being made whose sources are HEAD's."""
    outside = outside_sources(doc.rel, doc.dlm or b"")
    if outside:
        checks.absent(
            "sources.root",
            f"training.sources outside the repository ({', '.join(outside)}) are in no"
            " commit and were not checked",
        )


def sections_from_head(
    checks: Checks, doc: DocAt, manifest: dict[str, Any], head: DocAt, head_record: dict[str, Any]
) -> bool:
    """`sections.order` for a commit being made whose sources are HEAD's (`sources.root`
    not re-run): the staged `.dlm`'s own section ids, then the sources' ids as HEAD's
    record has them after HEAD's own sections. False when that cannot be read (the
    caller re-expands instead)."""
    from dlm_git.doc.body import section_ids

    mine, theirs = section_ids(doc.dlm or b""), section_ids(head.dlm or b"")
    head_ids = head_record.get("section_ids")
    if mine is None or theirs is None or not isinstance(head_ids, list):
        return False
    if len(head_ids) < len(theirs) or head_ids[: len(theirs)] != theirs:
        return False  # HEAD's record is not what this rule expects: judge it in full
    _order(checks, manifest["section_ids"], mine + head_ids[len(theirs) :])
    return True
