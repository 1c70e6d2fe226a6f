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
from dlm_git.cache.store import PACK_PREFIX, TokenCache, default_cache_dir, entry_key
from dlm_git.doc.load import LoadedDocument
from dlm_git.manifest.records import sources_record
from dlm_git.train.rows import build_rows
from dlm_git.train.tokenize import (
    TOKENS_INDEX,
    RowTokenizer,
    Sequence,
    load_tokens,
    save_tokens,
    token_stream_root,
)


@dataclass
class TokenizeResult:
    sequences: list[Sequence]
    stream_root: str
    rows: int
    tokens: int
    template_kind: str
    skipped_preference: int
    tokenizer: RowTokenizer
    row_counts: list[tuple[str, int]]
    cache_stats: dict[str, Any] | None = field(default=None)
    source: str = "tokenized"
    """"tokenized" (through the cache or not) or "tokens-dir" (read from `tokens/`)."""

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
    row_counts: list[tuple[str, int]] = []
    used: dict[str, int] = {}
    written: dict[str, int] = {}
    hits = misses = 0
    pack_data, pack_index = cache.read_pack(fm.dlm_id) if cache is not None else (b"", {})
    pack_view = memoryview(pack_data)
    run_entries: list[tuple[str, bytes]] = []
    pack_intact = True
    for row in rows:
        key = entry_key(row.row_id, tok_sha, seq_len)
        found = None
        if cache is not None:
            where = pack_index.get(key)
            if where is not None:
                offset, length = where
                found = cache.decode(bytes(pack_view[offset : offset + length]), key, row.row_id)
                pack_intact = pack_intact and found is not None
            if found is None:
                found = cache.get(key, row.row_id)
        if found is not None:
            seqs, leaf, data = found
            used[key] = len(data)
            hits += 1
        else:
            seqs = tokenizer.tokenize(row)
            misses += 1
            data, leaf = encode_entry(key, row.row_id, seqs)
            if cache is not None:
                written[key] = cache.put(key, data)
        run_entries.append((key, data))
        sequences.extend(seqs)
        leaves.append(leaf)
        row_counts.append((row.row_id, len(seqs)))
    seconds = time.perf_counter() - started
    stats = None
    if cache is not None:
        pack_key = f"{PACK_PREFIX}{fm.dlm_id}"
        packed = list(dict(run_entries).items())  # a repeated row is packed once
        if not pack_intact or list(pack_index) != [k for k, _ in packed]:
            written[pack_key] = cache.write_pack(fm.dlm_id, packed)
        else:
            used[pack_key] = len(pack_data)
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
        row_counts=row_counts,
        cache_stats=stats,
    )


def tokens_key(loaded: LoadedDocument, resolved: ResolvedBase) -> dict[str, Any]:
    """What a `tokens/` directory must have been made from to be reused as is."""
    return {
        "dlm_id": loaded.doc.frontmatter.dlm_id,
        "dlm_sha256": loaded.doc.sha256,
        "sources_root": sources_record(
            (f.relpath, f.sha256, f.size) for f in loaded.sources.files
        ).merkle_root,
        "tokenizer_sha256": resolved.identity.tokenizer_sha256,
        "base_tensor_root": resolved.identity.tensor_root,
        "sequence_len": loaded.doc.frontmatter.training.sequence_len,
    }


def write_tokens(loaded: LoadedDocument, resolved: ResolvedBase, result: TokenizeResult) -> None:
    save_tokens(
        loaded.layout.tokens,
        result.sequences,
        result.row_counts,
        {
            "key": tokens_key(loaded, resolved),
            "stream_root": result.stream_root,
            "template": result.template_kind,
            "skipped_preference": result.skipped_preference,
            "sequences": len(result.sequences),
            "tokens": result.tokens,
        },
    )


def load_or_tokenize(
    loaded: LoadedDocument, resolved: ResolvedBase, *, use_cache: bool = True
) -> TokenizeResult:
    """Reuse `tokens/` when it was made from exactly these inputs, else tokenize."""
    directory = loaded.layout.tokens
    if (directory / TOKENS_INDEX).is_file():
        try:
            sequences, leaves, index = load_tokens(directory)
        except (ValueError, KeyError, OSError):
            index = None
        if index is not None and index.get("key") == tokens_key(loaded, resolved):
            fm = loaded.doc.frontmatter
            return TokenizeResult(
                sequences=sequences,
                stream_root=index["stream_root"],
                rows=len(leaves),
                tokens=sum(len(s.input_ids) for s in sequences),
                template_kind=index["template"],
                skipped_preference=int(index["skipped_preference"]),
                tokenizer=RowTokenizer(resolved.path, fm.system_prompt, fm.training.sequence_len),
                row_counts=[(r, int(n)) for r, n in index["rows"]],
                source="tokens-dir",
            )
    return tokenize_document(loaded, resolved, use_cache=use_cache)
