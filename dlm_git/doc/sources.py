"""Expand `training.sources` directives into source-file sections.

Invariants:
- Files are taken in sorted POSIX relpath order (relative to the document's directory),
  so the expansion is independent of file creation order and of the file system.
- Matching is gitignore-style (pathspec), never hand-rolled globs: `include` patterns
  select, `exclude` patterns, the default excludes and a `.dlmignore` file at the
  directive's root reject.
- Every file that is looked at and not taken is recorded with the reason it was skipped.
- Under `sources_policy: strict` (the default) a directive that resolves outside the
  repository is refused. Where a path points is one rule (`doc.peek.leaves_repository`):
  absolute and `~` paths are outside (on one machine only), so are `..` past the root.
- A file's relpath is its directive's path as written, normalised (`peek.directive_root`),
  joined with the file's path under it: the same wherever the document sits, for a file
  outside the repository too (`~` is expanded to read, never in the relpath).
- Outside files are read only where this machine's files are the inputs (`Outside.READ`:
  train, `verify --worktree`). Checking a commit (`Outside.SKIP`: verify, the hooks)
  reads none and says which directives it did not read; training from a commit
  (`Outside.REFUSE`: replay) refuses them. `compare_sources` is the one comparison of a
  recorded file list with an expansion.
- A text file is hashed and sized in its canonical form (`hashing.canonical_text`: CRLF
  as LF), so an LF and a CRLF checkout record the same; its text is normalized from it.
- Symbolic links are never followed, in train, the hooks and verify alike: a symlinked
  file or directory found while walking is skipped with the reason "symbolic link (not
  followed)", and a directive whose path goes through a symlink is refused. (A commit
  stores a link as its target text; following it would train on whatever the link
  reaches on this machine — `.git/config`, a secret outside the excludes — and what a
  verifier materialises from git could never be the same bytes.)
- The document's own outputs (adapter/, dlm.lock, manifest.json, ...) are never sources.
- A file or directory whose name is not valid UTF-8 is skipped with that reason (its
  relpath shown with the bad bytes escaped, `\\xff`): relpaths are hashed and recorded
  as UTF-8 text. A path under its directive that the one path-safety rule refuses
  (`dlm_git.paths`: a backslash, a `.git` component as git's NTFS protection sees it, a
  leading drive `C:`) is skipped with that reason: verify never writes such a path out
  of a commit, so training never records one. Any other name (newlines, tabs, leading
  dashes, ...) is a name.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import NamedTuple

import pathspec

from dlm_git.doc.body import decode_utf8, normalize_text
from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import Document, key_line
from dlm_git.doc.peek import directive_root, leaves_repository
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section, source_section, source_section_id
from dlm_git.hashing import TextDigest, TextForm, digest_text, sha256_bytes, sha256_text
from dlm_git.layout import DocLayout, repo_root_of
from dlm_git.paths import problem

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


class SourceFile(NamedTuple):
    """One source file taken into training: what it is, not its contents, which are read
    again (and checked against `sha256`) only if its row is tokenized. A named tuple, not
    a frozen dataclass: a large corpus makes one per file on every run, and a frozen
    dataclass costs 3x to build."""

    relpath: str
    """The directive's path as written, normalised, joined with the file's path under it
    (the row's identity); for a directive inside the repository that is the POSIX path
    relative to the document's directory."""
    abspath: str
    """Where the file was read (after resolving the directive's root)."""
    size: int
    """Size of its canonical form (CRLF as LF; `hashing.canonical_text`): recorded."""
    sha256: str
    """sha256 of its canonical form: recorded."""
    text_sha256: str
    """sha256 of its normalized text: the file's sha256 unless normalizing changed it."""
    raw_size: int
    """Size of the bytes read (= `size` unless the file holds a CRLF)."""
    raw_sha256: str
    """sha256 of the bytes read (= `sha256` unless the file holds a CRLF)."""

    @property
    def path(self) -> Path:
        return Path(self.abspath)

    @property
    def digest(self) -> TextDigest:
        return TextDigest(self.sha256, self.size, self.raw_sha256, self.raw_size)

    @property
    def section_id(self) -> str:
        """The id of `section()` (and of the file's training row)."""
        return source_section_id(self.relpath, self.text_sha256)

    def read_text(self) -> str:
        """The normalized text (BOM stripped, LF) of exactly the bytes that were hashed;
        SourcesError if the file changed since."""
        try:
            with open(self.abspath, "rb") as fh:
                data = fh.read(self.raw_size + 1)
        except OSError as exc:
            raise SourcesError(
                self.path, f"cannot read source file again: {exc.strerror}", hint=_RUN_AGAIN
            ) from None
        if len(data) != self.raw_size or sha256_bytes(data) != self.raw_sha256:
            raise SourcesError(self.path, "source file changed while in use", hint=_RUN_AGAIN)
        return normalize_text(data.decode("utf-8"))

    def section(self) -> Section:
        return source_section(self.relpath, self.read_text(), self.section_id)


_RUN_AGAIN = "run again once the sources stop changing"


def source_rows_digest(files: Iterable[SourceFile]) -> str:
    """sha256 over each file's relpath and text digest, in order: exactly what the files'
    row ids are made of, so two lists of files with the same digest have the same row
    ids in the same order. Much cheaper than computing every id (one hash in all instead
    of one per file), which lets a warm run recognise its cached rows without ids."""
    return sha256_text("".join(f"{f.relpath}\0{f.text_sha256}\0" for f in files))


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
    """A recorded file list against a re-expansion (`compare_sources`). Recorded files
    outside the repository, where directives were not read, are not compared."""

    changed: tuple[str, ...]
    new: tuple[str, ...]
    """Expanded, not recorded."""
    gone: tuple[str, ...]
    """Recorded (and not taken as an unread directive's), not expanded."""
    reordered: bool
    """Same files, another order (or a file recorded twice)."""
    legacy: int
    """Files whose record holds the raw bytes' digest (records from before the line-end
    rule, `hashing.TextForm.RAW`)."""
    unread: tuple[str, ...]
    """The unread directives' paths, as written."""
    unread_files: int
    """Recorded files taken as theirs: not compared."""
    section_ids: tuple[str | None, ...]
    """The ids the record's `section_ids` must be: None where a file was not read."""

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
    document's directory) is taken as one of theirs: it is not compared, and its section
    id is not known. Every other recorded file must be an expanded one, in order."""
    actual = {f.relpath: f for f in expanded.files}
    unread = expanded.unread
    outside = [
        bool(unread) and rel not in actual and leaves_repository(expanded.doc_rel, rel)
        for rel, _, _ in recorded
    ]
    inside = [entry for entry, out in zip(recorded, outside, strict=True) if not out]
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
    if unread:  # where the record puts them; "" (no id) for a file that is not there
        ids += [
            None if out else actual[rel].section_id if rel in actual else ""
            for (rel, _, _), out in zip(recorded, outside, strict=True)
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
        unread_files=len(recorded) - len(inside),
        section_ids=tuple(ids),
    )


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


class _Matcher:
    """A gitignore-style pattern list (pathspec). Without negations the patterns' regexes
    are joined into one, so a path costs one regex match instead of one per pattern, and
    `match` is that regex's own method (no Python frame per path)."""

    def __init__(self, lines: Iterable[str]) -> None:
        spec = pathspec.GitIgnoreSpec.from_lines(list(lines))
        patterns = [p for p in spec.patterns if p.include is not None]
        self.empty = not patterns
        self.match: Callable[[str], object] = spec.match_file
        if all(p.include for p in patterns) and all(
            isinstance(getattr(p, "regex", None), re.Pattern) for p in patterns
        ):
            parts = [p.regex.pattern.replace("(?P<ps_d>", "(") for p in patterns if p.regex]
            if parts:
                self.match = re.compile("|".join(f"(?:{part})" for part in parts)).match


_DEFAULT = _Matcher(DEFAULT_EXCLUDES)
"""The default excludes, for a directory the walk is about to enter."""
_DEFAULT_NAMES = _Matcher("/" + p for p in DEFAULT_EXCLUDES if not p.endswith("/"))
"""The default excludes a file's own name can match, anchored. A pattern with no slash
matches a name at any depth, which for a bare name is the same as anchored; a directory
pattern (trailing slash) never matches a file. The anchored regexes skip pathspec's
leading `(?:.+/)?` search, which made this the costliest check per file."""


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
        return _path_line(doc, index)

    base = os.path.normpath(os.path.join(doc_dir, _directive_target(doc, index, spec.path)))
    base_rel = directive_root(spec.path)
    resolved = os.path.realpath(base)
    root = str(repo_root)
    if _through_link(base, root):
        raise SourcesError(
            doc.path,
            f"training.sources[{index}].path '{spec.path}' goes through a symbolic link",
            line=line(),
            hint="symbolic links are not followed: name the real directory or file",
        )
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
    candidates: list[tuple[str, str, bool]] = []  # rel, full, is_regular
    ignore: _Matcher | None = None
    if os.path.isfile(resolved):
        candidates.append((os.path.basename(base), resolved, True))
        base_rel = posixpath.dirname(base_rel) or "."
    else:
        ignore_path = Path(resolved) / IGNORE_FILE
        if ignore_path.is_file():
            text = normalize_text(decode_utf8(ignore_path.read_bytes(), ignore_path))
            ignore = _Matcher(text.split("\n"))
    rules = _Rules(_Matcher(spec.include), _Matcher(spec.exclude), ignore, outputs)
    skipped: list[SkippedFile] = []
    prefix = "" if base_rel == "." else base_rel.rstrip("/") + "/"

    if os.path.isdir(resolved):
        candidates.extend(_walk(resolved, "", rules, prefix, skipped))
    candidates.sort()

    files: list[SourceFile] = []
    limit, max_files = spec.max_bytes_per_file, spec.max_files
    for rel, full, regular in candidates:
        relpath = prefix + rel
        reason = rules.file_reason(rel, full, regular) or _path_reason(rel)
        if reason is None:
            if len(files) >= max_files:
                reason = f"beyond max_files ({max_files})"
            else:
                taken = _read_source(relpath, full, limit)
                if not isinstance(taken, str):
                    files.append(taken)
                    continue
                reason = taken
        skipped.append(SkippedFile(relpath, reason))
    # os.walk yields directories in file-system order; the report must not depend on it
    skipped.sort(key=lambda s: s.relpath)
    return files, skipped


def _path_reason(rel: str) -> str | None:
    """Why the path of a file under its directive's root cannot be a source, or None."""
    bad = problem(rel)
    return None if bad is None else f"path {bad.value} (never written out of a commit)"


def _read_source(relpath: str, full: str, limit: int) -> SourceFile | str:
    """The file as a source, or why it is skipped (unreadable, too big, binary, not UTF-8).
    The size limit and the binary sniff apply to the canonical form (CRLF as LF), so an
    LF and a CRLF checkout take and skip the same files."""
    try:
        data = _read_at_most(full, limit + 1)
        if len(data) > limit and b"\r\n" in data:  # its canonical form may still fit
            data = _read_at_most(full, 2 * limit + 1)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    crlf = data.count(b"\r\n") if b"\r" in data else 0
    if len(data) - crlf > limit:
        return f"over max_bytes_per_file ({os.path.getsize(full)} > {limit} bytes)"
    nul = data.find(b"\x00", 0, 2 * BINARY_SNIFF_BYTES)
    # its offset in the canonical form: less one byte per CRLF before it
    if nul != -1 and nul - (crlf and data.count(b"\r\n", 0, nul)) < BINARY_SNIFF_BYTES:
        return "binary (NUL byte in the first KiB)"
    # ASCII is valid UTF-8 and needs no normalizing beyond line ends; checking it is 10x
    # cheaper than decoding
    ascii_only = data.isascii()
    if not ascii_only:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "invalid UTF-8"
    if crlf or b"\r" in data or (not ascii_only and data.startswith(UTF8_BOM)):
        d = digest_text(data)
        text_digest = sha256_text(normalize_text(data.decode("utf-8")))
        return SourceFile(relpath, full, d.size, d.sha256, text_digest, d.raw_size, d.raw_sha256)
    digest = sha256_bytes(data)
    return SourceFile(relpath, full, len(data), digest, digest, len(data), digest)


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
    directory: str, rel_dir: str, rules: _Rules, prefix: str, skipped: list[SkippedFile]
) -> list[tuple[str, str, bool]]:
    """(relpath under the directive root, full path, is regular file) of every file,
    pruning skipped directories. Symbolic links are skipped, never followed, so every
    path found is a real path under the directive's root."""
    found: list[tuple[str, str, bool]] = []
    with os.scandir(directory) as it:
        entries = list(it)
    for entry in entries:
        rel = rel_dir + entry.name
        if not entry.name.isascii() and not _is_utf8(entry.name):
            kind = "directory" if entry.is_dir(follow_symlinks=False) else "file"
            shown = os.fsencode(prefix + rel).decode("utf-8", "backslashreplace")
            skipped.append(SkippedFile(shown, f"{kind} name is not valid UTF-8"))
            continue
        if entry.is_file(follow_symlinks=False):  # the common case first: one check
            found.append((rel, entry.path, True))
        elif entry.is_dir(follow_symlinks=False):
            reason = rules.dir_reason(rel, entry.path)
            if reason is None:
                found.extend(_walk(entry.path, rel + "/", rules, prefix, skipped))
            else:
                skipped.append(SkippedFile(prefix + rel + "/", reason))
        elif entry.is_symlink():
            skipped.append(SkippedFile(prefix + rel, "symbolic link (not followed)"))
        else:
            found.append((rel, entry.path, False))
    return found


