"""The evaluation child: `python -m dlm_git.eval.child DIR`, started by `run_eval`.

Invariant: when the calling process already runs torch under other kernel settings, the
evaluation runs here, in a fresh interpreter whose environment holds the recorded
profile's variables; the request and answer cross through `dlm_git.childproc`, and a
user error comes back as its one line and exit code. A child never starts a child.
"""

from __future__ import annotations

import sys

from dlm_git.childproc import serve
from dlm_git.eval.run import EvalRequest, EvalResult


def answer(request: EvalRequest) -> EvalResult:
    from dlm_git.eval.run import eval_in_process

    return eval_in_process(request.target, request.tiny_dir, replay=request.replay)


def main(argv: list[str]) -> int:
    return serve(argv, EvalRequest, answer, "dlm_git.eval.child")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
