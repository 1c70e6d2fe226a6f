"""`dlm-git new DOC`: a starter document with a fresh `dlm_id`, never over an existing file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Argument
from dlm_git.output import echo


def new(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file to create (NAME.dlm).")],
) -> None:
    """Write a starter document with a fresh dlm_id (a ULID); refuses to overwrite."""
    from dlm_git.doc.starter import create_document

    ulid = create_document(doc)
    echo(f"dlm-git new: created {doc} (dlm_id {ulid})")
