"""`make demo`: build the tiny base, show the example document, train it, print the identity.

Until the DVC pipeline lands this is the whole demo; it trains `examples/demo` in place
(adapter/ and run.json are gitignored; dlm.lock, manifest.json, metrics.json and
train_loss.tsv are committed and re-training leaves them byte-identical).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dlm_git.errors import DlmGitError
from dlm_git.output import error_line

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def main() -> int:
    from dlm_git.base.resolve import resolve_base
    from dlm_git.commands.show import _print_human, show_report
    from dlm_git.doc.load import load_document
    from dlm_git.train.run import TrainOptions, run_train

    docs = sorted(p.parent for p in EXAMPLES.glob("*/*.dlm"))
    try:
        for doc_dir in docs:
            loaded = load_document(doc_dir)
            base = resolve_base(
                loaded.doc.frontmatter.base_model, loaded.doc.directory, loaded.repo_root
            )
            print(f"== {loaded.doc.path}")
            _print_human(show_report(loaded))
            ident = base.identity
            print(f"\nbase {base.spec.raw} at {base.path}")
            print(f"  revision          {ident.revision}")
            print(f"  tensor root       {ident.tensor_root}")
            print(f"  tokenizer sha256  {ident.tokenizer_sha256}\n")
            out = run_train(doc_dir, TrainOptions(quiet=True))
            print(f"trained {out.manifest.training.steps} steps")
            print(f"  adapter sha256    {out.adapter_sha256}")
            print(f"  determinism       {out.lock.determinism_class} on {out.lock.hardware_tier}")
            print(f"  wall              {out.run_record['wall_seconds']} s")
    except DlmGitError as exc:
        error_line(exc.one_line())
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
