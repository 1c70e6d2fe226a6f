"""Tokenize a loaded document into training sequences (through the token cache if enabled).

Invariant: the result depends only on the document's rows, the tokenizer's state and
`sequence_len`; with or without the cache the sequences are identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlm_git.base.resolve import ResolvedBase
from dlm_git.doc.load import LoadedDocument
from dlm_git.train.rows import build_rows
from dlm_git.train.tokenize import RowTokenizer, Sequence, token_stream_root


@dataclass
class TokenizeResult:
    sequences: list[Sequence]
    stream_root: str
    rows: int
    tokens: int
    template_kind: str
    pad_id: int
    skipped_preference: int
    cache_stats: dict[str, Any] | None = field(default=None)


def tokenize_document(
    loaded: LoadedDocument, resolved: ResolvedBase, *, use_cache: bool = True
) -> TokenizeResult:
    fm = loaded.doc.frontmatter
    tokenizer = RowTokenizer(resolved.path, fm.system_prompt, fm.training.sequence_len)
    has_template = tokenizer.has_chat_template()
    rows, skipped_pref = build_rows(loaded.rows, fm.system_prompt, has_template)
    sequences: list[Sequence] = []
    for row in rows:
        sequences.extend(tokenizer.tokenize(row))
    tok = tokenizer.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return TokenizeResult(
        sequences=sequences,
        stream_root=token_stream_root(sequences),
        rows=len(rows),
        tokens=sum(len(s.input_ids) for s in sequences),
        template_kind="chat_template" if has_template else "plain",
        pad_id=int(pad),
        skipped_preference=skipped_pref,
    )
