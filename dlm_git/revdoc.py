"""A document at a revision (a commit, or the index): its `.dlm`, its recorded files, and
its inputs written into a temp tree. The one place that answers "which `.dlm` is this
document" and "what does training at that revision see".

Invariants:
- A document directory's `.dlm` is the one file ending `.dlm` *directly* inside it; none
  or several is "no document" (never the first of several, never one in a subdirectory).
- Everything is read through `gitio` (objects by id; names are data), nothing from the
  work tree; `materialize` writes the document directory and its source directories
  (from the `.dlm`'s `training.sources`) under a destination, and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dlm_git import gitio
from dlm_git.doc.peek import source_dirs
from dlm_git.errors import UsageError


def doc_rel(root: Path, doc: Path, command: str) -> str:
    """A `--doc PATH` (the document's directory or its `.dlm`) as a path relative to the
    repository root; a path outside the repository is `command`'s usage error."""
    path = Path(os.path.abspath(doc))
    if path.suffix == ".dlm":
        path = path.parent
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        raise UsageError(command, f"{doc} is outside the repository") from None


def prefix_of(doc_rel: str) -> str:
    return "" if doc_rel in ("", ".") else doc_rel + "/"


def dlms_in(listed: Iterable[str], doc_rel: str) -> list[str]:
    """The `.dlm` files directly inside `doc_rel` among repository paths `listed`."""
    prefix = prefix_of(doc_rel)
    return [
        p
        for p in listed
        if p.endswith(".dlm") and p.startswith(prefix) and "/" not in p[len(prefix) :]
    ]


def the_dlm(root: Path, doc_rel: str, rev: str) -> str | None:
    """The document's `.dlm` at `rev` (repository path), None unless exactly one."""
    found = dlms_in(gitio.ls_files([doc_rel], root, rev=rev), doc_rel)
    return found[0] if len(found) == 1 else None


def materialize(root: Path, doc_rel: str, rev: str, dest: Path) -> Path | None:
    """Write the document and its source directories at `rev` under `dest` (marked as a
    repository root); the `.dlm`'s path there, or None when there is no single `.dlm`."""
    dlm = the_dlm(root, doc_rel, rev)
    if dlm is None:
        return None
    dlm_bytes = gitio.cat_files([f"{rev}:{dlm}"], root).get(f"{rev}:{dlm}") or b""
    write_inputs(root, doc_rel, rev, dlm_bytes, dest)
    return dest / dlm


def write_inputs(
    root: Path,
    doc_rel: str,
    rev: str,
    dlm_bytes: bytes,
    dest: Path,
    files: gitio.CommitFiles | None = None,
) -> None:
    """`materialize` for a caller that has already read the `.dlm`'s bytes. `files`: the
    commit `rev`'s files, already listed (a caller writing many documents of one commit)."""
    (dest / ".git").mkdir(parents=True, exist_ok=True)
    paths = [doc_rel, *source_dirs(doc_rel, dlm_bytes)]
    if files is not None:
        files.materialize(paths, dest)
    else:
        gitio.materialize(paths, dest, root, rev=rev)
