"""Tokenize a loaded document into training sequences, through the token cache if enabled.

Invariants:
- The result depends only on the document's rows, the tokenizer's state and
  `sequence_len`; with or without the cache the token stream is identical.
- A run whose rows are all cached never loads the tokenizer (nor imports transformers).
- A run whose rows are exactly the ones in the document's pack, in order (the common warm
  run), takes its token stream from the pack's arrays with no per-row work: it is
  recognised by the section row ids and one digest of the sources (`Pack.holds`), without
  a row id or a key per source file; the pack's keys are decoded only if the index needs
  them (`ServedKeys`).
- `--no-cache` (use_cache=False) neither reads nor writes nor records anything in the cache.
- With a held-out split (`training.val_fraction`), `sequences` is what training reads:
  the document's stream less the held-out rows (`dlm_git.train.heldout`); the cache,
  `tokens/`, `stream_root` and `rows` stay the whole document's (`whole`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from dlm_git.base.resolve import ResolvedBase
from dlm_git.cache.entry import encode_entry, entry_key
from dlm_git.cache.layout import PACK_PREFIX, default_cache_dir
from dlm_git.cache.pack import ServedKeys, encode_pack
from dlm_git.cache.store import TokenCache
from dlm_git.doc.load import LoadedDocument
from dlm_git.doc.walk import SourceFile, source_rows_digest
from dlm_git.manifest.records import sources_record
from dlm_git.token_stream import RowTokens, TokenStream, token_stream_root
from dlm_git.train.heldout import split_stream
from dlm_git.train.options import TrainError
from dlm_git.train.rows import Row, section_rows, source_rows
from dlm_git.train.tokenize import TOKENS_INDEX, RowTokenizer, load_tokens, save_tokens


@dataclass
class TokenizeResult:
    sequences: TokenStream
    """The sequences training reads (the whole stream less any held-out rows)."""
    stream_root: str
    rows: int
    template_kind: str
    skipped_preference: int
    tokenizer: RowTokenizer
    cache_stats: dict[str, Any] | None = field(default=None)
    source: str = "tokenized"
    """"tokenized" (through the cache or not) or "tokens-dir" (read from `tokens/`)."""
    held_out: TokenStream | None = None
    """The held-out rows' sequences; None without a split."""
    document: TokenStream | None = None
    """The document's whole stream when rows are held out (see `whole`)."""

    @property
    def whole(self) -> TokenStream:
        """The document's whole token stream (what `tokens/` holds; `stream_root`'s)."""
        return self.document if self.document is not None else self.sequences

    @property
    def tokens(self) -> int:
        return self.sequences.tokens

    @property
    def row_counts(self) -> list[tuple[str, int]]:
        return self.sequences.row_counts

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        return int(pad)


@dataclass
class _CacheRun:
    """What one run did with the cache, for `TokenCache.record_run`."""

    used: set[str] = field(default_factory=set)
    written: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    served_by: str | None = None
    served: ServedKeys | None = None
    """The keys used when the pack served the whole run (then `used` is empty)."""

    @property
    def used_keys(self) -> Collection[str]:
        return self.used if self.served is None else self.served


def tokenize_document(
    loaded: LoadedDocument, resolved: ResolvedBase, *, use_cache: bool = True
) -> TokenizeResult:
    fm = loaded.doc.frontmatter
    seq_len = fm.training.sequence_len
    tokenizer = RowTokenizer(resolved.path, fm.system_prompt, seq_len)
    has_template = tokenizer.has_chat_template()
    doc_rows, skipped_pref = section_rows(loaded.doc.sections, fm.system_prompt, has_template)
    sources = loaded.sources.files
    n_rows = len(doc_rows) + len(sources)
    started = time.perf_counter()
    if use_cache:
        cache = TokenCache(default_cache_dir(loaded.repo_root))
        stream, root, run = _through_cache(cache, fm.dlm_id, doc_rows, sources, tokenizer, resolved)
    else:
        rows = doc_rows + source_rows(sources)
        tokenized = [RowTokens.from_sequences(r.row_id, tokenizer.tokenize(r)) for r in rows]
        stream = TokenStream.from_rows(tokenized)
        root = token_stream_root([r.leaf for r in tokenized])
    seconds = time.perf_counter() - started
    stats = None
    if use_cache:
        metrics = cache.record_run(
            run.used_keys,
            run.written,
            fm.training.cache.max_bytes,
            {
                "dlm_id": fm.dlm_id,
                "total_rows": n_rows,
                "hits": run.hits,
                "misses": run.misses,
                "tokenize_seconds": seconds,
            },
            served_by=run.served_by,
        )
        stats = {"path": str(cache.root), **metrics.to_json()}
    result = TokenizeResult(
        sequences=stream,
        stream_root=root,
        rows=n_rows,
        template_kind="chat_template" if has_template else "plain",
        skipped_preference=skipped_pref,
        tokenizer=tokenizer,
        cache_stats=stats,
    )
    return hold_out(loaded, result, doc_rows)


