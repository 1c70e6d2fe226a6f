"""The one path-safety rule: a relative path from hostile bytes (a git tree listing, a DVC
`.dir` listing, a name in a record) that may be joined under a directory.

Invariants:
- `problem(path)` is None exactly when joining `path` under a directory names a file
  inside it on every platform. Refused (`Unsafe`): the empty path; absolute paths (POSIX
  `/x`, `//host/share`, a Windows drive `C:` as the first component); empty, `.` and
  `..` components; a backslash (a separator on Windows: `a\\..\\x`); NUL; and a `.git`
  component as git's NTFS protection sees it, case-insensitively: `.git` or `git~1` (its
  8.3 short name) followed by any dots or spaces and an optional `:stream` (`.GIT`,
  `.git.`, `.git `, `.git::$INDEX_ALLOCATION`).
- Git itself refuses to add or check out those `.git` components (core.protectNTFS is on
  by default everywhere since git 2.24.1), so no honest commit holds one. A backslash and
  a leading `C:` are names to git on POSIX: training refuses them where dlm-git would
  record them, in a directive's own repository path (`doc/sources.py` refuses the
  directive, one line naming it) and in a file's name under it (`doc/walk.py` skips the
  file with the reason), so no commit today's dlm-git makes records one. A record an
  older dlm-git made with such a name is judged CANNOT_VERIFY naming it (its files
  cannot be written out of the commit, so nothing is compared), never FAILED.
- Control characters other than NUL are names, and so are `...` and ` `: POSIX file
  systems, git and DVC carry them, documents take such files as sources
  (`tests/hostile`), and every place that shows a name escapes it (`dlm_git.output`).
  Refusing them would turn an honest commit into a failed check.
- `plain_name(name)` is the rule plus "no `/`": one file directly inside a directory.
- `problem` first tries `_PLAIN`, one regex that only takes paths the full rule takes
  (`_refusal`): nonempty components that do not start with `.` and hold no `~`, `:`,
  backslash or NUL. Every refused form needs one of those (a `.git` component starts
  with `.`, `git~1` holds `~`, a drive holds `:`, an empty component is empty), so the
  fast path changes no verdict; any other path is judged by the full rule.
- Nothing here touches the file system or imports anything: every layer may use it.
"""

from __future__ import annotations

import re
from enum import Enum


class Unsafe(Enum):
    """Why a path is refused (the value says it in words)."""

    EMPTY = "is empty"
    ABSOLUTE = "is absolute"
    BACKSLASH = "holds a backslash"
    NUL = "holds a NUL byte"
    DOT_COMPONENT = "has an empty, '.' or '..' component"
    GIT_DIR = "has a '.git' component"
    SUBDIRECTORY = "names a subdirectory"


_DOT_GIT = re.compile(r"(?:\.git|git~1)[. ]*(?::.*)?", re.IGNORECASE | re.DOTALL)
_DRIVE = re.compile(r"[A-Za-z]:")


_PLAIN = re.compile(r"[^./~:\\\0][^/~:\\\0]*(?:/[^./~:\\\0][^/~:\\\0]*)*")
"""Paths of plain components only (see the invariants): a subset of what `_refusal`
takes, matched in one call (most names a walk meets)."""


def problem(path: str) -> Unsafe | None:
    """Why `path` must not be joined under a directory, or None (see the invariants)."""
    if _PLAIN.fullmatch(path):
        return None
    return _refusal(path)


def _refusal(path: str) -> Unsafe | None:
    """The full rule: why `path` is refused, or None."""
    if not path:
        return Unsafe.EMPTY
    if "\0" in path:
        return Unsafe.NUL
    if "\\" in path:
        return Unsafe.BACKSLASH
    if path[0] == "/" or _DRIVE.match(path):
        return Unsafe.ABSOLUTE
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return Unsafe.DOT_COMPONENT
        if part[0] in ".gG" and _DOT_GIT.fullmatch(part):
            return Unsafe.GIT_DIR
    return None


def utf8_name(name: str) -> bool:
    """Whether a name from the file system (decoded with surrogate escapes, as `os`
    decodes names) is valid UTF-8: the only names dlm-git records or hashes by name."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_safe(path: str) -> bool:
    """`problem(path) is None`."""
    return problem(path) is None


def name_problem(name: str) -> Unsafe | None:
    """`problem`, and a `/` is `Unsafe.SUBDIRECTORY`: one file directly inside a directory."""
    found = problem(name)
    if found is None and "/" in name:
        return Unsafe.SUBDIRECTORY
    return found


def plain_name(name: str) -> bool:
    """`name_problem(name) is None`."""
    return name_problem(name) is None
