"""A signature bundle is hostile input: every malformation is a BundleError naming it,
and the binding names what differs."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dlm_git.sign.bundle import (
    IN_TOTO_PAYLOAD,
    MAX_BUNDLE_BYTES,
    BundleError,
    binding_problem,
    parse_bundle,
    signed_files,
)

DIGEST = "a" * 64


def statement(**changes: Any) -> dict[str, Any]:
    st: dict[str, Any] = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "demo", "digest": {"sha256": DIGEST}}],
        "predicateType": "https://model_signing/signature/v1.0",
        "predicate": {
            "resources": [
                {"name": n, "algorithm": "sha256", "digest": DIGEST}
                for n in signed_files("demo.dlm")
            ],
            "serialization": {"method": "files", "hash_type": "sha256", "allow_symlinks": False},
        },
    }
    st.update(changes)
    return st


def bundle(payload: dict[str, Any] | bytes | None = None, **changes: Any) -> bytes:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload or statement()).encode()
    top: dict[str, Any] = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": "b" * 64}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": base64.b64encode(raw).decode(),
            "payloadType": IN_TOTO_PAYLOAD,
            "signatures": [{"sig": base64.b64encode(b"sig").decode(), "keyid": ""}],
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        obj = top
        for p in parents:
            obj = obj[p]
        obj[last] = value
    return json.dumps(top).encode()


def test_a_well_formed_bundle_parses() -> None:
    parsed = parse_bundle(bundle())
    assert parsed.key_hint == "b" * 64 and parsed.signature == b"sig"
    assert sorted(parsed.resources) == sorted(signed_files("demo.dlm"))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b" " * (MAX_BUNDLE_BYTES + 1), "larger than"),
        (b"[1]", "mediaType"),
        (bundle(mediaType="text/plain"), "not a Sigstore bundle"),
        (bundle(verificationMaterial__publicKey__hint="xyz"), "not a sha256"),
        (bundle(dsseEnvelope__payloadType="application/json"), "is not application/vnd.in-toto"),
        (bundle(dsseEnvelope__payload="!!!"), "not base64"),
        (bundle(dsseEnvelope__signatures=[]), "exactly one signature"),
        (bundle(dsseEnvelope__signatures=[{"sig": 7}]), "signature is missing"),
        (bundle(b"not json"), "payload is not JSON"),
        (bundle(statement(_type="https://in-toto.io/Statement/v0.1")), "Statement v1"),
        (bundle(statement(predicateType="https://slsa.dev/provenance/v1")), "predicate"),
    ],
)
def test_malformed_bundles_are_named(data: bytes, words: str) -> None:
    with pytest.raises(BundleError, match=words):
        parse_bundle(data)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"algorithm": "md5"}, "is not sha256"),
        ({"digest": "A" * 64}, "malformed"),
        ({"name": 7}, "resource name"),
    ],
)
def test_malformed_resources_are_named(change: dict[str, Any], words: str) -> None:
    st = statement()
    st["predicate"]["resources"][0].update(change)
    with pytest.raises(BundleError, match=words):
        parse_bundle(bundle(st))


def test_a_duplicated_resource_is_malformed() -> None:
    st = statement()
    st["predicate"]["resources"].append(dict(st["predicate"]["resources"][0]))
    with pytest.raises(BundleError, match="malformed"):
        parse_bundle(bundle(st))


def test_the_binding_names_what_differs() -> None:
    parsed = parse_bundle(bundle())
    expected = dict.fromkeys(signed_files("demo.dlm"), DIGEST)
    assert binding_problem(parsed, expected) is None
    assert "dlm.lock" in (binding_problem(parsed, {**expected, "dlm.lock": "c" * 64}) or "")
    other = dict.fromkeys(signed_files("other.dlm"), DIGEST)
    problem = binding_problem(parsed, other) or ""
    assert "does not cover other.dlm" in problem and "covers other files: demo.dlm" in problem


def test_signing_without_the_sign_extra_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dlm_git.sign.create import SignError, model_signing_bundle

    monkeypatch.setitem(sys.modules, "model_signing", None)  # as if not installed
    with pytest.raises(SignError, match=r"needs the sign extra .*dlm-git\[sign\]"):
        model_signing_bundle(tmp_path, tmp_path / "key.pem", [])