def _is_utf8(name: str) -> bool:
    """Whether a name from the file system decoded as UTF-8 (no surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Rules:
    """What decides whether a file or directory found under one directive is taken:
    its include and exclude patterns, the directive root's .dlmignore, the default
    excludes and the document's outputs."""

    __slots__ = ("_exclude", "_ignore", "_include", "_outputs")

    def __init__(
        self,
        include: _Matcher,
        exclude: _Matcher,
        ignore: _Matcher | None,
        outputs: set[str],
    ) -> None:
        # an empty pattern list matches nothing: no call at all
        self._include = include.match
        self._exclude = None if exclude.empty else exclude.match
        self._ignore = None if ignore is None or ignore.empty else ignore.match
        self._outputs = outputs

    def dir_reason(self, rel: str, full: str) -> str | None:
        probe = rel + "/"
        if full in self._outputs:
            return "the document itself or one of its outputs"
        if _DEFAULT.match(probe):
            return "default exclude"
        if self._ignore is not None and self._ignore(probe):
            return f"matched by {IGNORE_FILE}"
        if self._exclude is not None and self._exclude(probe):
            return "matched by exclude"
        return None

    def file_reason(self, rel: str, full: str, regular: bool) -> str | None:
        """Why a file found while walking is not taken (None: take it). `full` is a real
        path under the directive's resolved root (the walk follows no link)."""
        if full in self._outputs:
            return "the document itself or one of its outputs"
        # The default excludes have no slash but a trailing one, so they match a path
        # through one of its names; every directory on the way was checked when the walk
        # entered it, which leaves the file's own name.
        if _DEFAULT_NAMES.match(rel.rpartition("/")[2]):
            return "default exclude"
        if self._ignore is not None and self._ignore(rel):
            return f"matched by {IGNORE_FILE}"
        if self._exclude is not None and self._exclude(rel):
            return "matched by exclude"
        if not self._include(rel):
            return "not matched by include"
        if not regular:
            return "not a regular file"
        return None
