"""A `manifest.json` read as raw JSON and checked field by field, without pydantic.

Invariants:
- `manifest_problem` accepts exactly the shape `manifest.schema.Manifest` (v1) gives a
  manifest dlm-git writes: every required key, no other key, each value of its kind
  (a string, a count that is an `int` and not a `bool`, a list or a mapping of records of
  their own shape). Anything else is a malformed record, named by its path. Two rules
  the schema has beyond kinds are held here too, so that the hash level never passes a
  manifest the replay cannot read: a value of kind `any` is at most
  `bounds.MAX_ANY_DEPTH` lists/objects deep (the schema's one bound), and a list
  keyed by a field (`("keyed", ...)`: the adapter's tensors by name) names each key once:
  the checks read it as a mapping, where a second entry would hide the first.
- Callers read a manifest that passed it with plain indexing: the record checks, the
  adapter checks, the hooks and `log` all judge the same dict. Nothing heavy is
  imported (the git hooks use it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlm_git.bounds import MAX_ANY_DEPTH, nested_deeper
from dlm_git.errors import DlmGitError
from dlm_git.safeparse import load_json

STR, INT, OPT_STR, NUM, BOOL = "str", "int", "str?", "num", "bool"
Shape = Mapping[str, object]
"""key -> kind: `STR`, `INT`, `OPT_STR`, `NUM` (an int or float, not a bool), `BOOL`, a
nested `Shape`, `("list", kind)`, `("keyed", (key, shape))` (a list of records of
`shape`, no two with the same `key`), `("map", kind)` or `("any", None)` (any JSON value
at most `MAX_ANY_DEPTH` deep); a key written `key?` may be absent."""

SOURCE: Shape = {"relpath": STR, "sha256": STR, "size": INT}
TENSOR: Shape = {"name": STR, "dtype": STR, "shape": ("list", INT), "digest": STR}
MANIFEST: Shape = {
    "schema_version?": ("literal", 1),
    "dlm_id": STR,
    "dlm_sha256": STR,
    "section_ids": ("list", STR),
    "sources": {"files": ("list", SOURCE), "merkle_root": STR},
    "tokens": {"root": STR, "rows": INT, "sequences": INT, "tokens": INT},
    "tokenizer_sha256": STR,
    "base": {
        "spec": STR,
        "kind": STR,
        "revision": OPT_STR,
        "tensor_root": STR,
        "tokenizer_sha256": STR,
        "config_sha256?": OPT_STR,
    },
    "training_config": ("map", ("any", None)),
    "config_sha256": STR,
    "lock_sha256": STR,
    "adapter": {
        "files": ("map", {"sha256": STR, "size": INT}),
        "tensor_root": STR,
        "tensors": ("keyed", ("name", TENSOR)),
    },
    "training": {
        "steps": INT,
        "final_loss_hex": STR,
        "tokens_trained": INT,
        "skipped_preference_sections": INT,
    },
    "segments?": ("optional", {"every": INT, "count": INT, "chain_root": STR}),
}


def manifest_problem(obj: object) -> str | None:
    """Why `obj` is not a manifest a dlm-git writes (the first field that is wrong), or None."""
    return _problem(obj, MANIFEST, "")


def shape_problem(obj: object, shape: Shape) -> str | None:
    """Why `obj` does not have `shape` (the first field that is wrong, by its path), or None."""
    return _problem(obj, shape, "")


def parse_manifest(data: bytes, subject: str) -> dict[str, Any]:
    """A manifest's bytes as a checked dict; `DlmGitError` naming `subject` otherwise."""
    try:
        obj = load_json(data.decode("utf-8"), finite=True, unique_keys=True)
    except (UnicodeDecodeError, ValueError) as exc:
        why = f" ({exc})" if isinstance(exc, ValueError) and str(exc) else ""
        raise DlmGitError(subject, f"manifest is not valid JSON{why}", "re-run training") from None
    problem = manifest_problem(obj)
    if problem is not None:
        raise DlmGitError(subject, f"malformed manifest: {problem}", "re-run training")
    assert isinstance(obj, dict)
    return obj


def _problem(value: object, kind: object, where: str) -> str | None:
    if isinstance(kind, Mapping):
        return _record(value, kind, where)
    if kind == STR:
        return None if isinstance(value, str) else _wrong(where, value, "a string")
    if kind == OPT_STR:
        return None if value is None or isinstance(value, str) else _wrong(where, value, "a string")
    if kind == INT:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else _wrong(where, value, "an integer")
    if kind == NUM:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else _wrong(where, value, "a number")
    if kind == BOOL:
        return None if isinstance(value, bool) else _wrong(where, value, "true or false")
    assert isinstance(kind, tuple)
    tag, inner = kind
    if tag == "any":
        return _too_deep(value, where)
    if tag == "keyed":
        return _keyed(value, inner, where)
    if tag == "literal":
        return (
            None
            if value == inner and not isinstance(value, bool)
            else _wrong(where, value, repr(inner))
        )
    if tag == "optional":
        return None if value is None else _problem(value, inner, where)
    if tag == "list":
        if not isinstance(value, list):
            return _wrong(where, value, "a list")
        return next(
            (p for i, v in enumerate(value) if (p := _problem(v, inner, f"{where}[{i}]"))), None
        )
    if not isinstance(value, dict):
        return _wrong(where, value, "an object")
    return next((p for k, v in value.items() if (p := _problem(v, inner, f"{where}.{k}"))), None)


def _too_deep(value: object, where: str) -> str | None:
    """Why `value` nests more than `MAX_ANY_DEPTH` lists/objects (the schema's bound on a
    value of kind `Any`, by the same measure: `bounds.nested_deeper`)."""
    if not nested_deeper(value):
        return None
    return f"{where} is nested more than {MAX_ANY_DEPTH} levels deep (no dlm-git writes it)"


def _keyed(value: object, inner: object, where: str) -> str | None:
    """A list of records (`inner`: their key and shape), each key once."""
    assert isinstance(inner, tuple)
    key, shape = inner
    problem = _problem(value, ("list", shape), where)
    if problem is not None:
        return problem
    assert isinstance(value, list)
    first: dict[object, int] = {}
    for i, record in enumerate(value):
        at = first.setdefault(record[key], i)
        if at != i:
            return f"{where}[{i}].{key}: {record[key]!r:.60} is listed twice (also [{at}])"
    return None


def _record(value: object, shape: Shape, where: str) -> str | None:
    if not isinstance(value, dict):
        return _wrong(where, value, "an object")
    keys = {k.rstrip("?"): k for k in shape}
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        return f"{where}.{unknown[0]!r:.60}: unknown key (no dlm-git writes it)".lstrip(".")
    for key, spec in keys.items():
        path = f"{where}.{key}".lstrip(".")
        if key not in value:
            if spec.endswith("?"):
                continue
            return f"{path}: missing"
        problem = _problem(value[key], shape[spec], path)
        if problem is not None:
            return problem
    return None


def _wrong(where: str, value: object, what: str) -> str:
    return f"{where or 'the manifest'} is {type(value).__name__} {value!r:.40}, not {what}"
