"""Expand `training.sources` directives into source-file sections.

Invariants:
- Files are taken in sorted POSIX relpath order (relative to the document's directory),
  so the expansion is independent of file creation order and of the file system.
- Matching is gitignore-style (pathspec), never hand-rolled globs: `include` patterns
  select, `exclude` patterns, the default excludes and a `.dlmignore` file at the
  directive's root reject.
- Every file that is looked at and not taken is recorded with the reason it was skipped.
- Under `sources_policy: strict` (the default) a directive, or a symlink found while
  walking it, that resolves outside the repository is refused / skipped.
- The document's own outputs (adapter/, dlm.lock, manifest.json, ...) are never sources.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pathspec

from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import Document, key_line, normalize_text
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section, source_section
from dlm_git.hashing import sha256_bytes
from dlm_git.layout import DocLayout, repo_root_of

IGNORE_FILE = ".dlmignore"
BINARY_SNIFF_BYTES = 1024
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git/",
    ".dvc/",
    ".venv/",
    "venv/",
    "__pycache__/",
    "node_modules/",
    ".dlm-git/",
    ".mypy_cache/",
    ".pytest_cache/",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    ".env",
    ".env.*",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".pypirc",
    IGNORE_FILE,
)
_DEFAULT_SPEC = pathspec.GitIgnoreSpec.from_lines(DEFAULT_EXCLUDES)


@dataclass(frozen=True)
class SourceFile:
    relpath: str
    """POSIX path relative to the document's directory (the row's identity)."""
    path: Path
    size: int
    sha256: str
    """sha256 of the file's raw bytes."""
    text: str
    """Normalized text (BOM stripped, LF)."""

    def section(self) -> Section:
        return source_section(self.relpath, self.text)


@dataclass(frozen=True)
class SkippedFile:
    relpath: str
    reason: str


@dataclass(frozen=True)
class DirectiveResult:
    index: int
    path: str
    taken: int
    skipped: int


@dataclass(frozen=True)
class ExpandedSources:
    files: tuple[SourceFile, ...]
    skipped: tuple[SkippedFile, ...]
    directives: tuple[DirectiveResult, ...]

    def sections(self) -> tuple[Section, ...]:
        return tuple(f.section() for f in self.files)


