"""`dlm-git tokenize` (the pipeline's `tokenize` stage, a fresh interpreter in every
`dvc repro`) loads the tokenizer only for a row its token cache does not hold (issue 28).

The first run tokenizes every row of a document over a generated corpus, and imports
the tokenizer to do it (`tokenizers`; transformers' template renderer too where a row is
an instruction section of a base with a chat template, as here; torch never for a base
`dlm_git.train.fasttok` takes: tests/unit/test_tokenize_fast_path.py); the second finds
every row in the cache and imports none of it (no torch, transformers, tokenizers,
chat-template engine, peft or DVC): it reads the document's pack and writes `tokens/`
with numpy and safetensors alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from dlm_git.base.tiny import ensure_tiny_base
from tests.support.cli import imports_of
from tests.support.corpus import make_corpus_doc

TOKENIZER_STACK = {"torch", "transformers", "tokenizers", "jinja2", "peft", "dvc"}
BODY = """
# Notes

Prose the tokenizer windows.

::instruction::
### Q
What does a warm run load?

### A
No tokenizer.
"""


def test_a_warm_tokenize_imports_no_tokenizer_stack(git_repo: Path) -> None:
    ensure_tiny_base()  # builtin:tiny from the session's base cache, built once
    make_corpus_doc(git_repo, n_files=6, body=BODY, seq_len=64)
    cold = imports_of(git_repo, "tokenize", "doc", "--json")
    assert cold.code == 0, cold.stdout
    assert json.loads(cold.stdout)["cache"]["misses"] == 8  # 6 files, 2 sections
    assert {"transformers", "tokenizers"} <= cold.modules  # the rows were tokenized
    warm = imports_of(git_repo, "tokenize", "doc", "--json")
    assert warm.code == 0, warm.stdout
    summary = json.loads(warm.stdout)
    assert summary["cache"]["misses"] == 0
    assert summary["stream_root"] == json.loads(cold.stdout)["stream_root"]
    assert sorted(TOKENIZER_STACK & warm.modules) == []
