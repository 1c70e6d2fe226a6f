"""`dlm-git eval DOC`: score DOC's adapter and write `eval.json` and `eval_metrics.json`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Argument, Option
from dlm_git.output import echo, emit_json


def eval_doc(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    tiny_dir: Annotated[
        Path | None, Option("--tiny-dir", help="Use this directory as the built-in tiny base.")
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Print the record's numbers as JSON.")] = False,
) -> None:
    """Evaluate DOC's adapter on its base under its recorded numerics profile (docs/eval.md)."""
    from dlm_git.eval.record import metrics_of
    from dlm_git.eval.run import run_eval
    from dlm_git.layout import EVAL_NAME, find_document
    from dlm_git.safeparse import load_json

    target = find_document(doc)
    result = run_eval(target, tiny_dir)
    record = load_json(result.record.encode("utf-8"))
    numbers = metrics_of(record)
    if as_json:
        emit_json({"doc": str(target), "written": result.written, **numbers})
        return
    probes = numbers["probes"]
    val = numbers.get("val", {}).get("overall")
    shown = f"val loss {val['loss']:.4f}, " if val else "no held-out rows, "
    what = "written" if result.written else "unchanged"
    echo(
        f"{target.parent / EVAL_NAME}: {what}; {shown}"
        f"{probes['count']} probe{'' if probes['count'] == 1 else 's'},"
        f" exact match {probes['exact_match']:.2f}"
    )
