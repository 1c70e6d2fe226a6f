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
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import Document, decode_utf8, key_line, normalize_text
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section, source_section, source_section_id
from dlm_git.hashing import sha256_bytes, sha256_text
from dlm_git.layout import DocLayout, repo_root_of

IGNORE_FILE = ".dlmignore"
BINARY_SNIFF_BYTES = 1024
UTF8_BOM = b"\xef\xbb\xbf"
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


@dataclass(frozen=True)
class SourceFile:
    relpath: str
    """POSIX path relative to the document's directory (the row's identity)."""
    abspath: str
    """Where the file was read (after resolving the directive's root)."""
    size: int
    sha256: str
    """sha256 of the file's raw bytes."""
    text: str
    """Normalized text (BOM stripped, LF)."""
    section_id: str
    """The id of `section()` (`source_section_id`), from the digest of the normalized text."""

    @property
    def path(self) -> Path:
        return Path(self.abspath)

    def section(self) -> Section:
        return source_section(self.relpath, self.text, self.section_id)


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
    outputs = {os.path.realpath(p) for p in DocLayout(doc_dir / doc.path.name).outputs()}
    outputs.add(os.path.realpath(doc.path))
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


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class _Matcher:
    """A gitignore-style pattern list (pathspec). Without negations the patterns' regexes
    are joined into one, so a path costs one regex match instead of one per pattern."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.spec = pathspec.GitIgnoreSpec.from_lines(list(lines))
        patterns = [p for p in self.spec.patterns if p.include is not None]
        self.combined: re.Pattern[str] | None = None
        if all(p.include for p in patterns) and all(
            isinstance(getattr(p, "regex", None), re.Pattern) for p in patterns
        ):
            parts = [p.regex.pattern.replace("(?P<ps_d>", "(") for p in patterns if p.regex]
            self.combined = re.compile("|".join(f"(?:{part})" for part in parts)) if parts else None
            self.empty = not parts
        else:
            self.empty = False

    def match(self, path: str) -> bool:
        if self.combined is not None:
            return self.combined.match(path) is not None
        if self.empty:
            return False
        return bool(self.spec.match_file(path))


_DEFAULT = _Matcher(DEFAULT_EXCLUDES)


def _expand_one(
    doc: Document,
    index: int,
    spec: SourceSpec,
    doc_dir: Path,
    repo_root: Path,
    strict: bool,
    outputs: set[str],
) -> tuple[list[SourceFile], list[SkippedFile]]:
    def line() -> int | None:  # only for an error: finding it parses the YAML again
        return key_line(doc.frontmatter_text, ("training", "sources", index, "path"))

    base = os.path.normpath(os.path.join(doc_dir, spec.path))
    base_rel = Path(os.path.relpath(base, doc_dir)).as_posix()
    resolved = os.path.realpath(base)
    root = str(repo_root)
    if strict and not _inside(resolved, root):
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' resolves outside the repository",
            line=line(),
            hint="keep sources inside the repository, or set training.sources_policy: permissive",
        )
    if not os.path.exists(resolved):
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' does not exist",
            line=line(),
            hint="fix the path (it is relative to the document's directory)",
        )
    candidates: list[tuple[str, str, bool, bool]] = []  # rel, full, is_symlink, is_regular
    ignore: _Matcher | None = None
    if os.path.isfile(resolved):
        candidates.append((os.path.basename(base), resolved, False, True))
        base_rel = posixpath.dirname(base_rel) or "."
    else:
        ignore_path = Path(resolved) / IGNORE_FILE
        if ignore_path.is_file():
            text = normalize_text(decode_utf8(ignore_path.read_bytes(), ignore_path))
            ignore = _Matcher(text.split("\n"))
    include = _Matcher(spec.include)
    exclude = _Matcher(spec.exclude)
    skipped: list[SkippedFile] = []
    prefix = "" if base_rel == "." else base_rel + "/"

    if os.path.isdir(resolved):
        candidates.extend(_walk(resolved, "", ignore, exclude, outputs, prefix, skipped))
    candidates.sort()

    files: list[SourceFile] = []
    for rel, full, link, regular in candidates:
        relpath = prefix + rel
        reason = _file_reason(
            rel, full, link, regular, include, exclude, ignore, outputs, root, strict
        )
        if reason is None and len(files) >= spec.max_files:
            reason = f"beyond max_files ({spec.max_files})"
        if reason is not None:
            skipped.append(SkippedFile(relpath, reason))
            continue
        try:
            data = _read_at_most(full, spec.max_bytes_per_file + 1)
        except OSError as exc:
            skipped.append(SkippedFile(relpath, f"unreadable ({exc.strerror})"))
            continue
        if len(data) > spec.max_bytes_per_file:
            size = os.path.getsize(full)
            skipped.append(
                SkippedFile(
                    relpath, f"over max_bytes_per_file ({size} > {spec.max_bytes_per_file} bytes)"
                )
            )
            continue
        if data.find(b"\x00", 0, BINARY_SNIFF_BYTES) != -1:
            skipped.append(SkippedFile(relpath, "binary (NUL byte in the first KiB)"))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(SkippedFile(relpath, "invalid UTF-8"))
            continue
        digest = text_digest = sha256_bytes(data)
        if data.startswith(UTF8_BOM) or b"\r" in data:
            text = normalize_text(text)
            text_digest = sha256_text(text)
        sid = source_section_id(relpath, text_digest)
        files.append(SourceFile(relpath, full, len(data), digest, text, sid))
    # os.walk yields directories in file-system order; the report must not depend on it
    skipped.sort(key=lambda s: s.relpath)
    return files, skipped


def _read_at_most(path: str, limit: int) -> bytes:
    """Up to `limit` bytes of the file. Sized from fstat, so a small file costs a small
    buffer (`read(limit)` would allocate `limit` bytes for every file), and read with
    plain descriptors (no file object per file)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, min(size, limit - 1) + 1)
        while size < len(data) < limit:  # the file grew since fstat: read on to the limit
            more = os.read(fd, limit - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    return data


def _walk(
    directory: str,
    rel_dir: str,
    ignore: _Matcher | None,
    exclude: _Matcher,
    outputs: set[str],
    prefix: str,
    skipped: list[SkippedFile],
) -> list[tuple[str, str, bool, bool]]:
    """(relpath under the directive root, full path, is symlink, is regular file) of every
    file, pruning skipped directories.

    Symlinked directories are never entered, so every path below a real directory is real."""
    found: list[tuple[str, str, bool, bool]] = []
    with os.scandir(directory) as it:
        entries = list(it)
    for entry in entries:
        rel = rel_dir + entry.name
        if entry.is_file(follow_symlinks=False):  # the common case first: one check
            found.append((rel, entry.path, False, True))
        elif entry.is_dir(follow_symlinks=False):
            reason = _dir_reason(rel, entry.path, ignore, exclude, outputs)
            if reason is None:
                found.extend(
                    _walk(entry.path, rel + "/", ignore, exclude, outputs, prefix, skipped)
                )
            else:
                skipped.append(SkippedFile(prefix + rel + "/", reason))
        elif entry.is_symlink() and os.path.isdir(entry.path):
            skipped.append(SkippedFile(prefix + rel + "/", "symlinked directory (not followed)"))
        else:
            link = entry.is_symlink()
            found.append((rel, entry.path, link, not link and entry.is_file(follow_symlinks=False)))
    return found


def _dir_reason(
    rel: str,
    full: str,
    ignore: _Matcher | None,
    exclude: _Matcher,
    outputs: set[str],
) -> str | None:
    probe = rel + "/"
    if full in outputs:
        return "the document itself or one of its outputs"
    if _DEFAULT.match(probe):
        return "default exclude"
    if ignore is not None and ignore.match(probe):
        return f"matched by {IGNORE_FILE}"
    if exclude.match(probe):
        return "matched by exclude"
    return None


def _file_reason(
    rel: str,
    full: str,
    link: bool,
    regular: bool,
    include: _Matcher,
    exclude: _Matcher,
    ignore: _Matcher | None,
    outputs: set[str],
    repo_root: str,
    strict: bool,
) -> str | None:
    """Why a file found while walking is not taken (None: take it).

    `full` lies under the directive's resolved root and no directory on the way is a
    symlink (the walk does not follow them), so only a symlinked file can lead elsewhere."""
    real = os.path.realpath(full) if link else full
    if real in outputs:
        return "the document itself or one of its outputs"
    # The default excludes have no slash but a trailing one, so they match a path through
    # one of its names; every directory on the way was checked when the walk entered it,
    # which leaves the file's own name (one short match instead of a search of the path).
    if _DEFAULT.match(rel.rpartition("/")[2]):
        return "default exclude"
    if ignore is not None and ignore.match(rel):
        return f"matched by {IGNORE_FILE}"
    if exclude.match(rel):
        return "matched by exclude"
    if not include.match(rel):
        return "not matched by include"
    if link:
        if strict and not _inside(real, repo_root):
            return "symlink resolves outside the repository"
        if not os.path.isfile(real):
            return "symlink to a non-file"
    elif not regular:
        return "not a regular file"
    return None
