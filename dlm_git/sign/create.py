"""`dlm-git sign` and `dlm-git keygen`: sign a document's records with `model_signing`,
and make a key pair for users who have none.

Invariants:
- Only records that agree with each other are signed: the adapter files on disk must be
  the bytes `manifest.json` records (run `dvc repro` / `dvc checkout` first).
- The signature is made over the document directory with every path outside
  `signed_files` ignored (the ignore list travels in the signature, so the stock
  `model_signing verify key <doc dir>` checks exactly those files), checked to cover
  exactly the signed files, and installed atomically as `dlm.sig`.
- A private key is written 0600, never overwritten, and never inside a git work tree.
- The signing key and the records are read through `dlm_git.fsutil.read_regular`
  (non-blocking, regular, bounded): a FIFO or device given as `--key` (or configured) is
  one line naming it before model_signing opens anything, never a hang.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from dlm_git import gitio
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.fsutil import (
    MAX_RECORD_BYTES,
    atomic_write_bytes,
    fsync_dir,
    given_file,
    read_regular,
)
from dlm_git.hashing import sha256_file
from dlm_git.layout import (
    ADAPTER_DIR,
    LEGACY_ADAPTER_FILES,
    OUTPUT_NAMES,
    DocLayout,
    find_document,
)
from dlm_git.sign.bundle import BundleError, parse_bundle, signed_digests
from dlm_git.sign.trust import MAX_KEY_BYTES

PRIVATE_NAME = "dlm-signing-key.pem"
KEY_HINT = "give the path of an EC private key PEM file (dlm-git keygen --out DIR makes one)"
PUBLIC_NAME = "dlm-signing-key.pub.pem"
ALWAYS_IGNORED = (*OUTPUT_NAMES, ".dlm-git", "dvc_plots")


class SignError(DlmGitError):
    """A document cannot be signed as it stands (records missing or disagreeing, a bad key)."""


def recorded_digests(layout: DocLayout, dlm_name: str) -> dict[str, str | None]:
    """The sha256 each signed file must have, read from the work tree's records."""
    from dlm_git.manifest.records import read_manifest_bytes

    manifest_bytes = read_regular(layout.manifest, MAX_RECORD_BYTES)
    manifest = read_manifest_bytes(manifest_bytes, str(layout.manifest))
    recorded = {n: f.sha256 for n, f in manifest.adapter.files.items()}
    dlm = read_regular(layout.doc_path, MAX_RECORD_BYTES)
    lock = read_regular(layout.lock, MAX_RECORD_BYTES)
    return signed_digests(dlm_name, dlm, lock, manifest_bytes, recorded)


def _ignored(doc_dir: Path, signed: set[str]) -> list[str]:
    """Every path of the document directory outside the signed files."""
    top = {p.split("/")[0] for p in signed}
    present = [e.name for e in os.scandir(doc_dir) if e.name not in top]
    inside = [
        f"{ADAPTER_DIR}/{e.name}"
        for e in os.scandir(doc_dir / ADAPTER_DIR)
        if f"{ADAPTER_DIR}/{e.name}" not in signed
    ]
    later = [n for n in ALWAYS_IGNORED if n not in top]
    return sorted(set(present) | set(inside) | set(later))


