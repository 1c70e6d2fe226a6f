"""Bounds shared by readers of hostile input that must agree, kept in one place below
every layer (this module imports nothing), so a reader on the git hooks' path can share a
bound without importing the reader that defined it.

Invariant: `MAX_ANY_DEPTH` is the one nesting bound on a record's free-form values: the
schema (`dlm_git.validated`, a value of kind `Any`) and the hash level's shape check
(`dlm_git.contract.shapes`) refuse the same depths, so no record one of them takes is
refused by the other.
"""

from __future__ import annotations

MAX_ANY_DEPTH = 64
"""The deepest nesting a value of kind `Any` may have (a lock's `determinism_flags`, a
manifest's `training_config`: a few levels): JSON parses ~1000, and a dump of a few hundred
(this module's, `canonical_json`'s) ends in a RecursionError, where pydantic's ended in its
serialization error. The one place these records differ from pydantic: refused at once."""
