"""Tokenize a loaded document into training sequences, through the token cache if enabled.

Invariants:
- The result depends only on the document's rows, the tokenizer's state and
  `sequence_len`; with or without the cache the sequences are identical.
- A run whose rows are all cached never loads the tokenizer (nor imports transformers).
- `--no-cache` (use_cache=False) neither reads nor writes nor records anything in the cache.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dlm_git.base.resolve import ResolvedBase
from dlm_git.cache.entry import encode_entry
from dlm_git.cache.store import TokenCache, default_cache_dir, entry_key
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
    skipped_preference: int
    tokenizer: RowTokenizer
    cache_stats: dict[str, Any] | None = field(default=None)

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        return int(pad)


def tokenize_document(
    loaded: LoadedDocument, resolved: ResolvedBase, *, use_cache: bool = True
) -> TokenizeResult:
    fm = loaded.doc.frontmatter
    seq_len = fm.training.sequence_len
    tokenizer = RowTokenizer(resolved.path, fm.system_prompt, seq_len)
    has_template = tokenizer.has_chat_template()
    rows, skipped_pref = build_rows(loaded.rows, fm.system_prompt, has_template)
    cache = TokenCache(default_cache_dir(loaded.repo_root)) if use_cache else None
    tok_sha = resolved.identity.tokenizer_sha256
    started = time.perf_counter()
    sequences: list[Sequence] = []
    leaves: list[bytes] = []
    used: dict[str, int] = {}
    written: dict[str, int] = {}
    hits = misses = 0
    for row in rows:
        key = entry_key(row.row_id, tok_sha, seq_len)
        found = cache.get(key, row.row_id) if cache is not None else None
        if found is not None:
            seqs, leaf, used[key] = found
            hits += 1
        else:
            seqs = tokenizer.tokenize(row)
            misses += 1
            data, leaf = encode_entry(key, row.row_id, seqs)
            if cache is not None:
                written[key] = cache.put(key, data)
        sequences.extend(seqs)
        leaves.append(leaf)
    seconds = time.perf_counter() - started
    stats = None
    if cache is not None:
        run = cache.record_run(
            used,
            written,
            fm.training.cache.max_bytes,
            {
                "dlm_id": fm.dlm_id,
                "total_rows": len(rows),
                "hits": hits,
                "misses": misses,
                "tokenize_seconds": seconds,
            },
        )
        stats = {"path": str(cache.root), **run.to_json()}
    return TokenizeResult(
        sequences=sequences,
        stream_root=token_stream_root(leaves),
        rows=len(rows),
        tokens=sum(len(s.input_ids) for s in sequences),
        template_kind="chat_template" if has_template else "plain",
        skipped_preference=skipped_pref,
        tokenizer=tokenizer,
        cache_stats=stats,
    )
