"""The signature checks of one document (`signature.present`, `.valid`, `.trusted`,
`.binding`), for `verify`, the pre-commit hook and `log` alike.

Invariants:
- What a signature must sign is computed one way: the document's `.dlm`, lock and
  manifest as its revision holds their bytes, and the adapter files as the manifest
  records them (read with `safeparse.dig`, whatever shape the manifest has), judged by
  `sign.judge` with the caller's keys and `required`.
- `signature_state` is read from the checks' states, never from their text: a failed
  check is `invalid`, a passed `signature.valid` is `valid`, a signature that no trusted
  key could check is `untrusted`.
- `cryptography` is imported, and keys are loaded, only when a `dlm.sig` is there.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dlm_git.contract.outcome import Checks
from dlm_git.contract.records import kind_word
from dlm_git.docat import DocAt
from dlm_git.layout import ADAPTER_FILES, SIGNATURE_NAME
from dlm_git.safeparse import dig, load_json

if TYPE_CHECKING:
    from dlm_git.sign.trust import TrustedKey

SignatureState = Literal["valid", "untrusted", "invalid"]


def recorded_adapter(manifest: bytes | None) -> dict[str, object]:
    """Adapter file name -> the sha256 the manifest's bytes record (None where it does not)."""
    try:
        parsed = load_json(manifest) if manifest is not None else None
    except (ValueError, UnicodeDecodeError):
        parsed = None
    return {
        name: dig(parsed, "adapter", "files", name, "sha256", kind=str) for name in ADAPTER_FILES
    }


def signature_checks(
    checks: Checks,
    doc: DocAt,
    keys: Callable[[], Sequence[TrustedKey]],
    required: bool,
) -> list[str]:
    """Judge `doc`'s `dlm.sig` (`keys` asked only when there is one); the notes (an
    unsigned document, an untrusted key) when nothing is required of them."""
    from dlm_git.sign.bundle import signed_digests
    from dlm_git.sign.judge import judge

    name = posixpath.basename(doc.dlm_name or "document.dlm")
    expected = signed_digests(name, doc.dlm, doc.lock, doc.manifest, recorded_adapter(doc.manifest))
    trusted = keys() if doc.signature is not None else []
    decision = judge(doc.signature, expected, trusted, required)
    for check, ok, detail in decision.checks:
        if check == "signature.binding" and not ok:
            detail = f"{SIGNATURE_NAME} does not sign the {kind_word(doc)}records: {detail}"
        checks.add(check, ok, detail)
    return decision.notes


@dataclass(frozen=True)
class Signature:
    state: SignatureState
    detail: str


def signature_state(checks: Checks, notes: list[str]) -> Signature:
    """The state of a judged signature (not required), from its checks' states."""
    broken = next((c for c in checks.items if c.name.startswith("signature.") and not c.ok), None)
    if broken is not None:
        return Signature("invalid", broken.detail)
    trusted = checks.get("signature.trusted")
    if trusted is not None and trusted.ok:
        return Signature("valid", trusted.detail)
    return Signature("untrusted", notes[0] if notes else "no trusted key checked it")
