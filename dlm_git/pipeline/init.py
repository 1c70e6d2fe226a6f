"""`dlm-git init`: bring the dlm-git pipeline to an existing git repository.

Invariants:
- Idempotent: a second run with the same arguments changes nothing and says so.
- Never clobbers: the user's own stages and params are kept byte-for-byte in meaning
  (round-trip YAML keeps comments and order); a stage of ours that the user changed is
  left as is and reported.
- Every file it writes is written atomically.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm_git import gitio
from dlm_git.doc.starter import STARTER_NOTE, starter_text
from dlm_git.errors import DlmGitError, require_training_stack
from dlm_git.fsutil import atomic_write_text
from dlm_git.pipeline.templates import (
    DEFAULT_PIPELINE_PARAMS,
    DOCS_KEY,
    DOCUMENTS_KEY,
    GITIGNORE_LINES,
    PIPELINE_KEY,
    SIGN_STAGE,
    STAGES,
    SUPERSEDED,
    doc_params_entry,
)
from dlm_git.safeparse import load_yaml_with

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class InitResult:
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What was deliberately not done (not a change: a second run says it again)."""


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML()
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    return y


def _load(path: Path) -> Any:
    if not path.is_file():
        return None
    reader = _yaml()  # outside the `try`: a missing ruamel is not "not valid YAML"
    try:
        return load_yaml_with(reader, path.read_text("utf-8"))
    except Exception as exc:  # ruamel raises many types; all mean "not valid YAML"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DlmGitError(
            str(path), f"not valid YAML: {first}", "fix it, then re-run init"
        ) from None


def _dump(data: Any) -> str:
    buf = io.StringIO()
    _yaml().dump(data, buf)
    return buf.getvalue()


