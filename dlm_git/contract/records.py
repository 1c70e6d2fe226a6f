"""The record checks of one document: `manifest.json` and `dlm.lock` parse, bind to each
other and to the `.dlm` (`manifest.parse`, `lock.parse`, `lock.binding`, `lock.fields`,
`lock.versions`, `doc.sha256`, `doc.base_model`, `config.digest`, `params.training`).

Invariants:
- They read raw bytes (`DocAt`) and judge plain JSON (`shapes.parse_manifest`,
  `lock.io.parse_lock_json`): no pydantic and no torch, so the pre-commit hook runs
  exactly these functions on the index and verify on a commit or the work tree.
- Every check compares a recomputed value with a recorded one; a record that is
  missing, unreadable or of the wrong shape fails, never passes. Text inputs (the
  `.dlm`, the lock) are hashed as git stores them (`outcome.expect_text`).
- A document directory without exactly one `.dlm` fails `doc.sha256`, naming how many.
- No recorded field switches what another check compares: the base's kind, which
  decides whether `lock.versions` re-derives the tiny base's revision, is read from the
  base spec (`spec_kind`), and a recorded `base.kind` that is not the spec's fails
  `doc.base_model`, as does a recorded `base.revision` the spec decides otherwise (none
  for a local directory, the pin of an `hf:<repo>@<rev>` spec).
- `params.training` compares params.yaml's overrides with the manifest as
  `train.assemble.effective_config` records them: what it resolves (`auto` target
  modules and precision) or leaves out (numerics, segment_every; gradient_checkpointing
  when off) and a `--max-steps` run's limit are not compared as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from dlm_git.contract.outcome import CheckFailed, Checks, expect_equal, expect_text
from dlm_git.contract.shapes import parse_manifest
from dlm_git.doc.peek import peek_base_model
from dlm_git.docat import DocAt, Rev
from dlm_git.docset import DOCS_KEY, PARAMS_NAME, TRAINING_KEY
from dlm_git.hashing import canonical_json_sha256
from dlm_git.layout import LOCK_NAME, MANIFEST_NAME

if TYPE_CHECKING:
    from dlm_git.base.spec import BaseSpec


class Records(NamedTuple):
    """A document's manifest, parsed and of the right shape, and its lock when that
    parsed too (the binding checks need both; sources and adapter the manifest only)."""

    manifest: dict[str, Any]
    lock: dict[str, Any] | None


def kind_word(doc: DocAt) -> str:
    """How a finding names the records' revision: `staged `, `committed ` or nothing."""
    if doc.tree.where is Rev.INDEX:
        return "staged "
    return "" if doc.tree.where is Rev.WORKTREE else "committed "


def parse_records(checks: Checks, doc: DocAt) -> Records | None:
    """`manifest.parse` and `lock.parse`; the records when both pass."""
    parsed: dict[str, dict[str, Any]] = {}

    def manifest() -> str:
        if doc.manifest is None:
            raise CheckFailed(f"{MANIFEST_NAME}: missing")
        parsed["manifest"] = parse_manifest(doc.manifest, MANIFEST_NAME)
        return f"schema v{parsed['manifest'].get('schema_version', 1)}"

    def lock() -> str:
        from dlm_git.lock.io import parse_lock_json

        if doc.lock is None:
            raise CheckFailed(f"{LOCK_NAME}: missing")
        found = parsed["lock"] = parse_lock_json(doc.lock, LOCK_NAME)
        return f"lock v{found['lock_version']}, class {found['determinism_class']}"

    checks.run("manifest.parse", manifest)
    checks.run("lock.parse", lock)
    if "manifest" not in parsed:
        return None
    return Records(parsed["manifest"], parsed.get("lock"))


