"""Which directories of a tree (a commit's, or the index) are documents to check, and what
`params.yaml`'s `documents:` list says about each of them.

Invariants:
- params.yaml never narrows the set: every `.dlm` whose directory holds records
  (`dlm.lock` and/or `manifest.json`), and every directory holding a `dlm.lock`, is a
  document to check whether or not params.yaml lists it. params.yaml only adds what it
  lists (an untrained listed document is still checked), and without a `documents:` list
  every directory with a `.dlm` is a document (as without a pipeline).
- params.yaml is input like any other: a file that does not parse, a `documents:` that is
  not a list, an entry that is not a directory inside the repository, or one naming a
  directory without a `.dlm` is a problem reported against it; a document with records
  that a `documents:` list leaves out was dropped from the pipeline while its records
  remain, and is reported too (check `pipeline.documents`).
- One params.yaml nested past `safeparse`'s bound is refused outright, at every revision
  and by every reader (hook, verify, diff, log, sign, fsck): `read_params` raises the one
  `DlmGitError` naming `<rev>:params.yaml`; no reader builds that error itself.
- Which files bear on the answer is one predicate (`bears_on_documents`): a reader that
  keeps only part of a listing (fsck's history walk) keeps those.
- Built from one NUL-separated listing of the tree (names may hold any byte); imports
  nothing heavy (the git hooks use it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from dlm_git.errors import DlmGitError
from dlm_git.layout import LOCK_NAME, MANIFEST_NAME
from dlm_git.paths import is_safe
from dlm_git.safeparse import Unbounded, load_yaml

PARAMS_NAME = "params.yaml"
DOCS_KEY, TRAINING_KEY = "docs", "training"
"""params.yaml `docs.<doc dir>.training.<setting>` overrides a document's training
(`train.doc_params` applies it; check `params.training` compares it with the records)."""
CHECK = "pipeline.documents"
RECORD_NAMES = (LOCK_NAME, MANIFEST_NAME)
FIX_PARAMS = "list each document directory under `documents:` in params.yaml"
FIX_DEEP = "fix params.yaml: list each document directory under `documents:`"
FIX_DROPPED = (
    "list it in params.yaml `documents:` again, or remove its records"
    " (`git rm <doc>/dlm.lock <doc>/manifest.json`)"
)


def bears_on_documents(name: str) -> bool:
    """Whether a file named `name` (a base name) can change which documents a tree holds:
    a `.dlm`, a record, or params.yaml."""
    return name.endswith(".dlm") or name in RECORD_NAMES or name == PARAMS_NAME


def _dir(path: str) -> str:
    return posixpath.dirname(path) or "."


def _safe_dir(rel: str) -> bool:
    return rel == "." or is_safe(rel)


@dataclass
class Tree:
    """The `.dlm` files and the records of a tree, by directory."""

    dlms: dict[str, list[str]] = field(default_factory=dict)
    """Directory -> the `.dlm` paths directly in it."""
    records: dict[str, list[str]] = field(default_factory=dict)
    """Directory -> the record names (`dlm.lock`, `manifest.json`) directly in it."""

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> Tree:
        """From a listing of every file of the tree (`ls-files -z` / `ls-tree -r -z`).
        Directories that could not be checked out inside the repository (a hostile tree
        object naming `..` or `.git`) are left out: git never writes them."""
        tree = cls()
        for path in paths:
            base = posixpath.basename(path)
            if base.endswith(".dlm"):
                tree.dlms.setdefault(_dir(path), []).append(path)
            elif base in RECORD_NAMES:
                tree.records.setdefault(_dir(path), []).append(base)
        for table in (tree.dlms, tree.records):
            for rel in [r for r in table if not _safe_dir(r)]:
                del table[rel]
        return tree

    def trained(self) -> list[str]:
        """Directories holding records that belong to a document: a `.dlm` beside them,
        or a `dlm.lock` (dlm-git's own file; a lone `manifest.json` may be anyone's)."""
        return sorted(
            d for d, names in self.records.items() if d in self.dlms or LOCK_NAME in names
        )


@dataclass
class Params:
    """What params.yaml's `documents:` says, read as hostile input."""

    listed: list[str] | None
    """Normalised document directories; None: no `documents:` list (no pipeline)."""
    problems: list[tuple[str, str]]
    """(subject, what is wrong) for the file itself and for entries that are not
    directories inside the repository."""
    docs: dict[Any, Any] = field(default_factory=dict)
    """The `docs:` mapping as written (document directory -> its settings; empty when
    there is none or it is not a mapping): judged by check `params.training`."""


