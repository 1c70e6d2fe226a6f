"""The pre-merge-commit hook: the pre-commit checks on the result of a merge.

git runs no pre-commit hook for a merge that commits by itself (`git merge` without
conflicts); it runs `pre-merge-commit` instead, with the merge result in the index and
`HEAD` still the branch merged into. So the same checks as `pre_commit` apply, against
the first parent: a `.dlm` or source brought in without its retrained records, records
that do not bind, a document dropped from params.yaml while its records remain. An ERROR
refuses the merge (git leaves it uncommitted: fix, `git add`, `git commit`; then the
pre-commit hook checks it). A merge that stops on conflicts is committed with
`git commit`, which runs the pre-commit hook. Never imports torch, transformers, peft or
dvc.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dlm_git.hooks.entry import run_hook
from dlm_git.hooks.pre_commit import run


def main() -> int:
    return run_hook(lambda: run(Path(os.getcwd()), "merge"))


if __name__ == "__main__":
    sys.exit(main())
