"""`diff`'s settings: what each side trains with, and where each value is set.

Invariants:
- A side's settings are its *effective* ones, read the way a training reads them
  (`train.doc_params`: the document's frontmatter `training:` overridden by params.yaml's
  `docs.<doc>.training`, a commit's from that commit's params.yaml), so a
  `dvc exp run -S docs.<doc>.training.<setting>=...` shows as a setting change, and an
  override not trained yet shows too. Each value is marked with where it is set
  (`frontmatter` or `params.yaml`).
- A side whose params.yaml entry a training would refuse is shown as written (its
  values laid over the frontmatter's, JSON-safe), with the reason a training refuses it:
  the text a user changed shows, and nothing claims it was trained with.
- What each adapter was trained with is read from each side's manifest
  (`training_config`, the effective values as the training resolved them: `auto`
  target modules, total and warmup steps); malformed records read as nothing.
- Nothing here raises for a side's bytes: every problem is a reason (a string).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dlm_git.errors import DlmGitError

if TYPE_CHECKING:
    from dlm_git.doc.load import LoadedDocument

Origin = Literal["frontmatter", "params.yaml"]
FRONTMATTER: Origin = "frontmatter"
PARAMS: Origin = "params.yaml"

TRAINING = "training."
"""The prefix of a training setting's key (`training.lora_r`); others are the document's."""


class Change(NamedTuple):
    key: str
    old: Any
    new: Any
    origin: tuple[Origin | None, Origin | None] = (None, None)
    """Where each side sets the value (None: the side has no such setting)."""


class Settings(NamedTuple):
    """A side's settings, flattened (`training.optimizer.name`), each with its origin."""

    values: dict[str, Any]
    origins: dict[str, Origin]


def effective(loaded: LoadedDocument) -> tuple[Settings, str | None]:
    """The document's effective settings (see the module), and why a training would
    refuse its params.yaml entry (None: it would not)."""
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params

    fm = loaded.doc.frontmatter
    why = None
    try:
        overrides = read_doc_params(loaded.repo_root, doc_key(loaded), replay=True).training
        training = with_params(loaded, overrides).doc.frontmatter.training.model_dump(mode="json")
    except DlmGitError as exc:
        why = exc.one_line()
        overrides = _as_written(loaded)
        training = {**fm.training.model_dump(mode="json"), **overrides}
    values: dict[str, Any] = {"base_model": fm.base_model, "system_prompt": fm.system_prompt}
    origins: dict[str, Origin] = dict.fromkeys(values, FRONTMATTER)
    for top, value in training.items():
        for key, flat in flatten({top: value}, TRAINING).items():
            values[key] = flat
            origins[key] = PARAMS if top in overrides else FRONTMATTER
    return Settings(values, origins), why


def _as_written(loaded: LoadedDocument) -> dict[str, Any]:
    """params.yaml's `docs.<doc>.training` as written, JSON-safe ({}: none readable)."""
    from dlm_git.docset import PARAMS_NAME, TRAINING_KEY, read_params
    from dlm_git.train.doc_params import doc_key

    path = loaded.repo_root / PARAMS_NAME
    try:
        docs = read_params(path.read_bytes(), PARAMS_NAME).docs if path.is_file() else {}
    except (DlmGitError, OSError):
        return {}
    entry = docs.get(doc_key(loaded))
    training = entry.get(TRAINING_KEY) if isinstance(entry, dict) else None
    if not isinstance(training, dict):
        return {}
    return {str(k): _json_safe(v) for k, v in training.items()}


def _json_safe(value: Any) -> Any:
    """`value` where JSON holds it as it is, else its repr (a date, a set, NaN, a loop)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
    return value


def flatten(obj: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """One level of nesting flattened: `{"optimizer": {"name": x}}` -> `optimizer.name`."""
    flat: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            flat.update({f"{prefix}{key}.{k}": v for k, v in value.items()})
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def changes(a: Settings | None, b: Settings | None) -> list[Change]:
    """Every setting whose value differs between the sides, in key order (a side without
    the document has none)."""
    va, vb = (s.values if s is not None else {} for s in (a, b))
    oa, ob = (s.origins if s is not None else {} for s in (a, b))
    return [
        Change(k, va.get(k), vb.get(k), (oa.get(k), ob.get(k)))
        for k in sorted(set(va) | set(vb))
        if va.get(k) != vb.get(k)
    ]


def recorded(manifest: dict[str, Any] | None) -> dict[str, Any]:
    """A manifest's `training_config`, keyed as `effective` keys settings ({}: none)."""
    config = manifest.get("training_config") if manifest is not None else None
    if not isinstance(config, dict):
        return {}
    flat = flatten(config, TRAINING)
    if f"{TRAINING}system_prompt" in flat:
        flat["system_prompt"] = flat.pop(f"{TRAINING}system_prompt")
    return flat


def trained_changes(
    manifests: tuple[dict[str, Any] | None, dict[str, Any] | None],
) -> list[Change]:
    """Every setting the two manifests record differently (a side without one: none)."""
    ra, rb = recorded(manifests[0]), recorded(manifests[1])
    if not ra or not rb:
        return []
    return [
        Change(k, ra.get(k), rb.get(k)) for k in sorted(set(ra) | set(rb)) if ra.get(k) != rb.get(k)
    ]


def not_shown(trained: list[Change], inputs: Iterable[Change]) -> list[Change]:
    """The recorded changes the inputs' changes do not already say (same key, same values)."""
    said = [(c.key, c.old, c.new) for c in inputs]
    return [c for c in trained if (c.key, c.old, c.new) not in said]


def origin_note(change: Change) -> str:
    """`(params.yaml)`, `(frontmatter -> params.yaml)`, or nothing where params.yaml sets
    neither side's value."""
    a, b = change.origin
    if PARAMS not in (a, b):
        return ""
    if a is None or b is None or a == b:
        return f"  ({a or b})"
    return f"  ({a} -> {b})"