def read_params(data: bytes | None, rev: str) -> Params:
    """Parse the bytes of revision `rev`'s params.yaml (None: there is none). Nesting past
    the bound is the one `DlmGitError` naming `<rev>:params.yaml` (every reader refuses
    the file outright; so are aliases expanding it past `safeparse.MAX_NODES` nodes);
    everything else wrong is a problem."""
    if data is None:
        return Params(None, [])
    try:
        parsed = load_yaml(data.decode("utf-8"))
    except Unbounded as exc:
        raise DlmGitError(
            f"{rev}:{PARAMS_NAME}", f"does not parse: {exc.problem}", FIX_DEEP
        ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        what = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Params(None, [(PARAMS_NAME, f"does not parse: {what}")])
    if parsed is None:
        return Params(None, [])
    if not isinstance(parsed, dict):
        return Params(None, [(PARAMS_NAME, f"is a {type(parsed).__name__}, not a mapping")])
    docs = parsed.get(DOCS_KEY)
    docs = docs if isinstance(docs, dict) else {}
    if "documents" not in parsed:
        return Params(None, [], docs)
    entries = parsed["documents"]
    if entries is None:
        return Params([], [], docs)
    if not isinstance(entries, list):
        kind = type(entries).__name__
        what = f"documents: is a {kind}, not a list of directories"
        return Params([], [(PARAMS_NAME, what)], docs)
    listed: list[str] = []
    problems: list[tuple[str, str]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, str):
            problems.append(
                (PARAMS_NAME, f"documents: entry {i + 1} ({entry!r}) is not a directory name")
            )
            continue
        rel = posixpath.normpath(entry) if entry else "."
        if not _safe_dir(rel):
            what = f"documents: entry {entry!r} is not a directory inside the repository"
            problems.append((PARAMS_NAME, what))
            continue
        if rel not in listed:
            listed.append(rel)
    return Params(listed, problems, docs)


def documents(params: Params, tree: Tree) -> list[str]:
    """The directories to check: params.yaml's list (or, without one, every directory
    with a `.dlm`), then every directory with records the list leaves out."""
    first = params.listed if params.listed is not None else sorted(tree.dlms)
    return list(dict.fromkeys([*first, *tree.trained()]))


def assess(params: Params, tree: Tree, rel: str) -> tuple[bool, str, str]:
    """(ok, detail, fix) of check `pipeline.documents` for document directory `rel`
    (`fix` is "" when ok)."""
    records = tree.records.get(rel, [])
    if params.listed is None:
        return True, "params.yaml has no documents: list (no pipeline)", ""
    if rel in params.listed:
        if rel not in tree.dlms:
            return False, f"params.yaml documents: lists {rel}, which holds no .dlm", FIX_PARAMS
        return True, "listed in params.yaml documents:", ""
    if records and (rel in tree.dlms or LOCK_NAME in records):
        names = "/".join(sorted(records, key=RECORD_NAMES.index))
        return (
            False,
            f"{rel} holds {names} but params.yaml documents: does not list it"
            " (dropped from the pipeline while its records remain)",
            FIX_DROPPED,
        )
    return True, "not listed in params.yaml documents: and not trained", ""
