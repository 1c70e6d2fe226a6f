"""Load a document with everything derived from it: parsed body, expanded sources, layout.

`LoadedDocument.rows` is the ordered list of sections training sees: the document's own
sections in file order, then source files in sorted relpath order. The document and its
text sources are hashed and parsed in their canonical form (CRLF as LF), so an LF and a
CRLF checkout load the same rows and record the same digests. `outside` says what happens
to sources outside the repository (`doc.sources.Outside`: read by default; refused when
the document was materialised from a commit to be trained again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlm_git.doc.errors import location
from dlm_git.doc.parser import Document, parse_document, value_position
from dlm_git.doc.sections import Section
from dlm_git.doc.sources import ExpandedSources, Outside, expand_sources
from dlm_git.layout import DocLayout, find_document, repo_root_of


@dataclass(frozen=True)
class LoadedDocument:
    doc: Document
    sources: ExpandedSources
    layout: DocLayout
    repo_root: Path

    @property
    def rows(self) -> tuple[Section, ...]:
        return self.doc.sections + self.sources.sections()

    @property
    def base_model_at(self) -> str:
        """`path:line:col` of the `base_model` value (`path:1` when the default is used):
        the subject of every error about the base this document names."""
        line, col = value_position(self.doc.frontmatter_text, "base_model") or (1, None)
        return location(self.doc.path, line, col)

    @property
    def section_ids(self) -> list[str]:
        """The ids of `rows`, without building the source files' sections."""
        return [s.section_id for s in self.doc.sections] + [
            f.section_id for f in self.sources.files
        ]


def load_document(target: Path, outside: Outside = Outside.READ) -> LoadedDocument:
    path = find_document(Path(target))
    doc = parse_document(path)
    root = repo_root_of(path)
    sources = expand_sources(doc, root, outside)
    return LoadedDocument(doc=doc, sources=sources, layout=DocLayout(path), repo_root=root)
