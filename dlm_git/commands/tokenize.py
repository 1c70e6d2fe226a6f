"""`dlm-git tokenize DOC`: write the document's training sequences to `tokens/`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Argument, Option
from dlm_git.output import echo, emit_json


def tokenize(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    no_cache: Annotated[
        bool, Option("--no-cache", help="Bypass the tokenized-section cache.")
    ] = False,
    tiny_dir: Annotated[
        Path | None, Option("--tiny-dir", help="Use this directory as the built-in tiny base.")
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Print a summary as JSON.")] = False,
) -> None:
    """Tokenize DOC's rows (through the token cache) into DOC's tokens/ directory."""
    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params
    from dlm_git.train.pipeline import tokenize_document, write_tokens

    loaded = load_document(doc)
    # the settings train reads (`sequence_len`...): tokens/ holds the stream it trains on
    loaded = with_params(loaded, read_doc_params(loaded.repo_root, doc_key(loaded)).training)
    fm = loaded.doc.frontmatter
    resolved = resolve_base(
        fm.base_model, loaded.doc.directory, loaded.repo_root, tiny_dir, where=loaded.base_model_at
    )
    result = tokenize_document(
        loaded, resolved, use_cache=not no_cache and fm.training.cache.enabled
    )
    write_tokens(loaded, resolved, result)
    summary = {
        "doc": str(loaded.doc.path),
        "tokens_dir": str(loaded.layout.tokens),
        "rows": result.rows,
        "sequences": len(result.sequences),
        "tokens": result.tokens,
        "stream_root": result.stream_root,
        "cache": result.cache_stats,
    }
    if as_json:
        emit_json(summary)
        return
    cache = result.cache_stats
    hits = f", cache {cache['hits']}/{cache['total_rows']} hits" if cache else ", no cache"
    echo(
        f"{loaded.doc.path}: {result.rows} rows -> {len(result.sequences)} sequences, "
        f"{result.tokens} tokens{hits}; stream root {result.stream_root[:16]}"
    )