def record_checks(
    checks: Checks, doc: DocAt, vouched: Callable[[Records], bool] | None = None
) -> Records | None:
    """Every record check of `doc`, in the table's order; the records when the manifest
    parses (the checks that bind the lock run only when it parses too). `vouched`: a
    commit-time shortcut that says `lock.versions` need not run (its inputs are HEAD's)."""
    records = parse_records(checks, doc)
    if records is None or records.lock is None:
        if doc.dlm_name is None:
            checks.add("doc.sha256", False, _not_one(doc))
        return records
    manifest, lock = records.manifest, records.lock
    checks.run("lock.binding", lambda: lock_binding(doc, manifest))
    checks.run("lock.fields", lambda: lock_fields(manifest, lock))
    if vouched is None or not vouched(records):
        checks.run("lock.versions", lambda: lock_versions(manifest, lock))
    checks.run("doc.sha256", lambda: doc_sha256(doc, manifest))
    checks.run("doc.base_model", lambda: doc_base_model(doc, manifest, lock))
    checks.run("config.digest", lambda: config_digest(manifest))
    checks.run("params.training", lambda: params_training(doc, manifest, lock))
    return records


def _not_one(doc: DocAt) -> str:
    return (
        f"{doc.rel} holds {len(doc.dlms)} .dlm files, not exactly one"
        " (keep one .dlm per document directory)"
    )


def lock_binding(doc: DocAt, manifest: dict[str, Any]) -> str:
    try:
        return expect_text("lock_sha256", manifest["lock_sha256"], doc.lock or b"")
    except CheckFailed as exc:
        raise CheckFailed(
            f"{MANIFEST_NAME} does not bind the {kind_word(doc)}{LOCK_NAME} (lock_sha256): "
            f"{str(exc).removeprefix('lock_sha256: ')}"
        ) from None


def lock_fields(manifest: dict[str, Any], lock: dict[str, Any]) -> str:
    base = manifest["base"]
    expect_equal("lock.dlm_id vs manifest", lock["dlm_id"], manifest["dlm_id"])
    expect_equal("lock.dlm_sha256 vs manifest", lock["dlm_sha256"], manifest["dlm_sha256"])
    expect_equal(
        "lock.base_model_sha256 vs manifest", lock["base_model_sha256"], base["tensor_root"]
    )
    if lock["base_model_revision"] != base["revision"]:  # None for a local directory base
        raise CheckFailed(
            f"lock.base_model_revision vs manifest: recorded {lock['base_model_revision']!r}"
            f" but found {base['revision']!r}"
        )
    expect_equal("lock.base_model vs manifest", lock["base_model"], base["spec"])
    expect_equal(
        "lock.seed vs manifest config", lock["seed"], manifest["training_config"].get("seed")
    )
    split = lock.get("val_fraction"), manifest["training_config"].get("val_fraction")
    if split != (None, None):  # the held-out split: recorded by both or by neither
        expect_equal("lock.val_fraction vs manifest config", *split)
        return "dlm_id, dlm_sha256, base, seed, val_fraction agree"
    return "dlm_id, dlm_sha256, base, seed agree"


def lock_versions(manifest: dict[str, Any], lock: dict[str, Any]) -> str:
    versions = lock["pinned_versions"]
    torch_v = versions.get("torch")
    if not isinstance(torch_v, str) or not version_major(torch_v).isdigit():
        raise CheckFailed(f"pinned_versions.torch: {torch_v!r} is not a torch version")
    if spec_kind(manifest["base"]["spec"]) != "builtin":  # the spec's, never the record's word
        return f"torch {torch_v}"
    # The builtin base's revision names the library versions that built it, which are the
    # versions that trained the adapter: the lock must agree with it.
    derived = builtin_revision(versions)
    if derived != lock["base_model_revision"]:
        raise CheckFailed(
            f"pinned_versions (torch {torch_v}, transformers "
            f"{versions.get('transformers')}, tokenizers {versions.get('tokenizers')}) "
            f"did not build base revision {lock['base_model_revision']} (they give "
            f"{derived}): the lock does not record the environment that trained this"
        )
    return f"torch {torch_v}; versions agree with base {derived}"


