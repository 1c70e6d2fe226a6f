"""Where a document's artefacts live: one `.dlm` per directory, everything beside it.

Invariant: this module is the only place that names these files, so the trainer, the
pipeline, the hooks and `verify` always agree on them.

    <doc dir>/<name>.dlm      the document (git)
    <doc dir>/dlm.lock        what produced the adapter (git)
    <doc dir>/manifest.json   inputs bound to outputs by hash (git)
    <doc dir>/metrics.json    final metrics, pure function of the inputs (git, dvc metrics)
    <doc dir>/train_loss.tsv  per-step loss (git, dvc plots)
    <doc dir>/verify.json     verify report (git, dvc metrics)
    <doc dir>/eval.json       evaluation record: val loss, probes (git; docs/eval.md)
    <doc dir>/eval_metrics.json  its numbers (git, dvc metrics)
    <doc dir>/dlm.sig         the signature over the .dlm, lock, manifest and adapter (git)
    <doc dir>/base.json       the resolved base's identity (git; the pipeline's dependency
                              on the base, so that swapping the base reruns training)
    <doc dir>/adapter/        the LoRA adapter (DVC-cached, gitignored):
              adapter_model.safetensors, adapter_config.json, README.md (the card)
    <doc dir>/tokens/         tokenized rows (DVC-cached, gitignored)
    <doc dir>/segments/       segment boundary snapshots (DVC-cached, gitignored)
    <doc dir>/run.json        wall times and throughput of the last run (gitignored)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlm_git.errors import DlmGitError

LOCK_NAME = "dlm.lock"
MANIFEST_NAME = "manifest.json"
METRICS_NAME = "metrics.json"
LOSS_NAME = "train_loss.tsv"
VERIFY_NAME = "verify.json"
EVAL_NAME = "eval.json"
"""The evaluation record (`dlm_git.eval.record`, docs/eval.md): committed to git."""
EVAL_METRICS_NAME = "eval_metrics.json"
"""The evaluation's numbers, for `dvc metrics` (committed to git)."""
ADAPTER_DIR = "adapter"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_CARD = "README.md"
ADAPTER_FILES = (ADAPTER_WEIGHTS, ADAPTER_CONFIG, ADAPTER_CARD)
"""The files of `adapter/` (PEFT's and the Hub's names; training writes these three and
nothing else). Records written before the card hold the first two only
(`LEGACY_ADAPTER_FILES`): the manifest says which files an adapter has."""
LEGACY_ADAPTER_FILES = (ADAPTER_WEIGHTS, ADAPTER_CONFIG)
TOKENS_DIR = "tokens"
SEGMENTS_DIR = "segments"
RUN_RECORD_NAME = "run.json"
BASE_RECORD_NAME = "base.json"
INPUTS_RECORD_NAME = "dlm.inputs.json"
"""What the pipeline's `inputs` stage records of a document's inputs (`pipeline.inputs`)."""
SIGNATURE_NAME = "dlm.sig"
PIPELINE_TINY_DIR = "bases/tiny"
"""Where the pipeline's `base` stage builds builtin:tiny, relative to the repository root
(machine-local, built only when a document uses it; verify and the hooks look for the base
there too)."""

DOC_OUTS = (ADAPTER_DIR, SEGMENTS_DIR)
"""The DVC-cached outs that verify reads from the DVC cache and fsck attributes to their
document (`tokens/` is cached too, but rebuilt from the inputs wherever it is needed)."""

OUTPUT_NAMES = (
    LOCK_NAME,
    MANIFEST_NAME,
    METRICS_NAME,
    LOSS_NAME,
    VERIFY_NAME,
    EVAL_NAME,
    EVAL_METRICS_NAME,
    BASE_RECORD_NAME,
    INPUTS_RECORD_NAME,
    SIGNATURE_NAME,
    ADAPTER_DIR,
    TOKENS_DIR,
    SEGMENTS_DIR,
    RUN_RECORD_NAME,
)


@dataclass(frozen=True)
class DocLayout:
    doc_path: Path

    @property
    def directory(self) -> Path:
        return self.doc_path.parent

    @property
    def lock(self) -> Path:
        return self.directory / LOCK_NAME

    @property
    def manifest(self) -> Path:
        return self.directory / MANIFEST_NAME

    @property
    def metrics(self) -> Path:
        return self.directory / METRICS_NAME

    @property
    def loss(self) -> Path:
        return self.directory / LOSS_NAME

    @property
    def verify_report(self) -> Path:
        return self.directory / VERIFY_NAME

    @property
    def adapter(self) -> Path:
        return self.directory / ADAPTER_DIR

    @property
    def tokens(self) -> Path:
        return self.directory / TOKENS_DIR

    @property
    def segments(self) -> Path:
        return self.directory / SEGMENTS_DIR

    @property
    def signature(self) -> Path:
        return self.directory / SIGNATURE_NAME

    @property
    def base_record(self) -> Path:
        return self.directory / BASE_RECORD_NAME

    @property
    def run_record(self) -> Path:
        return self.directory / RUN_RECORD_NAME

    def outputs(self) -> tuple[Path, ...]:
        return tuple(self.directory / name for name in OUTPUT_NAMES)


def find_document(target: Path) -> Path:
    """A `.dlm` path given either the file or its directory (which must hold exactly one)."""
    target = Path(target)
    if target.is_dir():
        found = sorted(target.glob("*.dlm"))
        if len(found) != 1:
            what = "no .dlm file" if not found else f"{len(found)} .dlm files"
            raise DlmGitError(
                str(target),
                f"directory holds {what}",
                "a document directory holds exactly one .dlm",
            )
        target = found[0]
    if not target.exists():
        raise DlmGitError(str(target), "no such file or directory", "check the document path")
    if not target.is_file():  # a FIFO, a device, a socket: reading it could block forever
        raise DlmGitError(str(target), "not a regular file", "give the path of a .dlm file")
    return target


def repo_root_of(path: Path) -> Path:
    """The enclosing git work tree (nearest ancestor with `.git`), else the path's directory."""
    start = Path(path).resolve()
    if start.is_file():
        start = start.parent
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start
