"""A release artifact (the wheel or sdist `make release` builds) checked against a key the
auditor trusts: `dlm-git self-verify`.

Invariants:
- `make release` signs each artifact with the one signing function
  (`create.model_signing_bundle`) into `NAME.sig`: a model_signing bundle whose one
  resource, ".", is the artifact's sha256, so the stock `model_signing verify key NAME
  --signature NAME.sig --public_key PUB.pem` accepts it too.
- VERIFIED means all three: the bundle is well formed (`bundle.parse_bundle`: hostile
  input, bounded), its ECDSA signature holds under the given public key
  (`bundle.signature_holds`; nothing in the bundle chooses the key) and its one resource
  is the artifact's sha256. Anything else is FAILED with why.
- The signature binds bytes, not the file's name: the version a wheel or sdist installs
  is inside it (METADATA, PKG-INFO), and `ArtifactCheck.sha256` names what was checked.
- `--installed` (a wheel only) then compares the dlm-git that runs the check with the
  verified wheel: every `dlm_git/` file its RECORD lists must be installed with that
  sha256, and no other file may lie in the installed package. One entry per file
  changed, missing or added; a symbolic link (file or directory: import would follow
  it) and anything but a regular file or directory are entries too, never followed or
  read; each `__pycache__/` file must be the compiled bytecode of a verified source
  (`sign.bytecode`). The walk looks at most 4 entries per released file (plus 64). A
  RECORD csv cannot read (in a wheel whose signature holds) is FAILED, one line.
- What the auditor gives (the artifact, the signature, the key) is read through
  `fsutil` (regular files only, never a FIFO, bounded): a path that is missing or not a
  regular file, or a key that is not an EC public key, is a usage error naming it.
"""

from __future__ import annotations

import base64
import csv
import io
import os
import stat
import zipfile
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from dlm_git.errors import UsageError
from dlm_git.fsutil import digest_regular, given_file, read_regular
from dlm_git.sign.bundle import (
    MAX_BUNDLE_BYTES,
    BundleError,
    parse_bundle,
    signature_holds,
)
from dlm_git.sign.bytecode import bytecode_problems
from dlm_git.sign.trust import MAX_KEY_BYTES, key_hint

SIGNATURE_SUFFIX = ".sig"
PACKAGE = "dlm_git"
MAX_WHEEL_RECORD_BYTES = 1 << 20
RESOURCE = "."
"""The name model_signing gives the one file it signs when given a file, not a directory."""


class ArtifactVerdict(StrEnum):
    VERIFIED = "VERIFIED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class ArtifactCheck:
    verdict: ArtifactVerdict
    sha256: str
    detail: str


def signature_path(artifact: Path) -> Path:
    """Where `make release` puts an artifact's signature: beside it, `NAME.sig`."""
    return artifact.with_name(artifact.name + SIGNATURE_SUFFIX)


def _read(path: Path, limit: int, what: str) -> bytes:
    with given_file(path, f"give the {what}"):
        return read_regular(path, limit)


def _public_key(path: Path) -> tuple[bytes, str]:
    pem = _read(path, MAX_KEY_BYTES, "public key PEM the release is signed with")
    try:
        return pem, key_hint(pem)
    except ValueError:
        raise UsageError(
            str(path),
            "is not an EC public key PEM",
            "give the public key (dlm-signing-key.pub.pem), never the private one",
        ) from None


def _digest(artifact: Path) -> str:
    with given_file(artifact, "give the downloaded wheel or sdist"):
        return digest_regular(artifact, "sha256")


def verify_artifact(artifact: Path, signature: Path, public_key: Path) -> ArtifactCheck:
    """Whether `signature` signs exactly the bytes of `artifact` under `public_key`."""
    pem, hint = _public_key(public_key)
    sha = _digest(artifact)
    # read past the bundle's cap, so that an oversized signature is FAILED by parse_bundle
    data = _read(signature, 64 * MAX_BUNDLE_BYTES, f"signature ({artifact.name}{SIGNATURE_SUFFIX})")

    def failed(why: str) -> ArtifactCheck:
        return ArtifactCheck(ArtifactVerdict.FAILED, sha, why)

    try:
        bundle = parse_bundle(data)
    except BundleError as exc:
        return failed(f"{signature}: {exc.message}")
    if bundle.key_hint != hint:
        return failed(f"signed by key {bundle.key_hint[:16]}…, not by {public_key} ({hint[:16]}…)")
    if not signature_holds(bundle, pem):
        return failed(f"{signature} does not verify under {public_key} (tampered?)")
    if set(bundle.resources) != {RESOURCE}:
        return failed(f"{signature} signs a directory, not one file (not a release signature)")
    if bundle.resources[RESOURCE] != sha:
        signed = bundle.resources[RESOURCE][:16]
        return failed(f"{signature} signs other bytes (sha256 {signed}…), not this file's")
    return ArtifactCheck(ArtifactVerdict.VERIFIED, sha, f"signed by {public_key} ({hint[:16]}…)")