def doc_sha256(doc: DocAt, manifest: dict[str, Any]) -> str:
    if doc.dlm_name is None or doc.dlm is None:
        raise CheckFailed(_not_one(doc))
    try:
        return expect_text("dlm_sha256", manifest["dlm_sha256"], doc.dlm)
    except CheckFailed:
        raise CheckFailed(
            f"{doc.dlm_name} changed since it was trained ({MANIFEST_NAME} is stale)"
        ) from None


def doc_base_model(doc: DocAt, manifest: dict[str, Any], lock: dict[str, Any]) -> str:
    """The records name the base the `.dlm`'s frontmatter names (read without the
    schema; `builtin:tiny` when absent), and the manifest's `base.kind` is that spec's
    kind (the kind is never taken from the record: `lock.versions` reads the spec's)."""
    if doc.dlm is None:
        raise CheckFailed("the .dlm document is missing")
    written = peek_base_model(doc.dlm)
    if written is None:
        raise CheckFailed(f"{doc.dlm_name}'s frontmatter does not give base_model as a string")
    recorded = {
        f"{LOCK_NAME} base_model": lock["base_model"],
        f"{MANIFEST_NAME} base.spec": manifest["base"]["spec"],
    }
    wrong = [f"{name} {value!r}" for name, value in recorded.items() if value != written]
    if wrong:
        raise CheckFailed(
            f"{doc.dlm_name} trains on base_model {written!r} but its records name another"
            f" base: {' and '.join(wrong)}"
        )
    spec = _parsed_spec(written)
    if spec is not None and manifest["base"]["kind"] != spec.kind:
        raise CheckFailed(
            f"{MANIFEST_NAME} base.kind {manifest['base']['kind']!r:.40} is not the kind of"
            f" base_model {written!r} ({spec.kind}): a training records its spec's kind"
        )
    _expect_spec_revision(spec, manifest["base"]["revision"])
    return written


def _expect_spec_revision(spec: BaseSpec | None, recorded: object) -> None:
    """The recorded `base.revision` where the spec decides it: none for a local directory
    (it has no revision), the pinned one for an `hf:<repo>@<rev>` spec (the snapshot
    training resolves). A registry key's and the built-in base's are left to their own
    rules (an older record of a key predates its pin; `lock.versions` re-derives the
    tiny base's)."""
    if spec is None or spec.registry_key is not None or spec.kind == "builtin":
        return
    expected = spec.revision if spec.kind == "hf" else None
    if recorded != expected:
        raise CheckFailed(
            f"{MANIFEST_NAME} base.revision {recorded!r:.50} is not the revision base_model"
            f" {spec.raw!r:.60} trains on ({expected or 'none: a local directory has none'})"
        )


def spec_kind(spec: str) -> str | None:
    """The kind of base `spec` names (`builtin`, `hf`, `local`: `base.spec.parse_base_spec`,
    the rule training resolves it by); None for a spec that names no base this dlm-git
    knows (the document's own checks say so)."""
    parsed = _parsed_spec(spec)
    return None if parsed is None else parsed.kind


def _parsed_spec(spec: str) -> BaseSpec | None:
    from dlm_git.base.errors import BaseModelError
    from dlm_git.base.spec import parse_base_spec

    try:
        return parse_base_spec(spec)
    except BaseModelError:
        return None


def config_digest(manifest: dict[str, Any]) -> str:
    expect_equal(
        "config_sha256",
        manifest["config_sha256"],
        canonical_json_sha256(manifest["training_config"]),
    )
    return str(manifest["config_sha256"])[:16]


NOT_RECORDED = frozenset({"numerics", "segment_every"})
"""Settings the manifest's `training_config` does not hold (the lock and the segments do)."""
RESOLVED = frozenset({"target_modules", "precision"})
"""Settings whose `auto` the training resolves (by the base, by the device)."""
SMOKE_FLAG = "max_steps"
"""A `--max-steps` run's limit in the lock's `determinism_flags` (`train.smoke.FLAG`)."""
OFF_WHEN_ABSENT: dict[str, object] = {"gradient_checkpointing": False, "val_fraction": None}
"""Settings the manifest records only when on, each with its value when absent."""


