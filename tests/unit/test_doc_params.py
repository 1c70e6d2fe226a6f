"""`params.yaml` `docs.<doc>` as training reads it (`dlm_git.train.doc_params`): every key
read or refused in one line, never silently ignored, and judged as check
`params.training` judges it at commit time."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.errors import DlmGitError
from dlm_git.train.doc_params import read_doc_params


def params(tmp_path: Path, text: str) -> Path:
    (tmp_path / "params.yaml").write_text("documents:\n  - a\n" + text, "utf-8")
    return tmp_path


def test_an_empty_or_absent_training_entry_overrides_nothing(tmp_path: Path) -> None:
    for text in (
        "docs:\n  a:\n    training: {}\n",
        "docs:\n  a:\n",
        "docs:\n  a:\n    training:\n",
    ):
        assert read_doc_params(params(tmp_path, text), "a").training == {}


@pytest.mark.parametrize("value", ["[]", "0", "false", "''"])
def test_a_training_entry_that_is_not_a_mapping_is_refused(tmp_path: Path, value: str) -> None:
    """Check `params.training` fails such an entry at commit time: training must not read
    it as "no overrides" and record a run the check would then call stale."""
    root = params(tmp_path, f"docs:\n  a:\n    training: {value}\n")
    with pytest.raises(DlmGitError, match=r"docs\.a\.training: is not a mapping"):
        read_doc_params(root, "a")


@pytest.mark.parametrize("key", ["a/", "./a", "a/."])
def test_a_key_not_written_as_the_document_directory_is_refused(tmp_path: Path, key: str) -> None:
    root = tmp_path
    (root / "params.yaml").write_text(
        f"documents:\n  - {key}\ndocs:\n  {key}:\n    training:\n      lora_r: 4\n", "utf-8"
    )
    with pytest.raises(DlmGitError, match="is not a document directory"):
        read_doc_params(root, "a")