class MalformedRecord(Exception):
    """The signed wheel's RECORD cannot be read as the CSV a wheel carries."""


def _wheel_record(wheel: Path) -> dict[str, str]:
    """`dlm_git/` path -> RECORD digest (`sha256=` urlsafe base64) of each package file;
    `MalformedRecord` where the RECORD is not CSV (a field past csv's limit included)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
            if len(names) != 1 or archive.getinfo(names[0]).file_size > MAX_WHEEL_RECORD_BYTES:
                raise UsageError(str(wheel), "has no single RECORD", "give the wheel (.whl)")
            text = archive.read(names[0]).decode("utf-8")
    except (zipfile.BadZipFile, UnicodeDecodeError):
        raise UsageError(
            str(wheel), "is not a wheel", "--installed checks against the .whl"
        ) from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        raise MalformedRecord from None
    return {
        row[0]: row[1]
        for row in rows
        if len(row) == 3 and row[0].startswith(f"{PACKAGE}/") and row[1].startswith("sha256=")
    }


def _record_digest(path: Path) -> str:
    raw = bytes.fromhex(digest_regular(path, "sha256", follow_symlinks=False))
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass
class _Installed:
    """What lies in the installed package: its files, its `__pycache__/` files and the
    entries refused outright, with why (each by `dlm_git/...` name)."""

    files: dict[str, Path] = field(default_factory=dict)
    caches: dict[str, Path] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def _entry_problem(path: Path) -> str | None:
    """Why an entry of the installed package is refused: a symbolic link (to a file or to a
    directory, which import would follow) or anything but a regular file or directory."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "is not a regular file"
    return None


def _package_files(package_dir: Path, limit: int) -> _Installed:
    """Every entry of the installed package, never following a link; at most `limit` of
    them are looked at (more is a problem in itself)."""
    found, seen = _Installed(), 0
    for top, dirs, files in os.walk(package_dir):
        kept = []
        for name in sorted(dirs) + sorted(files):
            path = Path(top) / name
            rel = f"{PACKAGE}/{path.relative_to(package_dir).as_posix()}"
            seen += 1
            if seen > limit:
                found.refused[f"{PACKAGE}/"] = f"holds more than {limit} entries"
                dirs[:] = []
                return found
            why = _entry_problem(path)
            if why is not None:
                found.refused[rel] = why
            elif name in dirs:
                kept.append(name)
            elif Path(top).name == "__pycache__":
                found.caches[rel] = path
            else:
                found.files[rel] = path
        dirs[:] = kept
    return found


def installed_problems(recorded: dict[str, str], package_dir: Path) -> list[str]:
    """How the package installed at `package_dir` differs from the wheel's package files
    (`recorded`: RECORD's `dlm_git/` entries), its bytecode caches included."""
    present = _package_files(package_dir, 4 * len(recorded) + 64)
    problems = [f"{name} {why}" for name, why in present.refused.items()]
    verified: dict[str, Path] = {}
    for name, digest in sorted(recorded.items()):
        if name in present.refused:
            continue
        if name not in present.files:
            problems.append(f"{name} is missing")
        elif _record_digest(present.files[name]) != digest:
            problems.append(f"{name} differs")
        else:
            verified[name] = present.files[name]
    extra = sorted(set(present.files) - set(recorded))
    problems += [f"{name} is not in the release" for name in extra]
    return problems + bytecode_problems(present.caches, verified, recorded.keys())


def check_installed(check: ArtifactCheck, wheel: Path, package_dir: Path) -> ArtifactCheck:
    """A VERIFIED wheel check, extended to the installed package at `package_dir`."""
    if check.verdict is not ArtifactVerdict.VERIFIED:
        return check
    try:
        recorded = _wheel_record(wheel)
    except MalformedRecord:
        why = f"the signed wheel's RECORD is malformed: cannot compare {package_dir} with it"
        return replace(check, verdict=ArtifactVerdict.FAILED, detail=why)
    problems = installed_problems(recorded, package_dir)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        why = f"the running dlm-git ({package_dir}) is not this release: {'; '.join(problems[:3])}"
        return replace(check, verdict=ArtifactVerdict.FAILED, detail=why + more)
    same = f"the running dlm-git ({package_dir}) is its {len(recorded)} files"
    return replace(check, detail=f"{check.detail}; {same}")
