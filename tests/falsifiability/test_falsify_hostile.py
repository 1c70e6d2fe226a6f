"""Hostile commits: forgeries that attack how verify reads the commit, not what it
records. A file name that splits git's object requests (item 1) and a dvc.lock md5 or
`.dir` listing that steers verify to files outside the DVC cache (item 2): each must fail
`dlm-git verify`, naming the check that caught it, and the pre-push hook must refuse it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ZERO = "0" * 40


def pre_push(forge: Any, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The pre-push hook on HEAD, in-process: (exit code, stderr)."""
    from dlm_git.hooks.pre_push import run

    sha = forge.git("rev-parse", "HEAD").strip()
    capfd.readouterr()
    code = run(forge.root, f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    return code, capfd.readouterr().err


def test_newline_in_a_name_cannot_swap_objects(
    forge: Any, forgery: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """A source file edited after training, plus a file named `<prefix>\\n<blob id of the
    original bytes>` sorted just before it. Read by name, one per line, the name splits
    into two requests and the edited file is answered with the original bytes; read by
    object id, the edit and the extra file are both seen."""
    notes = forge.root / forgery.DOC / "notes"
    target = sorted((p for p in notes.iterdir() if p.is_file()), key=lambda p: p.name)[-1]
    original = target.read_bytes()
    oid = forge.git("hash-object", str(target)).strip()
    target.write_bytes(original + b"\nA line written after training.\n")
    forged = notes / (target.name[:-1] + "\n" + oid)
    forged.write_bytes(b"decoy\n")
    forge.commit("swap by file name")
    listed = forge.git("ls-files", "-z", f"{forgery.DOC}/notes").split("\0")
    rel = f"{forgery.DOC}/notes/"
    assert listed.index(rel + target.name) == listed.index(rel + forged.name) + 1
    result = forge.verify("HEAD")
    forgery.assert_caught(result, "sources.root")
    assert target.name in result.first_failure["detail"]
    code, err = pre_push(forge, capfd)
    assert code == 1 and "sources.root" in err and "push refused" in err, err
