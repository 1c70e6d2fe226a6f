"""What each document of the pipeline reads, written down where DVC can compare it: the
`inputs` stage.

Invariants:
- DVC compares only the deps written in `dvc.yaml`, and a `foreach` stage cannot list a
  different number of them per document. So one stage, `inputs`, depends on every listed
  document's inputs (its `.dlm`, each `training.sources` root, a local base's directory,
  the lm-eval task files it names with their includes and data)
  and writes `<doc>/dlm.inputs.json` per document: digests of exactly what that document
  reads. `base@<doc>` and `tokenize@<doc>` depend on that file, so a change to one
  document's inputs re-runs that document's stages only, and after `dvc repro`,
  `dvc status` is clean.
- The stage is computed by one function (`plan(...).stage()`): `init` writes it, and the
  stage's command (`dlm-git inputs`) refuses to run when `dvc.yaml`'s stage is not what
  the documents read now (a source root added to a `.dlm`, a document added to
  `documents:`), since DVC would not see that input change otherwise.
- An input DVC cannot track (a directive outside the repository or over a directory that
  holds pipeline outputs, a base outside the repository, a registry key without a pinned
  revision: none is today; a directory under a `.dvcignore` with rules, or holding one,
  `_dvcignored`) makes the stage `always_changed`, and `init` names the document and
  why: it then runs on every `dvc repro`, and when no `dlm.inputs.json` changed DVC runs
  nothing after it.
- `dlm.inputs.json` holds digests of content only (no mtimes, no machine paths): it is
  committed, and the same on every checkout of the commit.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.peek import directive_root, leaves_repository
from dlm_git.doc.walk import source_rows_digest
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json
from dlm_git.layout import INPUTS_RECORD_NAME, OUTPUT_NAMES, find_document
from dlm_git.paths import problem
from dlm_git.safeparse import Unbounded, load_yaml

STAGE = "inputs"
COMMAND = "dlm-git inputs"
DOCUMENTS_KEY = "documents"
DOCS_KEY = "docs"
FIX = "run `dlm-git init` to write the stage again"
KEEP = {"cache": False, "persist": True}
"""A record's out: committed to git, and never deleted by DVC before the command runs
(a stage refused as stale leaves the last record where it was, not a deleted file)."""
FIX_PARAMS = "fix params.yaml"
FIX_DOCUMENTS = "list each document's directory (it holds one .dlm)"
IGNORE_FILE = ".dvcignore"


@dataclass(frozen=True)
class DocInputs:
    """One document's inputs: what DVC can watch, and what it cannot (with why)."""

    rel: str
    """The document directory, repo-relative (as `documents:` lists it)."""
    deps: tuple[str, ...]
    untracked: tuple[str, ...]
    record: bytes


@dataclass(frozen=True)
class Plan:
    docs: tuple[DocInputs, ...]

    @property
    def untracked(self) -> list[str]:
        return [f"{d.rel}: {why}" for d in self.docs for why in d.untracked]

    def stage(self) -> dict[str, Any]:
        """The `inputs` stage of `dvc.yaml` (plain data, in a stable order)."""
        deps = sorted({dep for d in self.docs for dep in d.deps})
        body: dict[str, Any] = {"cmd": COMMAND}
        if self.untracked:
            body["always_changed"] = True
        body["deps"] = deps
        body["params"] = [DOCUMENTS_KEY, DOCS_KEY]  # docs.<doc>.eval.tasks names files
        body["outs"] = [{_record_path(d.rel): dict(KEEP)} for d in self.docs]
        return body


def _record_path(rel: str) -> str:
    return posixpath.join(rel, INPUTS_RECORD_NAME) if rel != "." else INPUTS_RECORD_NAME


