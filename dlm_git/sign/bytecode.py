"""The installed package's bytecode caches (`__pycache__/*.pyc`) checked against its
verified sources, for `dlm-git self-verify --installed`: import runs a cached `.pyc`
instead of its source whenever the header's date and size (or hash) match, so a `.pyc`
is as much the running dlm-git as the `.py` beside it.

Invariants:
- A cache file passes only when it is this interpreter's bytecode
  (`sys.implementation.cache_tag` in its name, `importlib.util.MAGIC_NUMBER` first) of a
  source the wheel's RECORD verified, its header flags are a timestamp (0) or a hash
  (1, 3: then the hash is the source's `importlib.util.source_hash`), and the code it
  holds equals `compile(source, path, "exec", dont_inherit=True, optimize=N)` with N from
  the name (`.opt-1`, `.opt-2`; none: 0). Code objects compare by content (instructions,
  constants, names, nested code), never by file name.
- Everything else in a `__pycache__/` is a problem named as such: bytecode of another
  interpreter (it cannot be checked here), of no source in the release, a name import never
  reads, a file over `MAX_PYC_BYTES` (refused unread), bytecode that does not load.
- The work is bounded by the caller: at most a few cache files per released file, each
  read once, at most `MAX_PYC_BYTES`.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Collection
from pathlib import Path, PurePosixPath

from dlm_git.fsutil import NotRegularFile, read_regular
from dlm_git.safeparse import load_bytecode

MAX_PYC_BYTES = 4 << 20
MAX_SOURCE_BYTES = 16 << 20
HEADER_BYTES = 16
_OPT_LEVELS = {"": 0, "opt-1": 1, "opt-2": 2}


def _cache_name(name: str) -> tuple[str, str, int] | None:
    """(module stem, cache tag, optimization level) of a `__pycache__` file name as
    import names them (`stem.TAG.pyc`, `stem.TAG.opt-N.pyc`), or None."""
    parts = name.split(".")
    if len(parts) not in (3, 4) or parts[-1] != "pyc" or not parts[0] or not parts[1]:
        return None
    opt = parts[2] if len(parts) == 4 else ""
    if opt not in _OPT_LEVELS:
        return None
    return parts[0], parts[1], _OPT_LEVELS[opt]


def _code_problem(data: bytes, source: bytes, path: Path, optimize: int) -> str | None:
    """Why the `.pyc` bytes `data` are not the compiled `source`, or None."""
    if len(data) < HEADER_BYTES or data[:4] != importlib.util.MAGIC_NUMBER:
        return "is not this interpreter's bytecode (another magic number)"
    flags = int.from_bytes(data[4:8], "little")
    if flags not in (0, 1, 3):
        return f"has invalid header flags {flags}"
    if flags and data[8:16] != importlib.util.source_hash(source):
        return "is bytecode of another source (its hash differs)"
    try:
        cached = load_bytecode(data[HEADER_BYTES:])
    except ValueError:
        return "is not loadable bytecode"
    try:
        compiled = compile(source, str(path), "exec", dont_inherit=True, optimize=optimize)
    except (SyntaxError, ValueError):
        return "has a source this interpreter cannot compile"
    if not isinstance(cached, types.CodeType) or cached != compiled:
        return "is not the compiled source (its code differs)"
    return None


def _one_problem(
    name: str, path: Path, verified: dict[str, Path], released: Collection[str]
) -> str | None:
    """Why the cache file `name` (`dlm_git/.../__pycache__/X`) at `path` is refused; None
    also where its source is released but not verified (that source is the problem)."""
    rel = PurePosixPath(name)
    parsed = _cache_name(rel.name)
    if parsed is None:
        return "is not bytecode import reads"
    stem, tag, optimize = parsed
    if tag != sys.implementation.cache_tag:
        return f"is bytecode of another interpreter ({tag}): it cannot be checked here"
    source_name = str(rel.parent.parent / f"{stem}.py")
    if source_name not in verified:
        return None if source_name in released else "is bytecode of no source in the release"
    try:
        data = read_regular(path, MAX_PYC_BYTES, follow_symlinks=False)
        source = read_regular(verified[source_name], MAX_SOURCE_BYTES, follow_symlinks=False)
    except NotRegularFile as exc:
        return exc.message
    except OSError as exc:
        return exc.strerror or "cannot be read"
    return _code_problem(data, source, verified[source_name], optimize)


def bytecode_problems(
    caches: dict[str, Path], verified: dict[str, Path], released: Collection[str]
) -> list[str]:
    """One line per cache file in `caches` (`dlm_git/.../__pycache__/X` -> path) that is not
    the compiled bytecode of its source in `verified` (name -> path, digests checked);
    `released` names every file of the release (a changed source is reported once, as
    changed, not again through its cache)."""
    problems = []
    for name, path in sorted(caches.items()):
        why = _one_problem(name, path, verified, released)
        if why is not None:
            problems.append(f"{name} {why}")
    return problems
