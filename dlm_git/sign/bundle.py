"""A document's signature: a Sigstore bundle (DSSE envelope over an in-toto Statement v1)
as `model_signing` writes it, read and judged without `model_signing` or torch.

Invariants:
- The signed material of a document is exactly `SIGNED_FILES`: the `.dlm`, `dlm.lock`,
  `manifest.json` and the two adapter files, named relative to the document directory.
  The manifest binds the adapter to every input by hash, so a signature over these five
  cannot be moved to another training's records.
- A bundle is hostile input: size-capped, parsed through `safeparse` (nesting bounded),
  every field type-checked (`safeparse.dig`), the payload type
  must be in-toto, the statement in-toto v1 with model_signing's predicate and the
  `files` serialization with sha256 digests; anything else is a `BundleError` naming
  what is wrong. A signature is checked only with a key this machine already trusts or
  the project's policy names (matched by the bundle's key hint: the sha256 of the key's
  PEM), never with a key the bundle or the commit supplies.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import NamedTuple, TypeVar

from dlm_git.errors import DlmGitError
from dlm_git.layout import (
    ADAPTER_DIR,
    ADAPTER_FILES,
    LEGACY_ADAPTER_FILES,
    LOCK_NAME,
    MANIFEST_NAME,
)
from dlm_git.safeparse import dig, load_json

MAX_BUNDLE_BYTES = 1 << 20
IN_TOTO_PAYLOAD = "application/vnd.in-toto+json"
STATEMENT_V1 = "https://in-toto.io/Statement/v1"
PREDICATE = "https://model_signing/signature/v1.0"
BUNDLE_MEDIA = "application/vnd.dev.sigstore.bundle"
HEX64 = re.compile(r"[0-9a-f]{64}")
T = TypeVar("T")


class BundleError(DlmGitError):
    """A signature file that is not a well-formed model_signing bundle."""


def signed_files(dlm_name: str) -> tuple[str, ...]:
    """The paths (relative to the document directory) a document's signature covers."""
    return (dlm_name, LOCK_NAME, MANIFEST_NAME, *(f"{ADAPTER_DIR}/{n}" for n in ADAPTER_FILES))


def signed_digests(
    dlm_name: str,
    dlm: bytes | None,
    lock: bytes | None,
    manifest: bytes | None,
    adapter: Mapping[str, object],
) -> dict[str, str | None]:
    """The sha256 each signed file must have: the records' own bytes, and the adapter
    files as the manifest records them (`adapter`: file name -> recorded sha256); None
    where there is nothing to compare (absent, or not a digest)."""
    from dlm_git.hashing import sha256_bytes

    def sha(data: bytes | None) -> str | None:
        return sha256_bytes(data) if data is not None else None

    out = {dlm_name: sha(dlm), LOCK_NAME: sha(lock), MANIFEST_NAME: sha(manifest)}
    for name in ADAPTER_FILES:
        recorded = adapter.get(name)
        if name not in LEGACY_ADAPTER_FILES and recorded is None:
            continue  # a record from before the card: signed without it
        out[f"{ADAPTER_DIR}/{name}"] = recorded if isinstance(recorded, str) else None
    return out


class Bundle(NamedTuple):
    key_hint: str
    payload_type: str
    payload: bytes
    signature: bytes
    resources: dict[str, str]
    """name -> sha256 hex of each signed file."""


def _get(obj: object, key: str, kind: type[T], what: str) -> T:
    value = dig(obj, key, kind=kind)
    if value is None:
        raise BundleError("signature", f"{what} is missing or not a {kind.__name__}")
    return value


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BundleError("signature", f"{what} is not base64") from None


def _json(data: bytes, what: str) -> object:
    try:
        return load_json(data)
    except ValueError:  # UnicodeDecodeError and nesting too deep too
        raise BundleError("signature", f"{what} is not JSON (truncated?)") from None