def listed_documents(root: Path) -> list[str]:
    """`documents:` of the work tree's params.yaml (refused in one line when malformed)."""
    path = root / "params.yaml"
    if not path.is_file():
        return []
    try:
        data = load_yaml(path.read_text("utf-8"))
    except Unbounded as exc:
        raise DlmGitError("params.yaml", f"does not parse: {exc.problem}", FIX_PARAMS) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DlmGitError("params.yaml", f"does not parse: {first}", FIX_PARAMS) from None
    listed = data.get(DOCUMENTS_KEY) if isinstance(data, dict) else None
    if listed is None:
        return []
    if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed):
        raise DlmGitError(
            "params.yaml", f"'{DOCUMENTS_KEY}' is not a list of directories", "make it one"
        )
    if len(set(listed)) != len(listed):
        raise DlmGitError(
            "params.yaml", f"{DOCUMENTS_KEY}: a directory is listed twice", "list each once"
        )
    for rel in listed:
        if "${" in rel:  # DVC would interpolate it where dlm-git reads it as written
            raise DlmGitError("params.yaml", f"{DOCUMENTS_KEY}: '{rel}' holds '${{'", "rename it")
        unsafe = None if rel == "." else problem(rel)
        if unsafe is not None:  # `dlm.inputs.json` is written under each: never elsewhere
            raise DlmGitError(
                "params.yaml",
                f"{DOCUMENTS_KEY}: '{rel}' {unsafe.value}",
                "list each document directory relative to the repository root",
            )
    return list(listed)


def plan(root: Path, documents: list[str], *, records: bool = True) -> Plan:
    """Every listed document's inputs, judged against all documents' outputs (`records`:
    with each document's record; the stage alone needs no base to be there)."""
    outputs = {
        posixpath.normpath(posixpath.join(rel, name)) for rel in documents for name in OUTPUT_NAMES
    }
    outputs |= {_record_path(rel) for rel in documents}
    return Plan(tuple(_doc_inputs(root, rel, outputs, records) for rel in documents))


def _dvcignored(root: Path, deps: list[str]) -> tuple[list[str], list[str]]:
    """`deps` less the directories DVC cannot hash, and why DVC may not see every input,
    by DVC's rules (`dvc/ignore.py`, `dvc_data/hashfile/build.py`): a directory dep is
    hashed without what a `.dvcignore` above it ignores (the root's, or one in a directory
    above the dep), so an ignored input's edit would leave `dvc status` clean; DVC refuses
    to hash a directory holding a `.dvcignore` anywhere inside (`dvc repro` fails); a
    file dep is hashed whatever the rules say. A `.dvcignore` of comments only (what
    `dvc init` writes) hides nothing; one that is a link may hide anything."""
    directories = [d for d in deps if (root / d).is_dir() and not (root / d).is_symlink()]
    inside = {d: _ignore_files_under(root, d) for d in directories}
    above = {""} if directories else set()
    for dep in directories:
        while "/" in dep:
            dep = dep.rsplit("/", 1)[0]
            above.add(dep)
    why = [
        f"'{d}' holds {found[0]}, which DVC refuses in a directory it hashes"
        for d, found in inside.items()
        if found
    ]
    rules = {
        rel: _ignore_rules(root / rel) for rel in (posixpath.join(d, IGNORE_FILE) for d in above)
    }
    why += [f"{rel} {w}: DVC may not see every input" for rel, w in sorted(rules.items()) if w]
    return [d for d in deps if not inside.get(d)], why


def _ignore_files_under(root: Path, dep: str) -> list[str]:
    """The `.dvcignore` files inside directory dep `dep` (links are not walked into)."""
    return sorted(
        Path(here, IGNORE_FILE).relative_to(root).as_posix()
        for here, _, files in os.walk(root / dep)
        if IGNORE_FILE in files
    )


def _ignore_rules(path: Path) -> str | None:
    """What makes the `.dvcignore` at `path` hide files from DVC (None: it does not)."""
    if path.is_symlink():
        return "is a symbolic link"
    if not path.is_file():
        return None
    lines = path.read_bytes().decode("utf-8", "replace").splitlines()
    rules = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return "has rules" if rules else None


