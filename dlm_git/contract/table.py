"""The one table of checks: each with a stable id, where it runs, its severity at commit
time, what it compares and how a failure is fixed.

Invariants:
- Every check any reader reports is a row here (`tests/unit/test_contract_table.py`
  keeps the ids of docs/verify.md and docs/hooks.md equal to it). The ids are stable:
  verify's JSON, the hooks' findings and the docs name checks by them.
- A check's state (`outcome.Outcome`) is set where it runs; how a commit-time reader
  treats it is read here: FAILED is the row's `severity`, ABSENT its `absent` severity
  (unless the check set its own, as lock drift and determinism do). `verify` never reads
  a severity: its verdict comes from the states alone (`verify.report.verdict_of`).
- Strict mode is not applied here: its one rule is `Severity.strict` (`dlm_git.severity`),
  which a hook applies once, to every finding, after the severities read here.
"""

from __future__ import annotations

from enum import Flag, auto
from typing import NamedTuple

from dlm_git.contract.outcome import Check, Outcome
from dlm_git.severity import Severity

RETRAIN = "retrain and stage the results"
"""The default fix: a hook says how with `retrain_fix`, by whether the repository has a
DVC pipeline."""


def retrain_fix(doc: str, pipeline: bool) -> str:
    """How document `doc`'s records are brought up to date: in a DVC project `dvc repro`,
    or `dvc commit` after a training by hand (it records the outputs dvc.lock lacks; a
    training by hand alone leaves dvc.lock behind); without one, `dlm-git train`."""
    if pipeline:
        return (
            "run `dvc repro`, or `dvc commit` after a `dlm-git train` by hand,"
            " and stage the results"
        )
    return f"run `dlm-git train {doc}` and stage the results"


class Runs(Flag):
    """Which readers run a check."""

    HOOK = auto()  # the pre-commit and pre-merge-commit hooks, on the index
    HASH = auto()  # `verify COMMIT` and `verify --worktree` (and so the pre-push hook)
    LEVEL = auto()  # `verify --level replay|segments` only
    BOTH = HOOK | HASH


class Rule(NamedTuple):
    id: str
    runs: Runs
    severity: Severity
    """At commit time, when the check FAILED."""
    absent: Severity
    """At commit time, when what it needs is not there (ABSENT)."""
    compares: str
    fix: str = RETRAIN
    """How a commit-time finding is fixed (unless the check names its own)."""


ERROR, WARN, IGNORE = Severity.ERROR, Severity.WARN, Severity.IGNORE

