"""The starter document: the one text `dlm-git init --doc NAME` and `dlm-git new DOC` write.

Invariants:
- Every starter carries a fresh `dlm_id` (`doc.ulid.new_ulid`): the original tool keys
  its store by it, and two documents with one id are refused (check `docset.dlm_id`).
- `create_document` never overwrites: the text is written beside the target and linked
  into place, which fails if the name exists (no partial file, no clobbered document),
  and a directory that already holds a `.dlm` is refused (one document per directory).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dlm_git.doc.ulid import new_ulid
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.fsutil import FILE_MODE, fsync_dir

STARTER = """---
dlm_id: {ulid}
dlm_version: 1
base_model: builtin:tiny
system_prompt: You answer questions about this project, briefly.
training:
  lora_r: 8
  lora_alpha: 16
  lora_dropout: 0.0
  sequence_len: 128
  micro_batch_size: 4
  learning_rate: 0.002
  max_steps: 20
  seed: 42
{sources}---

# {name}

Write what the adapter should learn here: prose is trained on as is.

::instruction::
### Q
What is this document for?

### A
It trains a small LoRA adapter whose bytes are reproducible from this commit.
"""

SOURCES = """  sources:
    - path: notes
      include: ["*.md", "*.txt"]
"""
"""`training.sources` of the starter `init --doc` writes beside its `notes/` directory."""

STARTER_NOTE = """# Notes

Files in this directory are pulled into training by `training.sources`.
"""


def starter_text(name: str, ulid: str | None = None, sources: bool = False) -> str:
    """The starter document titled `name`, with `dlm_id` `ulid` (default: a fresh one);
    `sources`: it reads `notes/` beside it."""
    return STARTER.format(ulid=ulid or new_ulid(), name=name, sources=SOURCES if sources else "")


def create_document(path: Path) -> str:
    """Write a starter document at `path` (a new `.dlm`); its `dlm_id`."""
    if path.suffix != ".dlm" or path.name == ".dlm":
        raise UsageError(str(path), "is not a .dlm file name", "name it NAME.dlm")
    if path.exists() or path.is_symlink():
        raise DlmGitError(str(path), "already exists", "choose another name; nothing written")
    directory = path.parent
    if directory.is_dir():
        others = sorted(p.name for p in directory.glob("*.dlm"))
        if others:
            raise DlmGitError(
                str(path),
                f"{directory} already holds {others[0]} (one document per directory)",
                "create it in a directory of its own",
            )
    directory.mkdir(parents=True, exist_ok=True)
    ulid = new_ulid()
    _link_new(path, starter_text(path.stem, ulid))
    return ulid


def _link_new(path: Path, text: str) -> None:
    """Write `text` to a new file `path`, whole or not at all, never over an existing one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise DlmGitError(
                str(path), "already exists", "choose another name; nothing written"
            ) from None
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
