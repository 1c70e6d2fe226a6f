#!/usr/bin/env python
"""Train the golden determinism fixture and compare (or, with --approve, record) its SHA.

    python scripts/regen-determinism-golden.py              # dry run: compare only
    python scripts/regen-determinism-golden.py --approve    # write the golden for this tuple

The fixture is trained in a fresh interpreter (see `tests/support/golden.py`). A dry run exits 1
when an approved golden for this machine's tuple exists and differs; `--approve` writes
`tests/golden/determinism/tuple-<hash>.json` and upserts `.determinism/lock.json`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dlm_git.errors import DlmGitError  # noqa: E402
from tests.support.golden import (  # noqa: E402
    GOLDEN_THREADS,
    approve,
    load_golden_lock,
    train_fixture,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--approve", action="store_true", help="write the golden for this machine's tuple"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=GOLDEN_THREADS,
        help=f"CPU threads (default {GOLDEN_THREADS})",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be positive")
    try:
        run = train_fixture(threads=args.threads, device=args.device)
        old = load_golden_lock(REPO_ROOT).get(run.tuple_hash)
    except DlmGitError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    match = old is not None and (old.adapter_sha256, old.tensor_root) == (
        run.adapter_sha256,
        run.tensor_root,
    )
    flags = run.determinism_tuple["determinism_flags"]
    print(f"tuple hash      {run.tuple_hash}")
    print(
        f"tier            {run.determinism_tuple['hardware_tier']} (threads={flags.get('threads')})"
    )
    print(f"old adapter     {old.adapter_sha256 if old else 'none'}")
    print(f"new adapter     {run.adapter_sha256}")
    print(f"old tensor root {old.tensor_root if old else 'none'}")
    print(f"new tensor root {run.tensor_root}")
    print(f"match           {'yes' if match else ('no golden' if old is None else 'NO')}")
    if args.approve:
        path = approve(REPO_ROOT, run)
        print(f"approved        {path.relative_to(REPO_ROOT)}")
        return 0
    return 1 if old is not None and not match else 0


if __name__ == "__main__":
    sys.exit(main())
