"""A document's `training.sources` for tests: the directives as YAML, files put where a
test says, and what the expansion took and skipped (with its reasons)."""

from __future__ import annotations

from pathlib import Path

from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.sources import ExpandedSources

OUTPUTS = "the document itself or one of its outputs"
"""The skip reason of a document's own files (`dlm_git.doc.sources`)."""


def sources_yaml(*directives: str, policy: str | None = None) -> str:
    """`training:` YAML; each directive is the YAML body of one list item (`path: ...`)."""
    lines = ["training:"]
    if policy:
        lines.append(f"  sources_policy: {policy}")
    lines.append("  sources:")
    for d in directives:
        first, *rest = d.strip("\n").split("\n")
        lines.append(f"    - {first}")
        lines.extend(f"      {r}" for r in rest)
    return "\n".join(lines)


def put(root: Path, rel: str, data: str | bytes = "") -> Path:
    """`<root>/<rel>` holding `data` (text as UTF-8), its directories made."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def load(doc: Path) -> LoadedDocument:
    return load_document(doc)


def expand(doc: Path) -> ExpandedSources:
    return load(doc).sources


def taken(doc: Path) -> list[str]:
    """The relpaths the expansion took, in order."""
    return [f.relpath for f in expand(doc).files]


def skips(doc: Path) -> dict[str, str]:
    """relpath -> the reason it was skipped."""
    return {s.relpath: s.reason for s in expand(doc).skipped}
