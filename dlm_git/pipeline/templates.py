"""The DVC stages and params that run dlm-git, as plain data (merged by `init`).

Invariants:
- Every stage command is a `dlm-git` subcommand; no ad-hoc scripts.
- `base@<doc>` and `tokenize@<doc>` depend on `<doc>/dlm.inputs.json`, which the one
  `inputs` stage writes from every input a document reads (`dlm_git.pipeline.inputs`,
  which computes that stage; `init` writes it per repository). So nothing is
  `always_changed` unless an input lies where DVC cannot watch it, and after `dvc repro`
  `dvc status` is clean. `tokens/` also records the document's sha256, sources root and
  base identity, so any input change reaches `train@<doc>` through it.
- A document's settings are `docs.<doc>` (`dlm_git.train.doc_params`): its `tokenize`
  and `train` stages depend on that entry only, so a setting of one document re-runs that
  document's stages; `pipeline.*` are every document's (and re-run every `train@`).
- `dlm.lock` is `persist: true` (DVC must not delete it before `train` validates
  against it); lock, manifest, metrics, plots and the verify report are `cache: false`
  (they are committed to git); `adapter/` and `tokens/` are DVC-cached.
- `eval@<doc>` runs after `train@<doc>`: it depends on what it scores (the adapter, the
  manifest and lock naming it, the base's identity and the document's inputs and
  settings) and writes `eval.json` and `eval_metrics.json` (`cache: false`, committed;
  the second is the `dvc metrics` file; `persist: true`, so that a failed evaluation
  leaves the old record as it was instead of DVC deleting it first), see docs/eval.md.
- `base@<doc>` resolves the document's base and writes its identity to `<doc>/base.json`
  (revision, tensor root, tokenizer and config sha256): that file, not a directory of
  weights, is what `tokenize` and `train` depend on, so swapping the base reruns them.
  A base that can change under the same spec (a local directory) is
  recorded in `dlm.inputs.json` by its identity, so editing its files reruns it too.
  `builtin:tiny` is built into `bases/tiny` by whichever command needs it first
  (`base.tiny.ensure_tiny_dir`); a document on a real base builds nothing.
"""

from __future__ import annotations

from typing import Any

from dlm_git.layout import (
    ADAPTER_DIR,
    BASE_RECORD_NAME,
    EVAL_METRICS_NAME,
    EVAL_NAME,
    INPUTS_RECORD_NAME,
    LOCK_NAME,
    LOSS_NAME,
    MANIFEST_NAME,
    METRICS_NAME,
    PIPELINE_TINY_DIR,
    RUN_RECORD_NAME,
    SEGMENTS_DIR,
    TOKENS_DIR,
    VERIFY_NAME,
)

TINY_DIR = PIPELINE_TINY_DIR
DOCUMENTS_KEY = "documents"
PIPELINE_KEY = "pipeline"
DOCS_KEY = "docs"
"""`docs.<doc>`: one document's settings (`dlm_git.train.doc_params`); `train@<doc>`
depends on its own entry only, so changing one document's setting reruns that document."""
ITEM = "${item}"
"""A document directory, as DVC's `foreach` names each of `documents`."""


def doc_params_entry() -> dict[str, Any]:
    """What `init` writes under `docs.<doc>`: an empty place for training overrides."""
    return {"training": {}}


def _out(name: str) -> str:
    """`<doc>/<name>` in a stage of the pipeline (`name` from `dlm_git.layout`)."""
    return f"{ITEM}/{name}"


DEFAULT_PIPELINE_PARAMS: dict[str, Any] = {
    "lock_mode": "default",
    "verify_level": "hash",
    "device": "cpu",
    "numerics": "auto",
    "threads": 2,
    "nproc": 1,
}

