"""`dlm-git log [--doc PATH] [-n N] [--json]`: each document's adapter lineage."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from dlm_git.clidecl import Option
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:
    from dlm_git.history.log import Lineage, LogEntry
    from dlm_git.history.scores import Headline


def log(
    doc: Annotated[
        Path | None, Option("--doc", help="Only this document (file or directory).")
    ] = None,
    max_count: Annotated[
        int | None, Option("-n", "--max-count", help="At most N entries per document.")
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the lineage of each document's adapter: commits, adapters, lock acceptances,
    signatures, verdicts and scores (from git objects only)."""
    from dlm_git import gitio
    from dlm_git.docat import doc_rel
    from dlm_git.errors import UsageError
    from dlm_git.history.log import lineage

    if max_count is not None and max_count < 1:
        raise UsageError("log", f"-n {max_count}: must be at least 1", "e.g. -n 10")
    root = gitio.toplevel(Path.cwd())
    head = gitio.resolve_commit("HEAD", root)
    if head is None:
        raise UsageError("log", "no commits yet", "commit a trained document first")
    docs = [doc_rel(root, doc, "log")] if doc is not None else _documents(root, head)
    lineages = {d: lineage(root, head, d, max_count) for d in docs}
    if doc is not None and not lineages[docs[0]].total:
        raise UsageError("log", f"{doc}: no records of this document in HEAD's history")
    if as_json:
        emit_json({"schema": "dlm-git.log/1", "head": head, "documents": _json(lineages)})
        return
    for name, found in lineages.items():
        shown = len(found.entries)
        window = f", the newest {shown} shown" if shown < found.total else ""
        echo(f"{name}: {found.total} record change(s){window}")
        for entry in found.entries:
            for line in render(entry):
                echo(line)


def _documents(root: Path, head: str) -> list[str]:
    from dlm_git.docat import TreeAt

    with TreeAt(root, head, "HEAD") as tree:
        return tree.documents()


def render(e: LogEntry) -> list[str]:
    """An entry's terminal lines, with the commits' text as it is (`echo` escapes it)."""
    c = e.commit
    lines = [f"  {c.sha[:12]} {_utc(c.time, '%Y-%m-%d')} {c.author}: {c.subject}"]
    what = f"{e.determinism_class or '?'}, {e.profile or 'no profile'}"
    if e.world_size and e.world_size > 1:
        what += f", {e.world_size} ranks"
    adapter = (e.adapter_sha256 or "none recorded")[:16]
    moved = " (new)" if e.adapter_changed else ""
    lines.append(f"      adapter   {adapter}{moved}  {what}")
    if e.acceptance is not None:
        a = e.acceptance
        whose = "the lock it replaced" if a.chained else "a lock not in this lineage"
        drift = "; ".join(f"{f.severity} {f.describe()}" for f in a.drift) or "no drift"
        lines.append(
            f"      accepted  by {c.author}: supersedes {a.supersedes[:12]} ({whose}): {drift}"
        )
    if e.signature is not None:
        lines.append(f"      signature {e.signature.state}: {e.signature.detail}")
    lines.append(f"      verify    {_verdicts(e)}")
    if e.local_verdict:
        lines.append(f"      verifier  {_verifier(e.local_verdict)}")
    if e.scores.state == "evaluated":
        lines.append(f"      scores    {_scores(e.scores, e.previous_scores, e.stale_scores)}")
    lines += [f"      problem   {p}" for p in e.problems]
    return lines


def _verdicts(e: LogEntry) -> str:
    recorded = e.recorded_verdict
    text = (
        f"recorded {recorded['verdict']} ({recorded['level']})" if recorded else "nothing recorded"
    )
    local = e.local_verdict
    if local:
        when = _utc(int(local["at"]), "%Y-%m-%d %H:%M")
        text += f"; here {local['verdict']} ({local['level']}, {when} UTC)"
    return text


def _verifier(local: dict[str, Any]) -> str:
    """Which dlm-git reached this machine's verdict, as `known` read it back."""
    from dlm_git.selfid import from_json

    found = from_json(local.get("verifier"))
    if found is None:
        return "unknown (not recorded, or not of the expected shape)"
    return found.describe()


def _scores(now: Headline, before: Headline, stale: str | None) -> str:
    """`val loss 2.310000 (-0.120000), probes 1/3 exact (+1)`: the change against the
    first parent's record where both have the number."""
    if now.val_loss is None:
        text = "no held-out rows"
    else:
        text = f"val loss {now.val_loss:.6f}"
        if before.val_loss is not None:
            text += f" ({now.val_loss - before.val_loss:+.6f})"
    text += f", probes {now.matched}/{now.probes} exact"
    if before.matched is not None and now.matched is not None:
        text += f" ({now.matched - before.matched:+d})"
    return text if stale is None else f"{text} ({stale})"


def _scores_json(h: Headline) -> dict[str, Any]:
    return {
        "state": h.state,
        "val_loss": h.val_loss,
        "exact_match": h.matched,
        "probes": h.probes,
        "adapter_sha256": h.adapter_sha256,
    }


def _change(now: float | None, before: float | None) -> float | None:
    """The change, or None (a side has none, or two finite records overflow: no number)."""
    if now is None or before is None:
        return None
    change = now - before
    return change if math.isfinite(change) else None


def _utc(seconds: int, fmt: str) -> str:
    """A commit's or a verdict's time (whatever it holds: `?` when it is no date)."""
    try:
        return time.strftime(fmt, time.gmtime(seconds)) if seconds else "?"
    except (OverflowError, OSError, ValueError):
        return "?"


def _json(lineages: dict[str, Lineage]) -> list[dict[str, Any]]:
    return [
        {"doc": doc, "total": found.total, "entries": [_entry(e) for e in found.entries]}
        for doc, found in lineages.items()
    ]


def _entry(e: LogEntry) -> dict[str, Any]:
    c, a, s = e.commit, e.acceptance, e.signature
    return {
        "commit": c.sha,
        "parents": list(c.parents),
        "author": c.author,
        "email": c.email,
        "time": c.time,
        "subject": c.subject,
        "changed": e.changed,
        "adapter_sha256": e.adapter_sha256,
        "adapter_changed": e.adapter_changed,
        "determinism_class": e.determinism_class,
        "profile": e.profile,
        "world_size": e.world_size,
        "acceptance": None
        if a is None
        else {
            "supersedes": a.supersedes,
            "chained": a.chained,
            "accepted_by": c.author,
            "drift": [
                {"field": f.field, "severity": f.severity, "from": f.old, "to": f.new}
                for f in a.drift
            ],
        },
        "signature": None if s is None else {"state": s.state, "detail": s.detail},
        "recorded_verdict": e.recorded_verdict,
        "local_verdict": e.local_verdict,
        "scores": {
            **_scores_json(e.scores),
            "previous": _scores_json(e.previous_scores),
            "stale": e.stale_scores,
            "change": {
                "val_loss": _change(e.scores.val_loss, e.previous_scores.val_loss),
                "exact_match": _change(e.scores.matched, e.previous_scores.matched),
            },
        },
        "problems": e.problems,
    }