def hold_out(loaded: LoadedDocument, result: TokenizeResult, doc_rows: list[Row]) -> TokenizeResult:
    """`result` with its held-out rows taken out of `sequences` (as it is when the split
    is off); a split that holds out every row is a `TrainError`."""
    training = loaded.doc.frontmatter.training
    fraction = training.val_fraction
    if fraction is None:
        return result
    rows = doc_rows + source_rows(loaded.sources.files)
    trained, held = split_stream(result.sequences, rows, training.seed, fraction)
    if len(result.sequences) and not len(trained):
        raise TrainError(
            str(loaded.doc.path),
            f"training.val_fraction {fraction} holds out every row ({len(rows)} of them)",
            "lower training.val_fraction, or add rows to the document",
        )
    return replace(result, sequences=trained, held_out=held, document=result.sequences)


def _through_cache(
    cache: TokenCache,
    dlm_id: str,
    doc_rows: list[Row],
    sources: tuple[SourceFile, ...],
    tokenizer: RowTokenizer,
    resolved: ResolvedBase,
) -> tuple[TokenStream, str, _CacheRun]:
    """The token stream and its root: each row from the pack, else from its entry file,
    else from the tokenizer (then cached)."""
    tok_sha, seq_len = resolved.tokenizer_sha256, tokenizer.sequence_len
    digest = source_rows_digest(sources)
    pack_key = f"{PACK_PREFIX}{dlm_id}"
    pack = cache.read_pack(dlm_id)
    run = _CacheRun()
    section_ids = [row.row_id for row in doc_rows]
    if pack is not None and pack.holds(tok_sha, seq_len, section_ids, digest, len(sources)):
        # the common warm run: the pack as it is, and no row id computed for a source file
        run.served = ServedKeys(pack, pack_key)
        run.hits, run.served_by = len(doc_rows) + len(sources), pack_key
        return pack.stream(), pack.root, run
    rows = doc_rows + source_rows(sources)
    keys = [entry_key(row.row_id, tok_sha, seq_len) for row in rows]
    found: list[RowTokens] = []
    for row, key in zip(rows, keys, strict=True):
        where = pack.position.get(key) if pack is not None else None
        tokens = pack.row(where, row.row_id) if pack is not None and where is not None else None
        if tokens is None:
            tokens = cache.get(key, row.row_id)
        if tokens is not None:
            run.hits += 1
            run.used.add(key)
        else:
            tokens = RowTokens.from_sequences(row.row_id, tokenizer.tokenize(row))
            run.misses += 1
            run.written[key] = cache.put(key, encode_entry(key, tokens))
        found.append(tokens)
    distinct = list(dict.fromkeys(keys))  # a repeated row is packed once
    if pack is not None and pack.keys == distinct and pack.sources_digest == digest:
        run.used.add(pack_key)
    else:
        by_key = dict(zip(keys, found, strict=True))
        data = encode_pack(
            [by_key[k] for k in distinct],
            tokenizer_sha256=tok_sha,
            sequence_len=seq_len,
            sources_digest=digest,
        )
        run.written[pack_key] = cache.write_pack(dlm_id, data)
    return TokenStream.from_rows(found), token_stream_root([t.leaf for t in found]), run


def tokens_key(loaded: LoadedDocument, resolved: ResolvedBase) -> dict[str, Any]:
    """What a `tokens/` directory must have been made from to be reused as is: the tokens
    depend on the document, its sources, the tokenizer and `sequence_len`, not on weights."""
    return {
        "dlm_id": loaded.doc.frontmatter.dlm_id,
        "dlm_sha256": loaded.doc.sha256,
        "sources_root": sources_record(loaded.sources.recorded()).merkle_root,
        "tokenizer_sha256": resolved.tokenizer_sha256,
        "sequence_len": loaded.doc.frontmatter.training.sequence_len,
    }


def write_tokens(loaded: LoadedDocument, resolved: ResolvedBase, result: TokenizeResult) -> None:
    whole = result.whole
    save_tokens(
        loaded.layout.tokens,
        whole,
        {
            "key": tokens_key(loaded, resolved),
            "stream_root": result.stream_root,
            "template": result.template_kind,
            "skipped_preference": result.skipped_preference,
            "sequences": len(whole),
            "tokens": whole.tokens,
        },
    )


def load_or_tokenize(
    loaded: LoadedDocument, resolved: ResolvedBase, *, use_cache: bool = True
) -> TokenizeResult:
    """Reuse `tokens/` when it was made from exactly these inputs, else tokenize."""
    directory = loaded.layout.tokens
    if (directory / TOKENS_INDEX).is_file():
        try:
            stream, _, index = load_tokens(directory)
        except (ValueError, KeyError, OSError):
            index = None
        if index is not None and index.get("key") == tokens_key(loaded, resolved):
            fm = loaded.doc.frontmatter
            result = TokenizeResult(
                sequences=stream,
                stream_root=index["stream_root"],
                rows=len(stream.row_ids),
                template_kind=index["template"],
                skipped_preference=int(index["skipped_preference"]),
                tokenizer=RowTokenizer(resolved.path, fm.system_prompt, fm.training.sequence_len),
                source="tokens-dir",
            )
            if fm.training.val_fraction is None:
                return result
            chat = index["template"] == "chat_template"
            doc_rows, _ = section_rows(loaded.doc.sections, fm.system_prompt, chat)
            return hold_out(loaded, result, doc_rows)
    return tokenize_document(loaded, resolved, use_cache=use_cache)