def _plain(value: Any) -> Any:
    """ruamel's round-trip containers as plain dicts/lists, for comparison."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def merge_dvc_yaml(path: Path, result: InitResult, sign: bool = False) -> None:
    data = _load(path)
    if data is None:
        from ruamel.yaml.comments import CommentedMap

        data = CommentedMap()
    if not isinstance(data, dict):
        raise DlmGitError(str(path), "top level is not a mapping", "fix dvc.yaml first")
    stages = data.get("stages")
    if stages is None:
        from ruamel.yaml.comments import CommentedMap

        stages = CommentedMap()
        data["stages"] = stages
    if not isinstance(stages, dict):
        raise DlmGitError(str(path), "'stages' is not a mapping", "fix dvc.yaml first")
    added, updated = [], []
    wanted = {**STAGES, **({"sign": SIGN_STAGE} if sign else {})}
    for name, body in wanted.items():
        if name not in stages:
            stages[name] = body
            added.append(name)
        elif _plain(stages[name]) in SUPERSEDED.get(name, ()):
            stages[name] = body
            updated.append(name)
        elif _plain(stages[name]) != body:
            result.warnings.append(
                f"{path.name}: stage '{name}' differs from dlm-git's; left as is"
            )
    if added or updated:
        atomic_write_text(path, _dump(data))
    if added:
        result.changes.append(f"{path.name}: added stages {', '.join(added)}")
    if updated:
        result.changes.append(
            f"{path.name}: updated stages {', '.join(updated)} (not always_changed)"
        )


def merge_inputs_stage(root: Path, result: InitResult) -> None:
    """Write the `inputs` stage as the listed documents need it now (first in the file;
    ours entirely: `dlm-git inputs` refuses to run any other form)."""
    from dlm_git.pipeline.inputs import STAGE, listed_documents, plan

    path = root / "dvc.yaml"
    try:
        inputs = plan(root, listed_documents(root), records=False)
    except DlmGitError as exc:
        result.warnings.append(f"{path.name}: stage '{STAGE}' not written: {exc.one_line()}")
        return
    data = _load(path)
    stages = data["stages"]
    body = inputs.stage()
    for why in inputs.untracked:
        result.notes.append(f"DVC cannot watch {why}: stage '{STAGE}' runs on every repro")
    if STAGE in stages and _plain(stages[STAGE]) == body:
        return
    if STAGE in stages:
        stages[STAGE] = body
    else:
        stages.insert(0, STAGE, body)
    atomic_write_text(path, _dump(data))
    result.changes.append(f"{path.name}: stage '{STAGE}' for {len(inputs.docs)} document(s)")


def merge_params(path: Path, doc_dir: str | None, result: InitResult) -> None:
    data = _load(path)
    if data is None:
        from ruamel.yaml.comments import CommentedMap

        data = CommentedMap()
    if not isinstance(data, dict):
        raise DlmGitError(str(path), "top level is not a mapping", "fix params.yaml first")
    changed = []
    docs = data.get(DOCUMENTS_KEY)
    if docs is None:
        data[DOCUMENTS_KEY] = docs = []
        changed.append(DOCUMENTS_KEY)
    if not isinstance(docs, list):
        raise DlmGitError(str(path), f"'{DOCUMENTS_KEY}' is not a list", "make it a list of dirs")
    if doc_dir is not None and doc_dir not in docs:
        docs.append(doc_dir)
        changed.append(f"{DOCUMENTS_KEY} += {doc_dir}")
    pipeline = data.get(PIPELINE_KEY)
    if pipeline is None:
        from ruamel.yaml.comments import CommentedMap

        data[PIPELINE_KEY] = pipeline = CommentedMap()
    if not isinstance(pipeline, dict):
        raise DlmGitError(str(path), f"'{PIPELINE_KEY}' is not a mapping", "fix params.yaml")
    for key, value in DEFAULT_PIPELINE_PARAMS.items():
        if key not in pipeline:
            pipeline[key] = value
            changed.append(f"{PIPELINE_KEY}.{key}")
    changed += _merge_doc_entries(path, data, docs)
    if changed:
        atomic_write_text(path, _dump(data))
        result.changes.append(f"{path.name}: {', '.join(changed)}")


def _merge_doc_entries(path: Path, data: Any, documents: list[Any]) -> list[str]:
    """A `docs.<doc>` entry for each listed document that has none (`train@<doc>`
    depends on it: DVC refuses a missing one)."""
    from ruamel.yaml.comments import CommentedMap

    entries = data.get(DOCS_KEY)
    if entries is None:
        data[DOCS_KEY] = entries = CommentedMap()
    if not isinstance(entries, dict):
        raise DlmGitError(str(path), f"'{DOCS_KEY}' is not a mapping", "fix params.yaml")
    added = []
    for doc in documents:
        if isinstance(doc, str) and doc not in entries:
            entries[doc] = doc_params_entry()
            added.append(f"{DOCS_KEY}.{doc}")
    return added


def merge_gitignore(path: Path, result: InitResult) -> None:
    text = path.read_text("utf-8") if path.is_file() else ""
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in GITIGNORE_LINES if line not in have]
    if [m for m in missing if not m.startswith("#")]:
        sep = "" if not text or text.endswith("\n") else "\n"
        atomic_write_text(path, text + sep + "\n".join(missing) + "\n")
        result.changes.append(
            f".gitignore: added {', '.join(m for m in missing if not m.startswith('#'))}"
        )


def scaffold(root: Path, name: str, result: InitResult) -> None:
    doc_dir = root / name
    doc = doc_dir / f"{name}.dlm"
    existing = sorted(doc_dir.glob("*.dlm")) if doc_dir.is_dir() else []
    if existing:
        return
    atomic_write_text(doc, starter_text(name, sources=True))
    notes = doc_dir / "notes" / "README.md"
    if not notes.exists():
        atomic_write_text(notes, STARTER_NOTE)
    result.changes.append(f"{name}/{name}.dlm: created (and {name}/notes/)")


def dvc_init(root: Path, result: InitResult) -> None:
    if (root / ".dvc").is_dir():
        return
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dvc", "init", "-q"], cwd=root, capture_output=True, text=True
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise DlmGitError("dvc init", tail[-1] if tail else "failed", "run `dvc init` by hand")
    result.changes.append(".dvc/: dvc init")


def run_init(
    cwd: Path, doc_name: str | None, install_hooks: bool = True, sign: bool = False
) -> InitResult:
    if doc_name is not None and not NAME_RE.match(doc_name):
        raise DlmGitError(
            "--doc", f"'{doc_name}' is not a valid document name", "use letters, digits, . _ -"
        )
    root = gitio.toplevel(cwd)
    # DVC drives the pipeline (and `dvc init` runs as a subprocess): on a core install,
    # refuse before anything is written
    require_training_stack("dlm-git init", "dvc", "ruamel.yaml")
    result = InitResult()
    dvc_init(root, result)
    merge_dvc_yaml(root / "dvc.yaml", result, sign)
    merge_params(root / "params.yaml", doc_name, result)
    merge_gitignore(root / ".gitignore", result)
    if doc_name is not None:
        scaffold(root, doc_name, result)
        if "." in doc_name:
            result.notes.append(
                f"'{doc_name}' holds a '.': `dvc exp run -S docs.{doc_name}.…` cannot address it"
                " (DVC splits keys at dots); edit params.yaml instead, or rename the directory"
            )
    merge_inputs_stage(root, result)
    if install_hooks:
        _install_hooks(root, result)
    return result


def _install_hooks(root: Path, result: InitResult) -> None:
    """dlm-git's shims, unless the pre-commit framework runs our hooks (then one note)."""
    from dlm_git.hooks.install import framework_note
    from dlm_git.hooks.install import install_hooks as do_install

    note = framework_note(root)
    if note is not None:
        result.notes.append(note)
        return
    for line in do_install(root, uninstall=False):
        if not line.endswith("already installed"):
            result.changes.append(line)