def _doc_inputs(root: Path, rel: str, outputs: set[str], records: bool) -> DocInputs:
    if os.path.realpath(root / rel) != os.path.normpath(os.path.join(os.path.realpath(root), rel)):
        raise DlmGitError(  # `dlm.inputs.json` would be written wherever the link points
            f"{rel}", "is reached through a symbolic link", "list the real directory instead"
        )
    if not (root / rel).is_dir():
        raise DlmGitError(
            "params.yaml", f"{DOCUMENTS_KEY}: '{rel}' is not a directory", FIX_DOCUMENTS
        )
    loaded = load_document(root / rel)
    dlm = (
        posixpath.join(rel, find_document(root / rel).name) if rel != "." else loaded.doc.path.name
    )
    deps, untracked = [dlm], []
    bad_names = [f.relpath for f in loaded.sources.skipped if f.bad_name]
    for spec in loaded.doc.frontmatter.training.sources:
        why = _untrackable_source(rel, spec.path, outputs) or _bad_name(spec.path, bad_names)
        if why is None:
            deps.append(posixpath.normpath(posixpath.join(rel, directive_root(spec.path))))
        else:
            untracked.append(f"training.sources '{spec.path}' {why}")
    base_dep, base_record, why = _base_inputs(loaded, root, outputs, records)
    deps += base_dep
    untracked += [why] if why else []
    task_deps, tasks = _task_inputs(loaded)
    deps += task_deps
    untracked += [f"'{d}' holds '${{', which DVC interpolates" for d in deps if "${" in d]
    deps = [d for d in deps if "${" not in d]
    deps, hidden = _dvcignored(root, deps)
    untracked += hidden
    record: dict[str, Any] = {
        "document": dlm,
        "dlm_sha256": loaded.doc.sha256,
        "base": base_record,
        "sources": {
            "files": len(loaded.sources.files),
            "digest": source_rows_digest(loaded.sources.files),
        },
    }
    if tasks:  # only a document that names tasks: every other record keeps its bytes
        record["tasks"] = tasks
    return DocInputs(rel, tuple(deps), tuple(untracked), canonical_json(record))


def _task_inputs(loaded: LoadedDocument) -> tuple[list[str], dict[str, Any]]:
    """The lm-eval task files a document names (checked by the one trust rule,
    `eval.taskdef`), their includes and data: deps, and their sha256 by repository path."""
    from dlm_git.eval.taskdef import doc_tasks

    deps: list[str] = []
    tasks: dict[str, Any] = {}
    for task in doc_tasks(loaded):
        deps += [task.path, *task.includes, *task.data]
        tasks[task.name] = {
            "task": {task.path: task.sha256},
            "includes": task.includes,
            "data": task.data,
        }
    return deps, tasks


def _overlaps(path: str, outputs: set[str]) -> bool:
    if path == ".":
        return True
    return any(o == path or o.startswith(path + "/") or path.startswith(o + "/") for o in outputs)


def _untrackable_source(rel: str, path: str, outputs: set[str]) -> str | None:
    if leaves_repository(rel, path):
        return "is outside the repository"
    joined = posixpath.normpath(posixpath.join(rel, directive_root(path)))
    if _overlaps(joined, outputs):
        return f"covers pipeline outputs ({joined})"
    return None


def _bad_name(path: str, bad_names: list[str]) -> str | None:
    """DVC hashes a directory dep by its file names as UTF-8 text: a name that is not
    UTF-8 under the directive's root makes `dvc repro` fail, so DVC cannot watch it."""
    root = directive_root(path)
    under = [n for n in bad_names if root == "." or n == root or n.startswith(root + "/")]
    return f"holds a name that is not UTF-8 ({under[0]})" if under else None


