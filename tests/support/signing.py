"""Signing for tests: key pairs made by the real `dlm-git keygen` in a fresh process, in a
directory outside every repository (a key inside a work tree could be committed), and a
forged repository signed by one of them (`Signed`)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.env import run
from tests.support.forger import Forge
from tests.support.verdicts import Result
from tests.support.verified import DOC

PRIVATE_NAME = "dlm-signing-key.pem"
PUBLIC_NAME = "dlm-signing-key.pub.pem"


def keygen(directory: Path, timeout: float | None = None) -> tuple[Path, Path]:
    """`dlm-git keygen --out directory`; the (private, public) key files it wrote."""
    run(
        [sys.executable, "-m", "dlm_git", "keygen", "--out", str(directory)],
        directory,
        timeout=timeout,
    )
    return directory / PRIVATE_NAME, directory / PUBLIC_NAME


class Signed:
    """A forged repository and the key pairs (name -> (private, public)) that sign it."""

    def __init__(self, forge: Forge, keys: dict[str, tuple[Path, Path]]) -> None:
        self.forge = forge
        self.keys = keys

    def sign(self, who: str = "alice", doc: str = DOC) -> None:
        result = self.forge._call_main(["sign", "--doc", doc, "--key", str(self.keys[who][0])])
        assert result.code == 0, result.stderr

    def trust(self, who: str = "alice") -> None:
        self.forge.git("config", "--add", "dlm-git.trustedKeys", str(self.keys[who][1]))

    def verify(self, *extra: str) -> Result:
        return self.forge.verify("HEAD", "--require-signature", *extra)