def params_training(doc: DocAt, manifest: dict[str, Any], lock: dict[str, Any]) -> str:
    """Each setting params.yaml's `docs.<doc>.training` gives (the override a training
    applies, `train.doc_params`) equals what the manifest records it trained with: a
    changed override without a retraining is a stale record. A params.yaml that does not
    parse is `pipeline.documents`'s to report (no `docs:` here)."""
    where = f"{PARAMS_NAME} {DOCS_KEY}.{doc.rel}.{TRAINING_KEY}"
    entry = doc.tree.params.docs.get(doc.rel)
    training = entry.get(TRAINING_KEY) if isinstance(entry, dict) else None
    if entry is None or (isinstance(entry, dict) and training is None):
        return f"{PARAMS_NAME} overrides no training setting of {doc.rel}"
    if not isinstance(training, dict):
        what = where if isinstance(entry, dict) else where.removesuffix(f".{TRAINING_KEY}")
        raise CheckFailed(f"{what} is not a mapping of training settings (fix {PARAMS_NAME})")
    recorded = manifest["training_config"]
    smoke = isinstance(lock.get("determinism_flags"), dict) and (
        SMOKE_FLAG in lock["determinism_flags"]
    )
    wrong, compared = [], 0
    for key, value in training.items():
        name = str(key)
        if name in NOT_RECORDED or (name in RESOLVED and value == "auto"):
            continue
        if name == SMOKE_FLAG and smoke:
            continue
        if name not in recorded and name not in OFF_WHEN_ABSENT:
            wrong.append(f"{name} {value!r:.40} (it records none)")
        elif not same_setting(value, had := recorded.get(name, OFF_WHEN_ABSENT.get(name))):
            wrong.append(f"{name} {value!r:.40} (it records {had!r:.40})")
        compared += 1
    if wrong:
        raise CheckFailed(
            f"{where} sets {'; '.join(wrong)}: the {kind_word(doc)}{MANIFEST_NAME} was"
            " trained with other settings (params.yaml changed without a retraining)"
        )
    return f"{compared} setting(s) of {where} as trained"


_TRUE = frozenset({"true", "yes", "on", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "f", "n"})


def same_setting(value: object, recorded: object) -> bool:
    """Whether params.yaml's `value` is the setting the manifest records as `recorded`:
    read as the document's schema reads it (a number from its text, `1e-4` included, as
    YAML 1.1 leaves it a string; a flag from its word; a module list in any order), never
    a boolean as a number."""
    if isinstance(recorded, bool):
        if isinstance(value, str):
            return value.strip().lower() in (_TRUE if recorded else _FALSE)
        return value in (0, 1) and bool(value) is recorded
    if isinstance(recorded, (int, float)):
        if isinstance(value, bool):
            return False
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                return False
        # int and float compare exactly in Python (never through float(): 10**400 overflows)
        return isinstance(value, (int, float)) and value == recorded
    if isinstance(recorded, list) and isinstance(value, list):
        try:
            return sorted(set(map(str, value))) == sorted(set(map(str, recorded)))
        except ValueError:  # an int past Python's digit limit for str(): not a module name
            return False
    return value == recorded


def version_major(version: str) -> str:
    return version.split("+")[0].split(".")[0]


def builtin_revision(versions: dict[str, Any]) -> str:
    """The revision `builtin:tiny` has when built with these library versions."""
    from dlm_git.base.tiny import tiny_spec

    spec = tiny_spec(
        {
            "tokenizers": versions.get("tokenizers"),
            "torch": str(versions.get("torch")).split("+")[0],
            "transformers": versions.get("transformers"),
        }
    )
    return "tiny-" + canonical_json_sha256(spec)[:16]