STAGES: dict[str, Any] = {
    "base": {
        "foreach": "${documents}",
        "do": {
            "cmd": f"dlm-git base resolve ${{item}} --tiny-dir {TINY_DIR}",
            "deps": [_out(INPUTS_RECORD_NAME)],
            "outs": [{_out(BASE_RECORD_NAME): {"cache": False}}],
        },
    },
    "tokenize": {
        "foreach": "${documents}",
        "do": {
            "cmd": f"dlm-git tokenize ${{item}} --tiny-dir {TINY_DIR}",
            "deps": [_out(INPUTS_RECORD_NAME), _out(BASE_RECORD_NAME)],
            "params": [f"{DOCS_KEY}.{ITEM}"],
            "outs": [_out(TOKENS_DIR)],
        },
    },
    "train": {
        "foreach": "${documents}",
        "do": {
            "cmd": (
                f"dlm-git train ${{item}} --tiny-dir {TINY_DIR} --quiet"
                " --lock-mode ${pipeline.lock_mode} --device ${pipeline.device}"
                " --numerics ${pipeline.numerics} --threads ${pipeline.threads}"
                " --nproc ${pipeline.nproc}"
            ),
            "deps": [_out(TOKENS_DIR), _out(BASE_RECORD_NAME)],
            "params": [
                f"{DOCS_KEY}.{ITEM}",
                "pipeline.lock_mode",
                "pipeline.device",
                "pipeline.numerics",
                "pipeline.threads",
                "pipeline.nproc",
            ],
            "outs": [
                _out(ADAPTER_DIR),
                _out(SEGMENTS_DIR),
                {_out(LOCK_NAME): {"cache": False, "persist": True}},
                {_out(MANIFEST_NAME): {"cache": False}},
            ],
            "metrics": [{_out(METRICS_NAME): {"cache": False}}],
            "plots": [{_out(LOSS_NAME): {"cache": False, "x": "step", "y": "loss"}}],
        },
    },
    "eval": {
        "foreach": "${documents}",
        "do": {
            "cmd": f"dlm-git eval ${{item}} --tiny-dir {TINY_DIR}",
            "deps": [
                _out(ADAPTER_DIR),
                _out(MANIFEST_NAME),
                _out(LOCK_NAME),
                _out(BASE_RECORD_NAME),
                _out(INPUTS_RECORD_NAME),
            ],
            "params": [f"{DOCS_KEY}.{ITEM}"],
            # persist: DVC would delete them before the command runs, and a failed
            # evaluation must leave the old record as it was
            "outs": [{_out(EVAL_NAME): {"cache": False, "persist": True}}],
            "metrics": [{_out(EVAL_METRICS_NAME): {"cache": False, "persist": True}}],
        },
    },
    "verify": {
        "foreach": "${documents}",
        "do": {
            "cmd": (
                f"dlm-git verify --worktree --doc ${{item}} --level ${{pipeline.verify_level}}"
                f" --tiny-dir {TINY_DIR} --report {_out(VERIFY_NAME)}"
            ),
            "deps": [_out(ADAPTER_DIR), _out(MANIFEST_NAME), _out(LOCK_NAME)],
            "params": ["pipeline.verify_level"],
            "metrics": [{_out(VERIFY_NAME): {"cache": False}}],
        },
    },
}

SUPERSEDED: dict[str, tuple[dict[str, Any], ...]] = {
    "base": (
        {
            "foreach": "${documents}",
            "do": {
                "cmd": f"dlm-git base resolve ${{item}} --tiny-dir {TINY_DIR}",
                "always_changed": True,
                "outs": [{_out(BASE_RECORD_NAME): {"cache": False}}],
            },
        },
    ),
    "tokenize": (
        {
            "foreach": "${documents}",
            "do": {
                "cmd": f"dlm-git tokenize ${{item}} --tiny-dir {TINY_DIR}",
                "always_changed": True,
                "deps": [_out(BASE_RECORD_NAME)],
                "params": [f"{DOCS_KEY}.{ITEM}"],
                "outs": [_out(TOKENS_DIR)],
            },
        },
    ),
}
"""Earlier dlm-git releases' forms of a stage (`always_changed`, before the `inputs`
stage): `init` replaces a stage still in one of these forms by today's, and leaves a
stage the user changed as is."""

SIGN_STAGE: dict[str, Any] = {
    "foreach": "${documents}",
    "do": {
        # the key comes from $DLM_GIT_SIGNING_KEY or `git config dlm-git.signingKey` on this
        # machine, never from a file committed to git; without one the stage signs nothing
        "cmd": "dlm-git sign --doc ${item} --if-configured",
        "deps": [_out(ADAPTER_DIR), _out(MANIFEST_NAME), _out(LOCK_NAME)],
    },
}
"""`sign@<doc>` (added by `dlm-git init --sign`): writes `<doc>/dlm.sig` after training.
No outs: the signature is committed to git, and a machine without a key skips it."""

GITIGNORE_LINES = (
    "# dlm-git: machine-local state (token cache, run records)",
    ".dlm-git/",
    RUN_RECORD_NAME,
    "dvc_plots/",
    "/bases/tiny/",
    "# dlm-git: a killed train's half-written outputs (swept by the next train)",
    f".{ADAPTER_DIR}.new.*",
    f".{ADAPTER_DIR}.old.*",
    f".{SEGMENTS_DIR}.new.*",
    f".{SEGMENTS_DIR}.old.*",
)
