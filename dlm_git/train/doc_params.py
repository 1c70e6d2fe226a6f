"""A document's settings in params.yaml: `docs.<doc dir>.training.<setting>` overrides the
document's `training.<setting>`, `docs.<doc dir>.lock_mode` is its lock mode, and
`docs.<doc dir>.eval.tasks` replaces its `eval.tasks` (read by `dlm-git eval` only).

Invariants:
- One place for the rule: `with_params` applies the overrides before anything is derived
  from the training settings, for a training and for its replays alike (a replay reads
  the commit's params.yaml), so the effective config the manifest records and digests
  holds the overridden values, and `dvc exp run -S docs.<doc>.training.<setting>=...`
  retrains that document only (`train@<doc>` depends on `docs.<doc>`).
- Nothing is ignored: a key nothing reads (a misspelt setting, a document the
  `documents:` list does not name, a top-level `training:` beside `documents:`) is a
  `TrainError` naming params.yaml and the key, before anything trains. Values are judged
  by the document's own schema (`TrainingConfig`).
- `sources`, `sources_policy` and `cache` stay the document's: what a commit's replay
  materialises is read from the document itself.
- Without params.yaml, or without a `docs:` entry for the document, nothing changes.
"""

from __future__ import annotations

import dataclasses
import difflib
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import yaml

from dlm_git.doc.load import LoadedDocument
from dlm_git.doc.schema import TrainingConfig
from dlm_git.docset import PARAMS_NAME
from dlm_git.lock.decision import LockMode
from dlm_git.safeparse import TooDeep, load_yaml
from dlm_git.train.options import TrainError, TrainOptions
from dlm_git.validated import ValidationError

DOCS_KEY = "docs"
TRAINING_KEY = "training"
LOCK_MODE_KEY = "lock_mode"
EVAL_KEY = "eval"
"""`docs.<doc>.eval.tasks`: the task files `dlm-git eval` runs, replacing the document's
`eval.tasks` (docs/eval.md); read by eval, never by training."""
LOCK_MODES: tuple[LockMode, ...] = ("default", "strict", "update", "ignore")
KEPT = frozenset({"sources", "sources_policy", "cache"})
"""Training settings params.yaml cannot override (the document's inputs)."""
SETTINGS = frozenset(TrainingConfig.model_fields) - KEPT
FIX = "use a setting the document's `training:` takes (see docs/pipeline.md), or remove it"


@dataclasses.dataclass(frozen=True)
class DocParams:
    """What params.yaml sets for one document."""

    training: dict[str, Any]
    lock_mode: LockMode | None = None
    eval_tasks: tuple[str, ...] | None = None


def doc_key(loaded: LoadedDocument) -> str:
    """The document's key under `docs:` (its directory, as `documents:` lists it)."""
    rel = loaded.doc.directory.resolve().relative_to(loaded.repo_root.resolve())
    return rel.as_posix() or "."


def read_doc_params(repo_root: Path, doc: str, *, replay: bool = False) -> DocParams:
    """`docs.<doc>` of the repository's params.yaml, every key judged (see module doc).
    A `replay` judges the document's own entry only: keys elsewhere that an older
    dlm-git ignored (a top-level `training:`) do not stop a replay of its commit."""
    data = _read(repo_root / PARAMS_NAME)
    docs = data.get(DOCS_KEY)
    if not replay:
        _judge_others(data, docs)
    if not isinstance(docs, dict):
        return DocParams({})
    return _entry(docs.get(doc), f"{DOCS_KEY}.{doc}")


def _judge_others(data: dict[str, Any], docs: object) -> None:
    if TRAINING_KEY in data and "documents" in data:  # a dlm-git pipeline's params.yaml
        _refuse(TRAINING_KEY, f"is read by nothing: per-document settings are {DOCS_KEY}.<doc>")
    if docs is None:
        return
    if not isinstance(docs, dict):
        _refuse(DOCS_KEY, "is not a mapping of document directories")
    listed = data.get("documents")
    for name in docs:
        if not isinstance(name, str) or posixpath.normpath(name) != name:
            # `a/` would pass as listed, yet the document's key is `a`: silently unread
            _refuse(f"{DOCS_KEY}.{name}", "is not a document directory as `documents:` names one")
        if isinstance(listed, list) and name not in listed:
            _refuse(f"{DOCS_KEY}.{name}", "names no document of `documents:`")


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = load_yaml(path.read_text("utf-8"))
    except (TooDeep, yaml.YAMLError, UnicodeDecodeError) as exc:
        what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TrainError(PARAMS_NAME, f"does not parse: {what}", "fix params.yaml") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TrainError(PARAMS_NAME, "is not a mapping", "fix params.yaml")
    return data


