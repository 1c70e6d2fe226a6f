"""lm-eval is imported only when a document names tasks: the CLI, the hooks, verify and an
evaluation without tasks never import it (or `datasets`), so the core install, which has
no `eval` extra, runs them all (docs/eval.md, "Tasks")."""

from __future__ import annotations

import subprocess
import sys

from tests.support.env import subprocess_env

SCRIPT = """
import sys
import dlm_git.cli, dlm_git.eval.harness, dlm_git.eval.taskdef, dlm_git.eval.run
from dlm_git.eval.harness import run_tasks
assert run_tasks([], None, None, 42, None) == {}
heavy = sorted(m for m in ("lm_eval", "datasets", "evaluate") if m in sys.modules)
print(",".join(heavy))
"""


def test_nothing_imports_lm_eval_until_a_task_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
