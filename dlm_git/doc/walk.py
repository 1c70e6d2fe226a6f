"""What one `training.sources` directive takes from the file system: the walk under its
root, the rules that take or skip each file found, and each taken file read and hashed.

Invariants:
- Files are taken in sorted POSIX relpath order under the directive's root, so the
  expansion is independent of file creation order and of the file system; the skipped
  files are reported in that order too. The walk lists each directory in that order
  (`_sort_key`), so the whole list comes out sorted without one sort of every path.
- Matching is gitignore-style (pathspec), never hand-rolled globs: `include` patterns
  select, `exclude` patterns, the default excludes and a `.dlmignore` file at the
  directive's root reject.
- Every file that is looked at and not taken is recorded with the reason it was skipped.
- A text file is hashed and sized in its canonical form (`hashing.canonical_text`: CRLF
  as LF), so an LF and a CRLF checkout record the same; its text is normalized from it.
- Symbolic links are never followed: a symlinked file or directory found while walking
  is skipped with the reason "symbolic link (not followed)", so every path found is a
  real path under the directive's root. (A commit stores a link as its target text;
  following it would train on whatever the link reaches on this machine — `.git/config`,
  a secret outside the excludes — and what a verifier materialises from git could never
  be the same bytes.)
- The document's own outputs (adapter/, dlm.lock, manifest.json, ...) are never sources.
- A file or directory whose name is not valid UTF-8 is skipped with that reason (its
  relpath shown with the bad bytes escaped, `\\xff`): relpaths are hashed and recorded
  as UTF-8 text. A path under its directive that the one path-safety rule refuses
  (`dlm_git.paths`: a backslash, a `.git` component as git's NTFS protection sees it, a
  leading drive `C:`) is skipped with that reason (`path_reason`): verify never writes
  such a path out of a commit, so training never records one. `recorded_refusal` is the
  same rule for a name an older record holds. Any other name (newlines, tabs, leading
  dashes, ...) is a name.
- Resolving the directive itself (`~`, symlinks on the way, the repository's boundary,
  the path rule on its own repository path) is `doc.sources`'s: this module is handed a
  root that exists.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dlm_git.doc.body import decode_utf8, normalize_text
from dlm_git.doc.errors import SourcesError
from dlm_git.doc.schema import SourceSpec
from dlm_git.doc.sections import Section, source_section, source_section_id
from dlm_git.hashing import TextDigest, digest_text, sha256_bytes, sha256_text
from dlm_git.paths import problem, utf8_name

IGNORE_FILE = ".dlmignore"
BINARY_SNIFF_BYTES = 1024
FIRST_READ = 64 * 1024
"""Bytes of a source file read before its size is asked (`_read_at_most`)."""
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
    """A file (or directory) looked at and not taken, with the reason in words."""

    relpath: str
    reason: str
    bad_name: bool = False
    """Skipped because its name is not valid UTF-8 (tools that name files as text, DVC's
    directory hashing among them, cannot handle it)."""


class _Matcher:
    """A gitignore-style pattern list (pathspec). Without negations the patterns' regexes
    are joined into one, so a path costs one regex match instead of one per pattern, and
    `match` is that regex's own method (no Python frame per path)."""

    def __init__(self, lines: Iterable[str]) -> None:
        import pathspec  # here: a command that walks no directive never pays for it

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


@functools.cache
def _defaults() -> tuple[_Matcher, _Matcher]:
    """The default excludes as two matchers, made at the first walk (`_Rules`):
    - for a directory the walk is about to enter;
    - for a file's own name, anchored. A pattern with no slash matches a name at any
      depth, which for a bare name is the same as anchored; a directory pattern
      (trailing slash) never matches a file. The anchored regexes skip pathspec's leading
      `(?:.+/)?` search, which made this the costliest check per file."""
    names = ("/" + p for p in DEFAULT_EXCLUDES if not p.endswith("/"))
    return _Matcher(DEFAULT_EXCLUDES), _Matcher(names)


def walk_directive(
    spec: SourceSpec, base: str, resolved: str, root: str, outputs: set[str]
) -> tuple[list[SourceFile], list[SkippedFile]]:
    """The files directive `spec` takes and those it skips, each skipped with its reason.
    `base` is its path (normalised, not resolved), `resolved` the real path it names
    (which exists), `root` what its files' relpaths start with (`peek.directive_root`)."""
    candidates: list[tuple[str, str, bool]] = []  # rel, full, is_regular
    ignore: _Matcher | None = None
    if os.path.isfile(resolved):
        candidates.append((os.path.basename(base), resolved, True))
        root = posixpath.dirname(root) or "."
    else:
        ignore_path = Path(resolved) / IGNORE_FILE
        if ignore_path.is_file():
            text = normalize_text(decode_utf8(ignore_path.read_bytes(), ignore_path))
            ignore = _Matcher(text.split("\n"))
    rules = _Rules(_Matcher(spec.include), _Matcher(spec.exclude), ignore, outputs)
    skipped: list[SkippedFile] = []
    prefix = _relpath_prefix(root)
    with _collection_paused():
        if os.path.isdir(resolved):
            candidates.extend(_walk(resolved, "", rules, prefix, skipped))
        files = _take(candidates, prefix, rules, spec, skipped)
        del candidates  # freed while paused: the collection that resumes never walks them
    # os.walk yields directories in file-system order; the report must not depend on it
    skipped.sort(key=lambda s: s.relpath)
    return files, skipped


