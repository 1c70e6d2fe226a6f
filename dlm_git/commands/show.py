"""`dlm-git show DOC [--json]`: what a document is made of, without training anything."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from dlm_git.clidecl import Argument, Option
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:  # the document's loader and schema load only when `show` runs
    from dlm_git.doc.load import LoadedDocument


def show(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show frontmatter, sections, expanded sources and the resolved base model."""
    from dlm_git.doc.load import load_document

    loaded = load_document(doc)
    report = show_report(loaded)
    if as_json:
        emit_json(report)
    else:
        _print_human(report)


def show_report(loaded: LoadedDocument) -> dict[str, Any]:
    from dlm_git.base.resolve import locate_base

    d = loaded.doc
    located = locate_base(
        d.frontmatter.base_model, d.directory, loaded.repo_root, loaded.base_model_at
    )
    from dlm_git.commands.cache import cache_summary, index_at

    rows = loaded.rows
    cfg = d.frontmatter.training.cache
    return {
        "training_cache": {
            "enabled": cfg.enabled,
            **cache_summary(index_at(loaded.repo_root), d.frontmatter.dlm_id, cfg.max_bytes),
        },
        "path": str(d.path),
        "dlm_sha256": d.sha256,
        "frontmatter": d.frontmatter.model_dump(mode="json"),
        "sections": [
            {
                "type": s.type_name,
                "id": s.section_id,
                "line": s.line,
                "first_line": s.first_line[:120],
                "source_path": s.source_path,
            }
            for s in rows
        ],
        "counts": {
            "prose": sum(1 for s in rows if s.kind == "prose" and s.source_path is None),
            "instruction": sum(1 for s in rows if s.kind == "instruction"),
            "preference": sum(1 for s in rows if s.kind == "preference"),
            "source_files": len(loaded.sources.files),
            "skipped_files": len(loaded.sources.skipped),
        },
        "sources": {
            "directives": [
                {"index": r.index, "path": r.path, "taken": r.taken, "skipped": r.skipped}
                for r in loaded.sources.directives
            ],
            "files": [
                {"relpath": f.relpath, "size": f.size, "sha256": f.sha256}
                for f in loaded.sources.files
            ],
            "skipped": [{"relpath": s.relpath, "reason": s.reason} for s in loaded.sources.skipped],
        },
        "base_model": {
            "spec": located.spec.raw,
            "kind": located.spec.kind,
            "name": located.spec.name,
            "revision": located.revision,
            "path": str(located.path) if located.path else None,
            "available": located.available,
            "note": located.note,
        },
    }


def _print_human(report: dict[str, Any]) -> None:
    """The report as text lines; paths, names, first lines and config values are the
    document's own text, so each line goes through `echo`: no rich markup is read, and
    control and format characters are shown escaped."""
    for line in _lines(report):
        echo(line)


def _lines(report: dict[str, Any]) -> list[str]:
    fm = report["frontmatter"]
    tr = fm["training"]
    base = report["base_model"]
    counts = report["counts"]
    avail = "available" if base["available"] else "NOT available"
    rev = f" @ {base['revision']}" if base["revision"] else ""
    lines = [
        f"{report['path']}  dlm_id {fm['dlm_id']}  v{fm['dlm_version']}",
        f"  sha256       {report['dlm_sha256']}",
        f"  base model   {base['spec']} ({base['kind']}{rev}; {avail}: {base['note']})",
        f"  training     lora r={tr['lora_r']} alpha={tr['lora_alpha']} "
        f"seq={tr['sequence_len']} lr={tr['learning_rate']} seed={tr['seed']} "
        f"epochs={tr['num_epochs']} max_steps={tr['max_steps']}",
    ]
    if fm.get("export"):
        lines.append(f"  export       {fm['export']} (kept, not used)")
    lines.append(
        f"  sections     {counts['prose']} prose, {counts['instruction']} instruction, "
        f"{counts['preference']} preference, {counts['source_files']} source files "
        f"({counts['skipped_files']} skipped)"
    )
    if counts["preference"]:
        lines.append("               preference sections are parsed but not trained on (SFT only)")
    lines.append("")
    for s in report["sections"]:
        where = s["source_path"] or f"line {s['line']}"
        lines.append(f"  {s['id']}  {s['type']:<14} {where:<28} {s['first_line'][:60]}")
    lines += [
        f"  sources[{d['index']}] {d['path']}: {d['taken']} taken, {d['skipped']} skipped"
        for d in report["sources"]["directives"]
    ]
    lines += [f"    skipped {s['relpath']}: {s['reason']}" for s in report["sources"]["skipped"]]
    return lines