def sign_document(target: Path, key: Path) -> Path:
    """Sign the document at `target` with the EC private key at `key`; returns dlm.sig."""
    read_regular(key, MAX_KEY_BYTES, hint=KEY_HINT)  # model_signing reads it unchecked
    layout = DocLayout(find_document(target))
    doc_dir = layout.directory
    for path in (layout.lock, layout.manifest, *(layout.adapter / n for n in LEGACY_ADAPTER_FILES)):
        if not path.is_file() or path.is_symlink():
            raise SignError(str(path), "missing (or a link)", "train first: dvc repro")
    expected = recorded_digests(layout, layout.doc_path.name)
    for rel in (r for r in expected if r.startswith(f"{ADAPTER_DIR}/")):
        path = doc_dir / rel
        if not path.is_file() or path.is_symlink() or sha256_file(path) != expected[rel]:
            raise SignError(
                str(doc_dir / rel),
                "is not the adapter manifest.json records",
                "dvc checkout (or dvc repro), then sign",
            )
    bundle = model_signing_bundle(doc_dir, key, _ignored(doc_dir, set(expected)))
    try:
        resources = parse_bundle(bundle).resources
    except BundleError as exc:
        what = f"model_signing wrote an unreadable bundle: {exc.message}"
        raise SignError(str(key), what) from None
    if resources != expected:
        raise SignError(str(doc_dir), "the signature does not cover exactly the records")
    atomic_write_bytes(layout.signature, bundle)
    return layout.signature


def check_signing_key(key: Path) -> None:
    """Before any work: model_signing imports and `key` is an EC private key PEM (a regular
    file); else `UsageError` naming the key (SignError when the extra is missing)."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    _model_signing()
    with given_file(key, KEY_HINT):
        pem = read_regular(key, MAX_KEY_BYTES, hint=KEY_HINT)
    try:
        loaded = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError):
        loaded = None
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise UsageError(str(key), "is not an unencrypted EC private key PEM", KEY_HINT)


def _model_signing() -> None:
    """SignError unless model_signing (and the pyOpenSSL it imports undeclared) imports."""
    try:
        from model_signing import hashing, signing  # noqa: F401
    except ImportError as exc:
        raise SignError(
            "dlm-git sign",
            f"needs the sign extra ({exc.name or 'model_signing'} is not installed)",
            "pip install -c requirements/constraints.txt 'dlm-git[sign]'",
        ) from None


def model_signing_bundle(target: Path, key: Path, ignore: list[str]) -> bytes:
    """The model_signing bundle (Sigstore bundle, DSSE, in-toto v1, `files` serialization
    with sha256) over `target`, a directory less the `ignore` paths or a single file (its
    one resource is named "."), signed with the EC private key at `key`: the one signing
    function of documents (`sign_document`) and release artifacts (`make release`)."""
    _model_signing()
    from model_signing import hashing, signing

    read_regular(key, MAX_KEY_BYTES, hint=KEY_HINT)  # model_signing reads it unchecked
    fd, tmp = tempfile.mkstemp(prefix=".dlm-sig.", dir=target.parent)
    os.close(fd)
    try:
        config = signing.Config().use_elliptic_key_signer(private_key=key)  # type: ignore[no-untyped-call]
        hashing_config = hashing.Config()  # type: ignore[no-untyped-call]
        hashing_config.use_file_serialization().set_ignored_paths(paths=ignore)
        config.set_hashing_config(hashing_config)
        config.sign(target, tmp)
        return Path(tmp).read_bytes()
    except (ValueError, TypeError) as exc:
        raise SignError(str(key), f"cannot sign with it: {str(exc)[:100]}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def keygen(out: Path) -> tuple[Path, Path]:
    """An EC P-256 key pair in `out`: the private key 0600, refused inside a git work tree."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    out = Path(out)
    probe = next((p for p in (out, *out.parents) if p.exists()), Path("/"))
    if gitio.git(["rev-parse", "--is-inside-work-tree"], probe, check=False).strip() == b"true":
        raise SignError(
            str(out),
            "is inside a git work tree: a private key never goes into a repository",
            "choose a directory outside it, e.g. ~/.config/dlm-git",
        )
    private, public = out / PRIVATE_NAME, out / PUBLIC_NAME
    for path in (private, public):
        if path.exists():
            raise SignError(str(path), "exists; refusing to overwrite a key")
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{PRIVATE_NAME}.", dir=out)  # created 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, private)  # fails if it appeared meanwhile: never overwrite
    finally:
        os.unlink(tmp)
    fsync_dir(out)
    atomic_write_bytes(
        public,
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return private, public