def _take(
    candidates: list[tuple[str, str, bool]],
    prefix: str,
    rules: _Rules,
    spec: SourceSpec,
    skipped: list[SkippedFile],
) -> list[SourceFile]:
    """The candidates taken, in order; each one not taken is added to `skipped`."""
    files: list[SourceFile] = []
    limit, max_files = spec.max_bytes_per_file, spec.max_files
    for rel, full, regular in candidates:
        relpath = prefix + rel
        reason = rules.file_reason(rel, full, regular) or path_reason(rel)
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
    return files


def _relpath_prefix(root: str) -> str:
    """What the relpaths of the files directly under directory `root` start with."""
    return "" if root == "." else root.rstrip("/") + "/"


def path_reason(rel: str) -> str | None:
    """Why the path of a file under its directive's root cannot be a source, or None."""
    bad = problem(rel)
    return None if bad is None else f"path {bad.value} (never written out of a commit)"


def recorded_refusal(relpath: str, root: str) -> str | None:
    """`path_reason` for a file a record holds as `relpath`, split at directive root
    `root` as the walk names it: why a walk there would skip it today, or None (it is not
    under `root`, or the rule takes its name). Only a name a walk can find counts: no
    empty, `.` or `..` component, no NUL (those name no file under the root)."""
    name = _name_under(relpath, root)
    if name is None or "\0" in name or any(p in ("", ".", "..") for p in name.split("/")):
        return None
    return path_reason(name)


def _name_under(relpath: str, root: str) -> str | None:
    """`relpath`'s name under `root` as the walk has it; a directive naming one file
    walks its directory, the file's name alone."""
    if relpath == root:
        return posixpath.basename(relpath)
    prefix = _relpath_prefix(root)
    return relpath[len(prefix) :] if relpath.startswith(prefix) else None


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
    has_cr = b"\r" in data
    crlf = data.count(b"\r\n") if has_cr else 0
    if len(data) - crlf > limit:
        return f"over max_bytes_per_file ({os.path.getsize(full)} > {limit} bytes)"
    # most files hold no NUL: one scan of the whole without bounds is cheaper to call
    nul = data.find(b"\x00", 0, 2 * BINARY_SNIFF_BYTES) if b"\x00" in data else -1
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
    if has_cr or (not ascii_only and data.startswith(UTF8_BOM)):
        d = digest_text(data)
        text_digest = sha256_text(normalize_text(data.decode("utf-8")))
        return SourceFile(relpath, full, d.size, d.sha256, text_digest, d.raw_size, d.raw_sha256)
    digest, size = sha256_bytes(data), len(data)
    # tuple.__new__ skips the named tuple's own __new__ (a Python frame with keyword
    # handling): 0.3 -> 0.1 us a file
    return tuple.__new__(SourceFile, (relpath, full, size, digest, digest, size, digest))


def _read_at_most(path: str, limit: int) -> bytes:
    """Up to `limit` bytes of the file, read with plain descriptors (no file object per
    file). A file that fits in `FIRST_READ` bytes (most sources) is read in one call and
    no fstat (a syscall per file: a tenth of a large corpus's walk); a larger one is then
    sized from fstat, so it costs one more buffer of its size, never one of `limit`."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        first = min(limit, FIRST_READ)
        data = os.read(fd, first)
        if len(data) < first or len(data) >= limit:  # a short read of a regular file: its end
            return data
        size = os.fstat(fd).st_size
        if size >= len(data):
            data += os.read(fd, min(size, limit - 1) + 1 - len(data))
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
        entries = sorted(it, key=_sort_key)
    for entry in entries:
        rel = rel_dir + entry.name
        if not entry.name.isascii() and not utf8_name(entry.name):
            kind = "directory" if entry.is_dir(follow_symlinks=False) else "file"
            shown = os.fsencode(prefix + rel).decode("utf-8", "backslashreplace")
            skipped.append(SkippedFile(shown, f"{kind} name is not valid UTF-8", bad_name=True))
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


def _sort_key(entry: os.DirEntry[str]) -> str:
    """A directory's name with a slash: listing each directory's entries in this order
    lists every path under it in sorted relpath order (a file `a.b` before `a/x`, as
    `.` < `/`), the order a sort of all the relpaths would give."""
    return entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while the walk makes its per-file
    objects (tuples, which hold no cycles): with tens of thousands of files, its full
    collections, each over every object made so far, grew faster than the files."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Rules:
    """What decides whether a file or directory found under one directive is taken:
    its include and exclude patterns, the directive root's .dlmignore, the default
    excludes and the document's outputs."""

    __slots__ = ("_default_dir", "_default_name", "_exclude", "_ignore", "_include", "_outputs")

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
        default_dirs, default_names = _defaults()
        self._default_dir = default_dirs.match
        self._default_name = default_names.match

    def dir_reason(self, rel: str, full: str) -> str | None:
        probe = rel + "/"
        if full in self._outputs:
            return "the document itself or one of its outputs"
        if self._default_dir(probe):
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
        if self._default_name(rel.rpartition("/")[2]):
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