TABLE: tuple[Rule, ...] = (
    Rule(
        "pipeline.documents",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the document and params.yaml `documents:`"
        " agree: a listed directory holds a `.dlm`; a document with records is listed",
    ),
    Rule(
        "docset.dlm_id",
        Runs.BOTH,
        ERROR,
        ERROR,
        "no two `.dlm` files of the tree (each alone in its directory, listed or not) share"
        " a `dlm_id` (the original tool's store is keyed by it); the hook compares when a"
        " `.dlm` is staged",
        "give one of them a fresh dlm_id (a ULID: `dlm-git new` writes a starter document"
        " with one) and retrain it",
    ),
    Rule(
        "doc.trained",
        Runs.HOOK,
        WARN,
        WARN,
        "the document has records (a `.dlm` committed before"
        " its first training is reported, not refused)",
    ),
    Rule(
        "manifest.parse",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`manifest.json` exists and has the shape of a"
        " manifest (v1), field by field (`contract.shapes`): free-form values at most"
        " 64 levels deep (the schema's bound), each tensor name listed once",
    ),
    Rule(
        "lock.parse",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`dlm.lock` exists and holds only what a dlm-git writes (v1, `lock.fields`)",
        "restore it (`git checkout -- <doc>/dlm.lock`) or re-train with --update-lock",
    ),
    Rule(
        "lock.binding",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`manifest.lock_sha256` = sha256 of the `dlm.lock` bytes (CRLF read as LF)",
    ),
    Rule(
        "lock.fields",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the lock's dlm_id, dlm_sha256, base_model,"
        " base_model_revision, base_model_sha256, seed and val_fraction (the held-out"
        " split, when either records one) = the manifest's",
    ),
    Rule(
        "lock.versions",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`pinned_versions.torch` is a version; for"
        " builtin:tiny (the kind of `manifest.base.spec`, never the recorded `base.kind`)"
        " the base revision re-derived from the pinned versions = the lock's",
    ),
    Rule(
        "doc.sha256",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`manifest.dlm_sha256` = sha256 of the one `.dlm` as git stores it",
    ),
    Rule(
        "doc.base_model",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the `.dlm`'s `base_model` = `lock.base_model` = `manifest.base.spec`, and"
        " `manifest.base.kind` = that spec's kind (its `base.revision` none for a local"
        " directory, the pin of an `hf:<repo>@<rev>` spec)",
    ),
    Rule(
        "config.digest",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`manifest.config_sha256` = sha256 of the canonical JSON of `manifest.training_config`",
    ),
    Rule(
        "params.training",
        Runs.BOTH,
        ERROR,
        ERROR,
        "each setting of params.yaml `docs.<doc>.training` = `manifest.training_config`'s"
        " (`auto` target_modules/precision, numerics, segment_every and a smoke run's"
        " max_steps are not compared)",
    ),
    Rule(
        "sources.root",
        Runs.BOTH,
        ERROR,
        WARN,
        "`training.sources` re-expanded = the manifest's"
        " files and merkle root (sources outside the repository: absent)",
    ),
    Rule(
        "sections.order",
        Runs.BOTH,
        ERROR,
        IGNORE,
        "the document's and the sources' section ids, in order = `manifest.section_ids`",
    ),
    Rule(
        "adapter.files",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the adapter directory (the DVC cache at the md5"
        " `dvc.lock` names) holds exactly the files the manifest names, each one a"
        " training writes (weights, `adapter_config.json`, the card `README.md`)",
    ),
    Rule(
        "adapter.sha256",
        Runs.BOTH,
        ERROR,
        ERROR,
        "each adapter file's sha256 and size = the manifest's",
    ),
    Rule(
        "adapter.tensors",
        Runs.HASH,
        ERROR,
        ERROR,
        "every tensor's name, dtype, shape and digest and the tensor root = the manifest's",
    ),
    Rule(
        "adapter.structure",
        Runs.HASH,
        ERROR,
        ERROR,
        "`adapter_config.json` and the LoRA tensors'"
        " shapes agree with the training config and the base",
    ),
    Rule(
        "base.identity",
        Runs.HASH,
        ERROR,
        ERROR,
        "the base on this machine is the recorded one (tensor root, tokenizer, config.json)",
    ),
    Rule(
        "dvc.binding",
        Runs.BOTH,
        ERROR,
        ERROR,
        "`dvc.lock`'s record of `<doc>/adapter` = the md5 of"
        " every adapter file (the hook: a malformed record only)",
        "restore dvc.lock or run `dvc repro`",
    ),
    Rule(
        "eval.binding",
        Runs.BOTH,
        ERROR,
        WARN,
        "a document's `eval.json` (when there is one) parses, is of an eval_version this"
        " dlm-git knows, names this revision's adapter sha256, `manifest.json` bytes' sha256,"
        " the lock's numerics, and each task file's and data file's sha256; its floats are"
        " their bits, its exact matches its texts', and `eval_metrics.json` its numbers",
        "re-run `dlm-git eval DOC` (or `dvc repro eval@DOC`) and stage eval.json and"
        " eval_metrics.json",
    ),
    Rule(
        "signature.present",
        Runs.BOTH,
        ERROR,
        ERROR,
        "a `dlm.sig` is there (required only with --require-signature / dlm-git.requireSignature)",
    ),
    Rule(
        "signature.valid",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the bundle is well formed and verifies under a trusted key",
    ),
    Rule(
        "signature.trusted",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the bundle's key is trusted (required only with a signature required)",
    ),
    Rule(
        "signature.binding",
        Runs.BOTH,
        ERROR,
        ERROR,
        "the signed files are exactly the document's"
        " `.dlm`, lock, manifest and recorded adapter files",
    ),
    Rule(
        "lock.drift",
        Runs.HOOK,
        ERROR,
        ERROR,
        "the staged lock against HEAD's, by the drift table"
        " (`lock.policy`); accepted by a `supersedes` of HEAD's lock",
        "if intended, re-train with `--update-lock` (pipeline: lock_mode: update) to record"
        " `supersedes`",
    ),
    Rule(
        "determinism",
        Runs.HOOK,
        ERROR,
        ERROR,
        "HEAD's inputs but another adapter: ERROR when the"
        " setup is the same and its profile promises bits, else WARN naming the cause",
        "investigate nondeterminism: compare `dlm-git doctor` with the lock; see docs/hooks.md",
    ),
    Rule("replay.versions", Runs.LEVEL, ERROR, ERROR, "the lock's torch major = the installed one"),
    Rule(
        "replay.profile",
        Runs.LEVEL,
        ERROR,
        ERROR,
        "the lock's numerics setup is well formed and this machine can run it",
    ),
    Rule("replay", Runs.LEVEL, ERROR, ERROR, "the re-trained adapter = the recorded one"),
    Rule(
        "eval.replay",
        Runs.LEVEL,
        ERROR,
        ERROR,
        "after a bitwise replay, the evaluation re-run under the lock's profile = `eval.json`,"
        " byte for byte",
    ),
    Rule(
        "segments.chain",
        Runs.LEVEL,
        ERROR,
        ERROR,
        "the segment-boundary chain is whole and ends at the adapter",
    ),
    Rule(
        "segments.start",
        Runs.LEVEL,
        ERROR,
        ERROR,
        "boundary 0 = the start training makes from the seed",
    ),
    Rule("segments.replay", Runs.LEVEL, ERROR, ERROR, "a sampled segment replays byte for byte"),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in TABLE}


def rule(check_id: str) -> Rule:
    return RULES[check_id]


def severity_of(check: Check) -> Severity | None:
    """How a commit-time reader treats `check` (None: it passed)."""
    if check.state is Outcome.OK:
        return None
    if check.severity is not None:
        return check.severity
    row = RULES[check.name]
    return row.severity if check.state is Outcome.FAILED else row.absent
