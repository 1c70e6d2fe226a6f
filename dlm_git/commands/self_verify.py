"""`dlm-git self-verify ARTIFACT --key PUB.pem [--signature SIG] [--installed] [--json]`: is
this dlm-git release (a wheel or sdist, downloaded or built) the one its publisher signed
with `make release SIGNING_KEY=...`, and with `--installed`, is the dlm-git running this
exactly that wheel's files (no link, no special file, every `__pycache__/*.pyc` the
compiled bytecode of a verified source)? One line; exit 0 VERIFIED, 1 FAILED (a changed
byte, another key, a malformed signature), 2 misuse (a missing file, a key that is not an
EC public key). The check itself is `dlm_git.sign.artifact`; it needs no `sign` extra."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Argument, Exit, Option
from dlm_git.output import echo, emit_json


def self_verify(
    artifact: Annotated[
        Path, Argument(metavar="ARTIFACT", help="The release artifact: a dlm-git wheel or sdist.")
    ],
    key: Annotated[
        Path,
        Option(
            "--key",
            help="The publisher's EC public key PEM, as you trust it (never read from the"
            " release).",
        ),
    ],
    signature: Annotated[
        Path | None,
        Option("--signature", help="The signature bundle (default: ARTIFACT.sig beside it)."),
    ] = None,
    installed: Annotated[
        bool,
        Option(
            "--installed",
            help="Also check that the dlm-git running this is exactly the wheel's files.",
        ),
    ] = False,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check a dlm-git release artifact against its signature and a public key you trust."""
    import dlm_git
    from dlm_git.sign.artifact import (
        ArtifactVerdict,
        check_installed,
        signature_path,
        verify_artifact,
    )

    check = verify_artifact(artifact, signature or signature_path(artifact), key)
    if installed:
        check = check_installed(check, artifact, Path(dlm_git.__file__).resolve().parent)
    if as_json:
        emit_json(
            {
                "artifact": str(artifact),
                "sha256": check.sha256,
                "verdict": str(check.verdict),
                "detail": check.detail,
            }
        )
    else:
        echo(f"{artifact}: {check.verdict} sha256 {check.sha256}: {check.detail}")
    if check.verdict is not ArtifactVerdict.VERIFIED:
        raise Exit(1)