def _entry(entry: object, where: str) -> DocParams:
    if entry is None:
        return DocParams({})
    if not isinstance(entry, dict):
        _refuse(where, f"is not a mapping of `{TRAINING_KEY}` and `{LOCK_MODE_KEY}`")
    for key in entry:
        if key not in (TRAINING_KEY, LOCK_MODE_KEY, EVAL_KEY):
            _refuse(
                f"{where}.{key}", f"is read by nothing (a training setting? {TRAINING_KEY}.{key})"
            )
    training = entry.get(TRAINING_KEY)
    training = {} if training is None else training  # `[]`, `0`, `false` are refused
    if not isinstance(training, dict):
        _refuse(f"{where}.{TRAINING_KEY}", "is not a mapping of training settings")
    for key in training:
        if key in KEPT:
            _refuse(f"{where}.{TRAINING_KEY}.{key}", "is set in the document only")
        if key not in SETTINGS:
            near = difflib.get_close_matches(str(key), sorted(SETTINGS), n=1)
            guess = f" (did you mean {near[0]}?)" if near else ""
            _refuse(f"{where}.{TRAINING_KEY}.{key}", f"no such training setting{guess}")
    mode = entry.get(LOCK_MODE_KEY)
    if mode is not None and mode not in LOCK_MODES:
        _refuse(f"{where}.{LOCK_MODE_KEY}", f"{mode!r:.40} is not one of {', '.join(LOCK_MODES)}")
    return DocParams(dict(training), mode, _eval_tasks(entry.get(EVAL_KEY), f"{where}.{EVAL_KEY}"))


def _eval_tasks(value: object, where: str) -> tuple[str, ...] | None:
    """`docs.<doc>.eval`: `{tasks: [file, ...]}` (None: the document's own list)."""
    if value is None:
        return None
    tasks = value.get("tasks") if isinstance(value, dict) and set(value) == {"tasks"} else None
    if not isinstance(tasks, list) or not all(isinstance(t, str) and t for t in tasks):
        raise TrainError(
            f"{PARAMS_NAME}: {where}",
            "is not `tasks:` with a list of task files",
            "see docs/eval.md, 'Tasks'",
        )
    return tuple(tasks)


def _refuse(key: str, problem: str) -> NoReturn:
    raise TrainError(f"{PARAMS_NAME}: {key}", problem, FIX)


def with_params(loaded: LoadedDocument, overrides: Mapping[str, Any]) -> LoadedDocument:
    """`loaded` with its training settings overridden (none: as written)."""
    if not overrides:
        return loaded
    fm = loaded.doc.frontmatter
    merged = {**fm.training.model_dump(), **overrides}
    try:
        training = TrainingConfig.model_validate(merged)
    except ValidationError as exc:
        first = exc.problems[0]
        where = ".".join(str(p) for p in first.loc)
        raise TrainError(
            f"{PARAMS_NAME}: {DOCS_KEY}.{doc_key(loaded)}.{TRAINING_KEY}.{where}",
            first.message,
            "give it a value the document's `training:` accepts",
        ) from None
    doc = dataclasses.replace(loaded.doc, frontmatter=fm.model_copy(update={"training": training}))
    return dataclasses.replace(loaded, doc=doc)


def apply_params(
    loaded: LoadedDocument, options: TrainOptions
) -> tuple[LoadedDocument, TrainOptions]:
    """The document and the request as params.yaml's `docs.<doc>` sets them: its training
    overrides, and its `lock_mode` where the request asks for the default one (the command
    line and `pipeline.lock_mode` win; a replay's `ignore` is never changed)."""
    replay = options.replay_flags is not None
    params = read_doc_params(loaded.repo_root, doc_key(loaded), replay=replay)
    if params.lock_mode is not None and options.lock_mode == "default":
        options = dataclasses.replace(options, lock_mode=params.lock_mode)
    return with_params(loaded, params.training), options