def _base_inputs(
    loaded: LoadedDocument, root: Path, outputs: set[str], records: bool
) -> tuple[list[str], dict[str, Any], str | None]:
    """(deps, what `dlm.inputs.json` records of the base, why DVC cannot watch it). The
    deps never need the base to be there (`init` may run before it is built); the record,
    written by the stage's command, holds a local base's identity."""
    from dlm_git.base.resolve import locate_base
    from dlm_git.base.spec import parse_base_spec

    raw = loaded.doc.frontmatter.base_model
    spec = parse_base_spec(raw, loaded.base_model_at)
    if spec.kind == "builtin" or (spec.kind == "hf" and spec.revision is not None):
        return [], {"spec": raw}, None  # one snapshot, whatever the machine
    record = _base_identity(loaded) if records else {}
    if spec.kind == "hf":
        return [], record, f"base_model '{raw}' has no pinned revision"
    located = locate_base(raw, loaded.doc.directory, loaded.repo_root, loaded.base_model_at)
    where = os.path.realpath(located.path) if located.path is not None else None
    base = os.path.relpath(where, os.path.realpath(root)) if where else ".."
    if base == ".." or base.startswith("../"):
        return [], record, f"base_model '{raw}' is outside the repository"
    base = Path(base).as_posix()
    if _overlaps(base, outputs):
        return [], record, f"base_model '{raw}' covers pipeline outputs"
    return [base], record, None


def _base_identity(loaded: LoadedDocument) -> dict[str, Any]:
    from dlm_git.base.resolve import resolve_base

    raw = loaded.doc.frontmatter.base_model
    doc_dir, where = loaded.doc.directory, loaded.base_model_at
    ident = resolve_base(raw, doc_dir, loaded.repo_root, where=where).identity
    return {
        "spec": raw,
        "revision": ident.revision,
        "tensor_root": ident.tensor_root,
        "tokenizer_sha256": ident.tokenizer_sha256,
        "config_sha256": ident.config_sha256,
    }


def stage_in(dvc_yaml: Path) -> Any:
    """The `inputs` stage as `dvc.yaml` holds it now (None: not there)."""
    if not dvc_yaml.is_file():
        return None
    try:
        data = load_yaml(dvc_yaml.read_text("utf-8"))
    except Exception:  # a dvc.yaml that does not parse: DVC itself says why
        return None
    stages = data.get("stages") if isinstance(data, dict) else None
    return stages.get(STAGE) if isinstance(stages, dict) else None


def write_records(root: Path, inputs: Plan) -> list[str]:
    """Write each document's `dlm.inputs.json` when it changed; the documents written."""
    written = []
    for doc in inputs.docs:
        path = root / _record_path(doc.rel)
        if not path.is_file() or path.read_bytes() != doc.record:
            atomic_write_bytes(path, doc.record)
            written.append(doc.rel)
    return written


def run(root: Path) -> tuple[Plan, list[str]]:
    """The stage's command: refuse a stale stage, then write the records."""
    inputs = plan(root, listed_documents(root))
    have = stage_in(root / "dvc.yaml")
    if have != inputs.stage():
        raise DlmGitError(
            "dvc.yaml",
            f"stage '{STAGE}' is not what the documents read now ({_difference(have, inputs)})",
            FIX,
        )
    return inputs, write_records(root, inputs)


def _difference(have: Any, inputs: Plan) -> str:
    if not isinstance(have, dict):
        return "there is no such stage"
    want = inputs.stage()
    deps = have.get("deps")
    have_deps: list[Any] = deps if isinstance(deps, list) else []
    missing = [d for d in want["deps"] if d not in have_deps]
    extra = [d for d in have_deps if d not in want["deps"]]
    parts = [f"not a dep: {', '.join(missing)}"] if missing else []
    parts += [f"no longer read: {', '.join(map(str, extra))}"] if extra else []
    if want.get("always_changed") and not have.get("always_changed"):
        parts.append(f"DVC cannot watch {'; '.join(inputs.untracked)}")
    if have.get("always_changed") and not want.get("always_changed"):
        parts.append("every input is watched now: always_changed no longer needed")
    return "; ".join(parts) or "its outs or params differ"