def expand_sources(doc: Document, repo_root: Path | None = None) -> ExpandedSources:
    training = doc.frontmatter.training
    root = (repo_root or repo_root_of(doc.path)).resolve()
    doc_dir = doc.path.parent.resolve()
    outputs = {p.resolve() for p in DocLayout(doc_dir / doc.path.name).outputs()}
    outputs.add(doc.path.resolve())
    files: list[SourceFile] = []
    skipped: list[SkippedFile] = []
    directives: list[DirectiveResult] = []
    seen: dict[str, int] = {}
    for index, spec in enumerate(training.sources):
        taken, skips = _expand_one(
            doc, index, spec, doc_dir, root, training.sources_policy == "strict", outputs
        )
        kept = []
        for f in taken:
            if f.relpath in seen:
                skips.append(
                    SkippedFile(f.relpath, f"already included by sources[{seen[f.relpath]}]")
                )
                continue
            seen[f.relpath] = index
            kept.append(f)
        files.extend(kept)
        skipped.extend(skips)
        directives.append(DirectiveResult(index, spec.path, len(kept), len(skips)))
    return ExpandedSources(tuple(files), tuple(skipped), tuple(directives))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _expand_one(
    doc: Document,
    index: int,
    spec: SourceSpec,
    doc_dir: Path,
    repo_root: Path,
    strict: bool,
    outputs: set[Path],
) -> tuple[list[SourceFile], list[SkippedFile]]:
    line = key_line(doc.frontmatter_text, ("training", "sources", index, "path"))
    base = Path(os.path.normpath(doc_dir / spec.path))
    base_rel = PurePosixPath(Path(os.path.relpath(base, doc_dir)).as_posix())
    resolved = base.resolve()
    if strict and not _inside(resolved, repo_root):
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' resolves outside the repository",
            line=line,
            hint="keep sources inside the repository, or set training.sources_policy: permissive",
        )
    if not resolved.exists():
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' does not exist",
            line=line,
            hint="fix the path (it is relative to the document's directory)",
        )
    if resolved.is_file():
        candidates = [(PurePosixPath(base.name), base)]
        base_rel = base_rel.parent
        ignore = None
    else:
        ignore_path = base / IGNORE_FILE
        ignore = (
            pathspec.GitIgnoreSpec.from_lines(ignore_path.read_text("utf-8").splitlines())
            if ignore_path.is_file()
            else None
        )
        candidates = []
    include = pathspec.GitIgnoreSpec.from_lines(spec.include)
    exclude = pathspec.GitIgnoreSpec.from_lines(spec.exclude)
    skipped: list[SkippedFile] = []

    def rel_of(rel: PurePosixPath) -> str:
        return PurePosixPath(os.path.normpath(base_rel / rel)).as_posix()

    if resolved.is_dir():
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            here = Path(dirpath)
            keep_dirs = []
            for name in dirnames:
                rel = PurePosixPath((here / name).relative_to(base).as_posix())
                reason = _dir_reason(rel, here / name, ignore, exclude, outputs)
                if reason is None:
                    keep_dirs.append(name)
                else:
                    skipped.append(SkippedFile(rel_of(rel) + "/", reason))
            dirnames[:] = keep_dirs
            for name in filenames:
                full = here / name
                candidates.append((PurePosixPath(full.relative_to(base).as_posix()), full))
    candidates.sort(key=lambda item: item[0].as_posix())

    files: list[SourceFile] = []
    for rel, full in candidates:
        relpath = rel_of(rel)
        reason = _file_reason(rel, full, include, exclude, ignore, outputs, repo_root, strict)
        if reason is None and len(files) >= spec.max_files:
            reason = f"beyond max_files ({spec.max_files})"
        if reason is None:
            size = full.stat().st_size
            if size > spec.max_bytes_per_file:
                reason = f"over max_bytes_per_file ({size} > {spec.max_bytes_per_file} bytes)"
        if reason is not None:
            skipped.append(SkippedFile(relpath, reason))
            continue
        data = full.read_bytes()
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            skipped.append(SkippedFile(relpath, "binary (NUL byte in the first KiB)"))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(SkippedFile(relpath, "invalid UTF-8"))
            continue
        files.append(SourceFile(relpath, full, len(data), sha256_bytes(data), normalize_text(text)))
    return files, skipped


def _dir_reason(
    rel: PurePosixPath,
    full: Path,
    ignore: pathspec.GitIgnoreSpec | None,
    exclude: pathspec.GitIgnoreSpec,
    outputs: set[Path],
) -> str | None:
    probe = rel.as_posix() + "/"
    if full.is_symlink():
        return "symlinked directory (not followed)"
    if full.resolve() in outputs:
        return "the document itself or one of its outputs"
    if _DEFAULT_SPEC.match_file(probe):
        return "default exclude"
    if ignore is not None and ignore.match_file(probe):
        return f"matched by {IGNORE_FILE}"
    if exclude.match_file(probe):
        return "matched by exclude"
    return None


def _file_reason(
    rel: PurePosixPath,
    full: Path,
    include: pathspec.GitIgnoreSpec,
    exclude: pathspec.GitIgnoreSpec,
    ignore: pathspec.GitIgnoreSpec | None,
    outputs: set[Path],
    repo_root: Path,
    strict: bool,
) -> str | None:
    probe = rel.as_posix()
    resolved = full.resolve()
    if resolved in outputs:
        return "the document itself or one of its outputs"
    if _DEFAULT_SPEC.match_file(probe):
        return "default exclude"
    if ignore is not None and ignore.match_file(probe):
        return f"matched by {IGNORE_FILE}"
    if exclude.match_file(probe):
        return "matched by exclude"
    if not include.match_file(probe):
        return "not matched by include"
    if full.is_symlink():
        if strict and not _inside(resolved, repo_root):
            return "symlink resolves outside the repository"
        if not resolved.is_file():
            return "symlink to a non-file"
    elif not full.is_file():
        return "not a regular file"
    return None
