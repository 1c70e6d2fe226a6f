"""Check `docset.dlm_id`: no two documents of one tree share a `dlm_id`.

Invariants:
- The original tool keys its store by `dlm_id`: two documents with one id train into one
  place and overwrite each other's adapter. A shared id is FAILED on every document that
  holds it, naming the others (an ERROR at commit time, a FAILED verdict in `verify`),
  whichever of them is new.
- The documents compared are every directory of the tree holding one `.dlm` directly
  (`docat`'s rule), listed in params.yaml or not, trained or not: the hook (which sees a
  new document's `.dlm` staged) and `verify` (which sees the commit) compare the same
  set. Of each `.dlm` only the frontmatter's `dlm_id` is read (`doc.peek`: a safe YAML
  load, no schema). A `.dlm` whose frontmatter does not read or
  whose `dlm_id` is not a string shares nothing here (the checks that parse it say so).
  A work tree outside any git repository has no listing: only the documents asked for.
- A ULID is compared as its canonical upper-case text (Crockford base32 is
  case-insensitive); any other string as written.
- Imports nothing heavy: the pre-commit hook runs it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping

from dlm_git.contract.outcome import Check, Outcome
from dlm_git.contract.table import rule
from dlm_git.doc.peek import peek_frontmatter
from dlm_git.doc.ulid import is_ulid
from dlm_git.docat import Rev, TreeAt

CHECK = "docset.dlm_id"

Shared = dict[str, tuple[str, list[str]]]
"""Document directory -> (its `dlm_id`, the other documents' `.dlm` paths with it)."""

_BY_TREE: weakref.WeakKeyDictionary[TreeAt, tuple[frozenset[str], Shared]] = (
    weakref.WeakKeyDictionary()
)


def dlm_id_of(dlm: bytes) -> str | None:
    """The `dlm_id` a `.dlm`'s frontmatter names, canonical (None: none readable)."""
    value = peek_frontmatter(dlm).get("dlm_id")
    if not isinstance(value, str) or not value:
        return None
    return value.upper() if is_ulid(value) else value


def shared_ids(dlms: Mapping[str, tuple[str, bytes | None]]) -> Shared:
    """From document directory -> (its `.dlm` path, its bytes): the documents whose
    `dlm_id` another document also holds."""
    by_id: dict[str, list[tuple[str, str]]] = {}
    for rel, (name, data) in dlms.items():
        found = dlm_id_of(data) if data is not None else None
        if found is not None:
            by_id.setdefault(found, []).append((rel, name))
    return {
        rel: (found, [other for r, other in group if r != rel])
        for found, group in by_id.items()
        if len(group) > 1
        for rel, _ in group
    }


def shared_in(tree: TreeAt, extra: Iterable[str] = ()) -> Shared:
    """`shared_ids` over every directory of `tree` with a `.dlm` and the directories
    `extra`, their `.dlm` files read in one batch (once per tree and set of directories)."""
    listed = tree.tree.dlms if _is_repository(tree) else {}
    rels = frozenset([*listed, *extra])
    cached = _BY_TREE.get(tree)
    if cached is not None and cached[0] == rels:
        return cached[1]
    names = {rel: dlms[0] for rel in rels if len(dlms := tree.dlms(rel)) == 1}
    blobs = tree.read(names.values())
    shared = shared_ids({rel: (name, blobs.get(name)) for rel, name in names.items()})
    _BY_TREE[tree] = (rels, shared)
    return shared


def _is_repository(tree: TreeAt) -> bool:
    """A commit and the index always are; a work tree outside any git repository (a
    pipeline run in an exported copy) has no listing: only the documents asked for."""
    return tree.where is not Rev.WORKTREE or (tree.root / ".git").exists()


def id_check(rel: str, shared: Shared, hint: bool = False) -> Check:
    """Check `docset.dlm_id` of document `rel` (`hint`: the fix in the detail, as
    `verify` prints it; the hook prints the row's fix beside it)."""
    if rel not in shared:
        return Check(CHECK, Outcome.OK, "no other document of the tree has its dlm_id")
    found, others = shared[rel]
    what = f"dlm_id {found} is also the dlm_id of {', '.join(sorted(others))}"
    return Check(CHECK, Outcome.FAILED, f"{what} (hint: {rule(CHECK).fix})" if hint else what)
