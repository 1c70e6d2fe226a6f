"""The signature checks of one document, as a decision each caller renders (verify's
report, the hooks' findings): `signature.present`, `.valid`, `.trusted`, `.binding`.

Invariant: a signature that is there but broken (malformed, failing its key, signing other
records) always fails; an absent or untrusted one fails only when a signature is
required (`--require-signature`, `dlm-git.requireSignature`), and is otherwise reported
in a note. The pre-commit hook judges a staged `dlm.sig` with the same function and the
same `required` as `verify` judges the commit, so nothing `verify` (and with it the
pre-push hook) would fail about a signature is committed silently; `fix_for` is how each
failed check is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dlm_git.layout import SIGNATURE_NAME
from dlm_git.sign.bundle import BundleError, binding_problem, parse_bundle, signature_holds
from dlm_git.sign.trust import POLICY_DIR, TrustedKey

SIGN_HINT = "sign the trained records: dlm-git sign --doc DOC --key KEY.pem"
TRUST_HINT = (
    f"trust the key: git config --add dlm-git.trustedKeys PUB.pem, or commit it under "
    f"{POLICY_DIR}/ in an earlier commit"
)


def _signature_path(doc: str) -> str:
    return SIGNATURE_NAME if doc in ("", ".") else f"{doc}/{SIGNATURE_NAME}"


def resign_hint(doc: str) -> str:
    """Re-sign the document at `doc` (its directory, relative to the repository), or
    remove a signature that no longer signs its records."""
    sig = _signature_path(doc)
    return (
        f"re-sign: dlm-git sign --doc {doc or '.'} --key KEY.pem, then git add {sig};"
        f" or remove it: git rm -f {sig}"
    )


def fix_for(check: str, doc: str) -> str:
    """How to fix a failed `check` of the document at `doc`: sign it (missing), trust the
    key (untrusted), re-sign it or remove `dlm.sig` (broken: malformed, failing its key,
    or signing other records)."""
    if check == "signature.present":
        sig = _signature_path(doc)
        return f"sign: dlm-git sign --doc {doc or '.'} --key KEY.pem, then git add {sig}"
    if check == "signature.trusted":
        return TRUST_HINT
    return resign_hint(doc)


@dataclass
class SignatureDecision:
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.checks)


def judge(
    bundle_bytes: bytes | None,
    expected: Mapping[str, str | None],
    keys: Sequence[TrustedKey],
    required: bool,
) -> SignatureDecision:
    """`expected`: the sha256 of each signed file as the commit records it."""
    out = SignatureDecision()
    if bundle_bytes is None:
        if required:
            out.checks.append(
                ("signature.present", False, f"no {SIGNATURE_NAME} (hint: {SIGN_HINT})")
            )
        else:
            out.notes.append("not signed")
        return out
    out.checks.append(("signature.present", True, SIGNATURE_NAME))
    try:
        bundle = parse_bundle(bundle_bytes)
    except BundleError as exc:
        out.checks.append(("signature.valid", False, f"{SIGNATURE_NAME}: {exc.message}"))
        return out
    short = bundle.key_hint[:16]
    key = next((k for k in keys if k.hint == bundle.key_hint), None)
    if key is None:
        if required:  # untrusted first: it is why the signature cannot be checked
            out.checks.append(
                ("signature.trusted", False, f"key {short}… is not trusted (hint: {TRUST_HINT})")
            )
            out.checks.append(
                ("signature.valid", False, f"signed by key {short}…, which no trusted key matches")
            )
        else:
            out.notes.append(f"signed by key {short}…, which is not trusted here: not checked")
    elif signature_holds(bundle, key.pem):
        out.checks.append(("signature.valid", True, f"verifies under key {short}…"))
        out.checks.append(("signature.trusted", True, f"key {short}… from {key.source}"))
    else:
        out.checks.append(
            ("signature.valid", False, f"does not verify under key {short}… (tampered?)")
        )
    problem = binding_problem(bundle, expected)
    out.checks.append(
        (
            "signature.binding",
            problem is None,
            problem or f"signs exactly this document's {len(expected)} records",
        )
    )
    return out
