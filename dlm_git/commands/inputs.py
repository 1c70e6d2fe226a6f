"""`dlm-git inputs`: the pipeline's `inputs` stage (`dlm_git.pipeline.inputs`)."""

from __future__ import annotations

from pathlib import Path

from dlm_git.output import echo


def inputs() -> None:
    """Write each pipeline document's dlm.inputs.json: digests of what it reads (the
    `inputs` stage of dvc.yaml, which `dlm-git init` writes and this refuses when stale)."""
    from dlm_git import gitio
    from dlm_git.pipeline.inputs import run

    root = gitio.toplevel(Path.cwd())
    plan, written = run(root)
    for doc in plan.docs:
        state = "written" if doc.rel in written else "unchanged"
        echo(f"{doc.rel}: inputs {state}")
    for why in plan.untracked:
        echo(f"note: DVC cannot watch {why}; the stage runs on every `dvc repro`", err=True)
