"""`dlm-git sign [--doc PATH] --key KEY` and `dlm-git keygen --out DIR`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Option
from dlm_git.errors import UsageError
from dlm_git.output import echo

KEY_ENV = "DLM_GIT_SIGNING_KEY"
KEY_CONFIG = "dlm-git.signingKey"


def sign(
    doc: Annotated[
        list[Path] | None,
        Option(
            "--doc",
            metavar="<path>",
            help="A document (file or directory); repeatable. Default: params.yaml's.",
        ),
    ] = None,
    key: Annotated[
        Path | None,
        Option(
            "--key", help=f"EC private key PEM (default: ${KEY_ENV}, else git config {KEY_CONFIG})."
        ),
    ] = None,
    if_configured: Annotated[
        bool,
        Option(
            "--if-configured",
            help="Without a key (no --key, env or git config): say so and exit 0 (the DVC stage).",
        ),
    ] = False,
) -> None:
    """Sign each document's .dlm, dlm.lock, manifest.json and adapter into dlm.sig
    (run after `dvc repro`, before `git commit`)."""
    from dlm_git import gitio
    from dlm_git.sign.create import sign_document

    root = gitio.toplevel(Path.cwd())
    if key is None and if_configured and not _key_setting(root):
        echo(f"sign: no signing key configured (${KEY_ENV}, git config {KEY_CONFIG}): skipped")
        return
    key = key or _configured_key(root)
    docs = list(doc) if doc else _params_documents(root)
    if not docs:
        raise UsageError("sign", "no documents", "give --doc PATH (or list them in params.yaml)")
    for target in docs:
        path = sign_document(target, key)
        echo(f"{path}: signed")


def _key_setting(root: Path) -> str | None:
    from dlm_git import gitio

    return os.environ.get(KEY_ENV) or gitio.config_get(KEY_CONFIG, root)


def _configured_key(root: Path) -> Path:
    value = _key_setting(root)
    if not value:
        raise UsageError(
            "sign",
            "no signing key",
            f"give --key KEY.pem, set ${KEY_ENV}, or git config {KEY_CONFIG} PATH"
            " (dlm-git keygen --out DIR makes one)",
        )
    return Path(os.path.expanduser(value))


def _params_documents(root: Path) -> list[Path]:
    from dlm_git.docat import Rev, TreeAt

    with TreeAt(root, Rev.WORKTREE) as tree:
        return [root / d for d in tree.params.listed or []]


def keygen(
    out: Annotated[Path, Option("--out", help="Directory for the key pair (outside the repo).")],
) -> None:
    """Make an EC P-256 key pair: the private key 0600, never inside a git work tree."""
    from dlm_git.sign.create import keygen as make

    private, public = make(out)
    echo(f"{private}: private key (0600; keep it out of every repository)")
    echo(f"{public}: public key (trust it: git config --add dlm-git.trustedKeys {public})")
