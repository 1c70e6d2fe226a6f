"""Which keys are trusted to sign: the auditor's own, and the project's committed policy.

Invariants:
- Two sources, both honoured: `git config dlm-git.trustedKeys` (one or more public-key
  PEM paths; the auditor's configuration, never read from a commit) and the project's
  policy, the `*.pem` files committed under `POLICY_DIR`.
- Trust changes never validate themselves: the policy that judges commit C is the one in
  C's **first parent**. A commit that adds or replaces a trusted key cannot vouch for a
  signature it adds; the next commit can. A root commit has no policy to inherit: only
  the auditor's own keys count for it. The pre-commit hook uses HEAD's policy (the
  parent of the commit being made), the same rule.
- Keys are matched by the hint model_signing writes: sha256 of the key's PEM
  (SubjectPublicKeyInfo), recomputed from the parsed key so formatting cannot matter.
- A configured key file is read through `dlm_git.fsutil.read_regular` (non-blocking,
  a regular file of at most `MAX_KEY_BYTES`): a FIFO or device there is a usage error
  naming it, never a hang.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

from dlm_git import gitio
from dlm_git.errors import UsageError
from dlm_git.fsutil import NotRegularFile, read_regular

POLICY_DIR = ".dlm-keys"
CONFIG_KEY = "dlm-git.trustedKeys"
MAX_KEY_BYTES = 64 * 1024


class TrustedKey(NamedTuple):
    hint: str
    pem: bytes
    source: str


def canonical_pem(data: bytes) -> bytes:
    """The key's PEM as model_signing hashes it (ValueError: not an EC public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if len(data) > MAX_KEY_BYTES:
        raise ValueError("larger than a public key")
    key = serialization.load_pem_public_key(data)
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError("not an EC public key")
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def key_hint(pem: bytes) -> str:
    return hashlib.sha256(canonical_pem(pem)).hexdigest()


def configured_keys(root: Path) -> list[TrustedKey]:
    """The auditor's keys (`git config dlm-git.trustedKeys`); a path that is not an EC
    public key is a usage error naming it."""
    keys = []
    for value in gitio.config_get_all(CONFIG_KEY, root):
        path = Path(os.path.expanduser(value))
        if not path.is_absolute():
            path = root / path
        try:
            pem = canonical_pem(read_regular(path, MAX_KEY_BYTES))
        except (OSError, ValueError, NotRegularFile) as exc:
            why = exc.message if isinstance(exc, NotRegularFile) else str(exc)[:60]
            raise UsageError(
                f"git config {CONFIG_KEY}",
                f"{value}: not a readable EC public key PEM ({why})",
                f"fix or remove it: git config --unset-all {CONFIG_KEY}",
            ) from None
        keys.append(TrustedKey(hashlib.sha256(pem).hexdigest(), pem, f"{CONFIG_KEY} {value}"))
    return keys


def trusted_keys(root: Path, parent: str | None) -> tuple[list[TrustedKey], list[str]]:
    """The keys that judge a commit whose first parent is `parent` (the commit being made:
    HEAD): the auditor's own, then the parent's policy; and the policy files ignored."""
    policy, bad = policy_keys(root, parent)
    return [*configured_keys(root), *policy], bad


def policy_keys(root: Path, commit: str | None) -> tuple[list[TrustedKey], list[str]]:
    """The committed policy's keys at `commit` (the judged commit's parent), and the
    policy files that are not EC public keys (reported, never trusted)."""
    if commit is None:
        return [], []
    entries = gitio.tree_entries([POLICY_DIR], root, commit, recursive=True)
    files = [(oid, path) for mode, kind, oid, path in entries if kind == "blob"]
    blobs = gitio.read_blobs([oid for oid, path in files if path.endswith(".pem")], root)
    keys, bad = [], []
    for oid, path in files:
        data = blobs.get(oid)
        if not path.endswith(".pem") or data is None:
            continue
        try:
            pem = canonical_pem(data)
        except ValueError:
            bad.append(path)
            continue
        keys.append(TrustedKey(hashlib.sha256(pem).hexdigest(), pem, f"{path} at {commit[:12]}"))
    return keys, bad
