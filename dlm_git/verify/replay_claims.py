"""What a bitwise replay must reproduce of the commit's manifest, besides the adapter.

Invariant: a replay that gave back the recorded weights trained on the commit's own
inputs, so every claim of the manifest that is a pure function of those inputs and that
training is the replay's manifest's, field by field; a field that differs is named
(`differing_claims`) and makes the replay MISMATCH. Compared, by dotted path:
- the document: `schema_version`, `dlm_id`, `section_ids`;
- its inputs as tokenized: `tokens` (root, rows, sequences, tokens);
- the training: `training_config` (key by key) and `config_sha256`, `training` (steps,
  final_loss_hex, tokens_trained, skipped_preference_sections);
- the adapter's tensor record: `adapter.tensor_root`, `adapter.tensors` (in order);
- the base as the document names it: `base.spec`, `base.kind`; and its digests
  (`tokenizer_sha256`, `base.tensor_root`, `base.tokenizer_sha256`,
  `base.config_sha256`) where the hash level compared this machine's base with the
  record (`base.identity` passed).
Not compared (`NOT_COMPARED`, each with why): `dlm_sha256` and `sources` (the hash
level compares them with the commit's own bytes, `doc.sha256` and `sources.root`, and
accepts the raw-bytes digests an older dlm-git recorded for a CRLF checkout, which a
replay, hashing the canonical form, never writes), `lock_sha256` (the replay's lock records
this machine, its library versions and time-free facts of its own run),
`base.revision` (the snapshot the base cache resolved: the base's content is its
digests), `segments` (the snapshot interval can come from a `--segment-every` the record
does not keep, ranks take none, and chains made on a terminal before the RNG guard have
another root, docs/verify.md class 9; `--level segments` judges the chain),
`adapter.files` (the replay's other-files rule, with its older-form and untemplated-card
excuses). The base's digests are not compared where `base.identity` is ABSENT (an
untemplated record's tokenizer digest, a base this machine could not compare), and a
digest the record leaves null (`base.config_sha256` before dlm-git recorded it) is an
older record's form.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dlm_git.hashing import canonical_json

if TYPE_CHECKING:
    from dlm_git.manifest.schema import Manifest

NOT_COMPARED = frozenset(
    {"dlm_sha256", "sources", "lock_sha256", "base.revision", "segments", "adapter.files"}
)
"""Manifest fields a bitwise replay may legitimately record otherwise (module docstring)."""
OF_THE_BASE = frozenset(
    {"tokenizer_sha256", "base.tensor_root", "base.tokenizer_sha256", "base.config_sha256"}
)
"""The base's digests: compared only where the hash level compared the base."""
OLDER_NULL = frozenset({"base.config_sha256"})
"""Fields an older dlm-git left null: a null record of one is not compared."""
SHOWN = 4
"""How many differing fields a detail names with their values."""


def differing_claims(recorded: Manifest, replayed: Manifest, base_compared: bool) -> list[str]:
    """Each compared field (dotted path, module docstring) whose recorded value is not
    the replay's, in the manifest's key order, as `path (recorded X, replayed Y)`."""
    skipped = NOT_COMPARED if base_compared else NOT_COMPARED | OF_THE_BASE
    before, after = recorded.model_dump(mode="json"), replayed.model_dump(mode="json")
    out = []
    for path, was, now in _leaves(before, after, ""):
        if path in skipped or (path in OLDER_NULL and was is None):
            continue
        if _differ(was, now):
            out.append(f"{path} (recorded {_shown(was)}, replayed {_shown(now)})")
    return out


def describe(differing: list[str]) -> str:
    """The replay check's detail for `differing` (non-empty)."""
    more = len(differing) - SHOWN
    listed = "; ".join(differing[:SHOWN]) + (f"; and {more} more" if more > 0 else "")
    return f"weights identical but the manifest records what the replay did not: {listed}"


_MISSING = object()


def _leaves(before: Any, after: Any, prefix: str) -> Iterator[tuple[str, Any, Any]]:
    """(path, recorded, replayed) for every leaf: mappings are descended key by key (a key
    one side lacks is `_MISSING` there), anything else, lists included, is one leaf."""
    if not (isinstance(before, dict) and isinstance(after, dict)) or prefix in NOT_COMPARED:
        yield prefix, before, after
        return
    for key in [*before, *(k for k in after if k not in before)]:
        path = f"{prefix}.{key}" if prefix else str(key)
        yield from _leaves(before.get(key, _MISSING), after.get(key, _MISSING), path)


def _differ(was: Any, now: Any) -> bool:
    """Two leaves differ: one side lacks the key, or their canonical JSON differs."""
    if was is _MISSING or now is _MISSING:
        return was is not now
    return canonical_json(was) != canonical_json(now)


def _shown(value: Any) -> str:
    """A value for a one-line detail: its repr (control characters escaped), cut to 40."""
    text = "nothing" if value is _MISSING else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
