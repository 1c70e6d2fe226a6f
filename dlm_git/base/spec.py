"""Parse `base_model:` values into a typed spec.

Accepted forms:
- `builtin:tiny`                      the embedded deterministic tiny Llama
- `hf:<org>/<name>@<40-hex revision>` a snapshot in the local Hugging Face cache
- a registry key (`smollm2-135m`, ...) which maps to an `hf:` id and its pinned revision
  (see registry.py); the original tool's vision/audio keys are refused by name
- a local directory path, relative to the document's directory (or absolute)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from dlm_git.base.errors import BaseModelError
from dlm_git.base.registry import NOT_TEXT, REGISTRY

HF_RE = re.compile(r"^hf:(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[^@\s]*))?$")
REV_RE = re.compile(r"^[0-9a-f]{40}$")
BUILTINS = ("tiny",)


@dataclass(frozen=True)
class BaseSpec:
    kind: Literal["builtin", "hf", "local"]
    raw: str
    name: str
    """builtin name, hf repo id, or the local path as written."""
    revision: str | None = None
    registry_key: str | None = None


def parse_base_spec(value: str, where: str = "base_model") -> BaseSpec:
    """`where`: the subject of an error (a document's `path:line:col` of the value)."""
    value = value.strip()
    if value.startswith("builtin:"):
        name = value.removeprefix("builtin:")
        if name not in BUILTINS:
            raise BaseModelError(
                where, f"unknown builtin base '{value}'", "the built-in base is builtin:tiny"
            )
        return BaseSpec("builtin", value, name)
    if value.startswith("hf:"):
        m = HF_RE.match(value)
        if m is None:
            raise BaseModelError(
                where,
                f"'{value}' is not of the form hf:<org>/<name>@<revision>",
                "pin the 40-hex commit revision, e.g. hf:org/name@0123...abcd",
            )
        rev = m.group("rev")
        if not rev or not REV_RE.match(rev):
            raise BaseModelError(
                where,
                f"'{value}' must pin a 40-hex commit revision after '@'",
                "branches and tags move; use the snapshot's commit sha",
            )
        return BaseSpec("hf", value, m.group("repo"), rev)
    if value in REGISTRY:
        entry = REGISTRY[value]
        return BaseSpec("hf", value, entry.repo_id, entry.revision, registry_key=value)
    if value in NOT_TEXT:
        raise BaseModelError(
            where,
            f"'{value}' names a {NOT_TEXT[value]} base of the original dlm tool; dlm-git "
            "trains text-only causal language models",
            _other_forms(),
        )
    if "/" in value or value.startswith("."):
        return BaseSpec("local", value, value)
    raise BaseModelError(where, f"unknown base model '{value}'", _other_forms())


def _other_forms() -> str:
    """The hint for a value that names no base: every form, the registry's keys, and the
    shapes `dlm-git base build` makes offline."""
    from dlm_git.base.families import FAMILIES

    return (
        "name a Hub snapshot as hf:<org>/<name>@<40-hex revision>, a local directory, "
        "builtin:tiny, or a key: " + ", ".join(sorted(REGISTRY)) + "; without network, "
        "`dlm-git base build NAME --hf-cache DIR` makes a random-weight base shaped like "
        + ", ".join(sorted(FAMILIES))
    )
