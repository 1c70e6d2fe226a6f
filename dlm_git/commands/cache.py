"""`dlm-git cache show|prune|clear DOC`: inspect and bound the tokenized-section cache."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from dlm_git.clidecl import Argument, Exit, Group, Option, confirm
from dlm_git.errors import UsageError
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:
    from dlm_git.cache.index import Index

cache_app = Group(help="Inspect, prune or clear the tokenized-section cache.")
DURATION_RE = re.compile(r"^(\d+)([dhm])$")
UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60}
DEFAULT_PRUNE_DAYS = 90


def parse_duration(text: str) -> float:
    m = DURATION_RE.match(text.strip())
    if m is None or int(m.group(1)) <= 0:
        raise UsageError(
            "--older-than", f"'{text}' is not a duration", "use a number and a unit: 30d, 12h, 45m"
        )
    return int(m.group(1)) * UNIT_SECONDS[m.group(2)]


def index_at(repo_root: Path) -> Index:
    """The index of the token cache the repository's documents use."""
    from dlm_git.cache.index import Index
    from dlm_git.cache.layout import CacheLayout, default_cache_dir

    return Index(CacheLayout(default_cache_dir(repo_root)))


def _cache_for(doc: Path) -> tuple[Index, str, int, int]:
    """The cache index a document uses, its dlm_id, max_bytes and prune default (days)."""
    from dlm_git.doc.load import load_document

    loaded = load_document(doc)
    cfg = loaded.doc.frontmatter.training.cache
    index = index_at(loaded.repo_root)
    return index, loaded.doc.frontmatter.dlm_id, cfg.max_bytes, cfg.prune_older_than_days


def cache_summary(index: Index, dlm_id: str, max_bytes: int) -> dict[str, object]:
    stats = index.stats()
    last = index.last_run(dlm_id)
    return {
        "path": str(index.layout.root),
        "entries": stats.entries,
        "bytes": stats.bytes,
        "max_bytes": max_bytes,
        "last_run": last.to_json() if last else None,
    }


@cache_app.command("show")
def show(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Cache path, entries, bytes and the last run's hit rate for DOC."""
    index, dlm_id, max_bytes, _ = _cache_for(doc)
    summary = cache_summary(index, dlm_id, max_bytes)
    if as_json:
        emit_json(summary)
        return
    echo(f"cache     {summary['path']}")
    echo(f"entries   {summary['entries']}")
    echo(f"bytes     {summary['bytes']} (max {max_bytes})")
    last = summary["last_run"]
    if isinstance(last, dict):
        echo(
            f"last run  {last['hits']}/{last['total_rows']} hits ({last['hit_rate']:.1%}), "
            f"{last['misses']} misses, {last['corrupt']} corrupt, "
            f"tokenize {last['tokenize_seconds']} s"
        )
    else:
        echo("last run  none recorded for this document")


@cache_app.command("prune")
def prune(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    older_than: Annotated[
        str, Option("--older-than", help="Drop entries unused for this long (30d, 12h, 45m).")
    ] = "",
) -> None:
    """Drop entries not used recently; sweep orphan and tmp files."""
    index, _, _, days = _cache_for(doc)
    seconds = parse_duration(older_than) if older_than else days * 86400
    removed, swept = index.prune(seconds)
    echo(f"pruned {removed} entries, swept {swept} orphan/tmp files from {index.layout.root}")


@cache_app.command("clear")
def clear(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    force: Annotated[bool, Option("--force", "-f", help="Don't ask for confirmation.")] = False,
) -> None:
    """Remove every entry (asks first unless --force)."""
    index, _, _, _ = _cache_for(doc)
    if not force:
        if not sys.stdin.isatty():
            raise UsageError("cache clear", "refusing to clear without a terminal", "add --force")
        stats = index.stats()
        if not confirm(
            f"Remove {stats.entries} entries ({stats.bytes} bytes) from {index.layout.root}?"
        ):
            echo("nothing removed")
            raise Exit(1)
    removed, swept = index.clear()
    echo(f"cleared {removed} entries, swept {swept} orphan/tmp files from {index.layout.root}")
