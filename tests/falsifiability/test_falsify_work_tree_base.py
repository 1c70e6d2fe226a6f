"""The work tree's `bases/tiny` never sets the bar a commit is judged by: a checkout that
force-adds it, or a `dvc pull` of a hostile stage's outputs, can fill it with a spec file
naming the recorded build and any weights. `verify` takes the tiny base from
`--tiny-dir`, the auditor's own base cache, or a build of its own there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlm_git.layout import PIPELINE_TINY_DIR


def test_forged_weights_in_the_work_tree_base_are_not_the_base_verified_against(
    forge: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The honest commit, the work tree's `bases/tiny` with one weight byte changed, and
    an auditor whose base cache is empty: VERIFIED against a base built by the verifier.
    Before, the forged weights were taken (found by their spec file alone), and
    `base.identity` FAILED the honest commit, just as it passed a record trained on them."""
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(tmp_path / "empty-cache"))
    weights = forge.root / PIPELINE_TINY_DIR / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    result = forge.verify("HEAD")
    assert result.code == 0, result.explain()