def parse_bundle(data: bytes) -> Bundle:
    """The parts of a bundle that verification needs (BundleError when malformed)."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError("signature", f"larger than {MAX_BUNDLE_BYTES} bytes")
    top = _json(data, "the bundle")
    media = _get(top, "mediaType", str, "mediaType")
    if not media.startswith(BUNDLE_MEDIA):
        raise BundleError("signature", f"mediaType {media[:60]!r} is not a Sigstore bundle")
    material = _get(top, "verificationMaterial", dict, "verificationMaterial")
    hint = _get(_get(material, "publicKey", dict, "publicKey"), "hint", str, "key hint")
    if not HEX64.fullmatch(hint):
        raise BundleError("signature", "the key hint is not a sha256")
    envelope = _get(top, "dsseEnvelope", dict, "dsseEnvelope")
    payload_type = _get(envelope, "payloadType", str, "payloadType")
    if payload_type != IN_TOTO_PAYLOAD:
        raise BundleError(
            "signature", f"DSSE payload type {payload_type[:60]!r} is not {IN_TOTO_PAYLOAD}"
        )
    payload = _b64(_get(envelope, "payload", str, "payload"), "the payload")
    sigs = _get(envelope, "signatures", list, "signatures")
    if len(sigs) != 1:
        raise BundleError("signature", "the envelope must hold exactly one signature")
    sig = _b64(_get(sigs[0], "sig", str, "signature"), "the signature")
    return Bundle(hint, payload_type, payload, sig, _resources(_json(payload, "the payload")))


def _resources(statement: object) -> dict[str, str]:
    if _get(statement, "_type", str, "statement _type") != STATEMENT_V1:
        raise BundleError("signature", "the payload is not an in-toto Statement v1")
    if _get(statement, "predicateType", str, "predicateType") != PREDICATE:
        raise BundleError("signature", f"the predicate is not {PREDICATE}")
    predicate = _get(statement, "predicate", dict, "predicate")
    serialization = _get(predicate, "serialization", dict, "serialization")
    method = _get(serialization, "method", str, "serialization method")
    if method != "files" or serialization.get("hash_type") != "sha256":
        raise BundleError("signature", "the serialization is not files with sha256 digests")
    out: dict[str, str] = {}
    for row in _get(predicate, "resources", list, "resources"):
        name = _get(row, "name", str, "a resource name")
        digest = _get(row, "digest", str, "a resource digest")
        if _get(row, "algorithm", str, "a resource algorithm") != "sha256":
            raise BundleError("signature", f"resource {name[:60]!r} is not sha256")
        if not HEX64.fullmatch(digest) or name in out:
            raise BundleError("signature", f"resource {name[:60]!r} is malformed")
        out[name] = digest
    return out


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature is over."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def signature_holds(bundle: Bundle, public_key_pem: bytes) -> bool:
    """Whether the envelope's ECDSA signature verifies under this EC public key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = serialization.load_pem_public_key(public_key_pem)
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    digest = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}.get(
        key.curve.key_size
    )
    if digest is None:
        return False
    try:
        key.verify(bundle.signature, pae(bundle.payload_type, bundle.payload), ec.ECDSA(digest))
    except InvalidSignature:
        return False
    return True


def binding_problem(bundle: Bundle, expected: Mapping[str, str | None]) -> str | None:
    """Why the signed files are not exactly these records (None: they are)."""
    missing = sorted(n for n in expected if n not in bundle.resources)
    extra = sorted(n for n in bundle.resources if n not in expected)
    if missing or extra:
        what = [f"does not cover {', '.join(missing)}"] if missing else []
        what += [f"covers other files: {', '.join(e[:60] for e in extra[:4])}"] if extra else []
        return "the signature " + "; ".join(what)
    differ = sorted(n for n, sha in expected.items() if bundle.resources[n] != sha)
    if differ:
        return f"signed other bytes of {', '.join(differ)} (records changed after signing?)"
    return None
