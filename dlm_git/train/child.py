"""The training child: `python -m dlm_git.train.child DIR`, started by `run_train`.

Invariants:
- Kernel-selecting variables only take effect before torch initialises. When a process
  already runs torch under other values (a replay of a second document under another
  profile, a test session, a library caller), `run_train` trains here instead: a fresh
  interpreter whose environment holds the profile's variables.
- The request is a `TrainRequest` (the caller's `TrainOptions`, with the profile and the
  device the parent planned) and the answer a `TrainResult` (`dlm_git.train.protocol`),
  both through `dlm_git.childproc`; a user error is answered as its one line and exit
  code, which the parent raises as the same. Nothing is read from stdout; what the
  training shows its user (the plan and progress when the parent's stderr is a
  terminal, the `.gitignore` line, lock WARNs) goes to the parent as reports on their
  own pipe (`dlm_git.train.progress`), and its stderr is seen only as its last line.
- This interpreter trains in-process or not at all (`train_in_process`): a child never
  starts a child.
"""

from __future__ import annotations

import sys

from dlm_git.childproc import serve
from dlm_git.train.protocol import TrainRequest, TrainResult


def answer(request: TrainRequest) -> TrainResult:
    from dlm_git.train.run import train_in_process

    return TrainResult.of(train_in_process(request.target, request.options))


def main(argv: list[str]) -> int:
    return serve(argv, TrainRequest, answer, "dlm_git.train.child")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
