"""Bounds shared by readers of hostile input that must agree, kept in one place below
every layer (this module imports nothing), so a reader on the git hooks' path can share a
bound without importing the reader that defined it.

Invariant: `MAX_ANY_DEPTH` is the one nesting bound on a record's free-form values, and
`nested_deeper` the one measure of it: the schema (`dlm_git.validated`, a value of kind
`Any`) and the hash level's shape check (`dlm_git.contract.shapes`) refuse the same
depths, so no record one of them takes is refused by the other.
"""

from __future__ import annotations

MAX_ANY_DEPTH = 64
"""The deepest nesting a value of kind `Any` may have (a lock's `determinism_flags`, a
manifest's `training_config`: a few levels): JSON parses ~1000, and a dump of a few hundred
(this module's, `canonical_json`'s) ends in a RecursionError, where pydantic's ended in its
serialization error. The one place these records differ from pydantic: refused at once."""


def nested_deeper(value: object) -> bool:
    """Whether `value` nests lists/dicts/tuples more than `MAX_ANY_DEPTH` deep (measured
    level by level, without recursion: a hostile value cannot overflow the stack)."""
    level = [value] if isinstance(value, _NESTED) else []
    for _ in range(MAX_ANY_DEPTH):
        level = [
            inner
            for outer in level
            for inner in (outer.values() if isinstance(outer, dict) else outer)
            if isinstance(inner, _NESTED)
        ]
    return bool(level)


_NESTED = (dict, list, tuple)
