"""The lm-evaluation-harness tasks a document names, read as hostile bytes and judged
before lm-eval sees them: the trust boundary of `dlm-git eval` (docs/eval.md, "Tasks").

Invariants:
- A task is a YAML file committed in the repository, named in the document's
  `eval.tasks` (or params.yaml's `docs.<doc>.eval.tasks`) by a path relative to the
  document's directory. Every path (the task file, an `include:`, a data file) is
  resolved to a repository path, must be one `paths.problem` accepts, lie inside the
  repository through no symlink, and be a regular file.
- Task YAML is parsed by `safeparse` only (a safe loader, bounded, no duplicate keys),
  never by lm-eval's loader. A YAML tag (lm-eval's `!function`, which imports Python
  from beside the file) is refused with its line before anything is built.
- Only the keys in `taskrules.RULES` are run, each checked to be plain data of the expected shape:
  the dataset is `json` over local `data_files`; metrics are lm-eval's built-in `acc`,
  `acc_norm` and `exact_match` with `mean` aggregation; generation is greedy. Anything
  that would run code (`process_results`, `process_docs`, `custom_dataset`, `class`,
  filters, a metric lm-eval would fetch) or read remote data is refused in one
  `EvalError` line naming the file and line, with a hint.
- A template lm-eval renders (`TEMPLATE_KEYS`) is judged here by the bounded sandbox's
  rules (`eval.sandbox.problem`: the allow-list of tags, filters and methods), so a
  template it would refuse is refused before anything runs; templates render only in
  that sandbox (`eval.harness`), never in lm-eval's unsandboxed environment. jinja2
  is imported only when a task file sets one of those keys to text.
- A `TaskDef` carries the sha256 of the task file, of each included file and of each
  data file, by repository path: what the record states and verify compares.
- Imports nothing heavy (verify's hash level reads task files through it).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dlm_git.eval.record import EvalError
from dlm_git.eval.taskrules import RULES
from dlm_git.hashing import canonical_text, sha256_bytes
from dlm_git.paths import problem
from dlm_git.safeparse import compose_yaml, load_json, load_yaml

if TYPE_CHECKING:
    from dlm_git.doc.load import LoadedDocument

MAX_INCLUDE_DEPTH = 8
MAX_TASK_BYTES = 1 << 20
COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
_CODE_HINT = "dlm-git runs declarative tasks only; see docs/eval.md, 'Tasks'"
_TEMPLATE_HINT = "use the tags, filters and methods docs/eval.md lists ('Tasks', templates)"
INSTALL_HINT = "install the eval extra: pip install 'dlm-git[eval]'"
_CODE_KEYS = {
    "process_results": "a Python hook",
    "process_docs": "a Python hook",
    "custom_dataset": "a Python dataset loader",
    "class": "a Python task class",
    "filter_list": "filters (a custom filter is Python)",
    "doc_to_image": "a multimodal hook",
    "doc_to_audio": "a multimodal hook",
}


_PATTERN = re.compile(r"[*?\[\]{}]")
"""What `datasets` (fsspec's glob) reads as a pattern in a data path."""


class Absent(Enum):
    """Why a `Reader` has no bytes for a repository path (the value: what a refusal says;
    `ABSENT_HINTS`: how to fix it)."""

    MISSING = "no such file in the repository"
    LINKED = "is a symbolic link or lies under one"
    NOT_REGULAR = "is not a regular file (a directory, FIFO or device)"


ABSENT_HINTS = {
    Absent.MISSING: "commit the file, or fix the path (relative to the document's directory)",
    Absent.LINKED: "commit the file itself in place of the link (no file is read through one)",
    Absent.NOT_REGULAR: "name a regular file committed in the repository",
}

Reader = Callable[[str], "bytes | Absent"]
"""The bytes of a repository path that names a regular file, or why there are none: the
work tree's (`worktree`), or a commit's for a verifier reading git objects."""


def worktree(repo_root: Path) -> Reader:
    """Files of the work tree at `repo_root`, reached through no symlink."""

    def read(rel: str) -> bytes | Absent:
        path = repo_root / rel
        if _through_link(repo_root, rel):
            return Absent.LINKED
        if not path.is_file():
            return Absent.NOT_REGULAR if os.path.lexists(path) else Absent.MISSING
        return path.read_bytes()

    return read


@dataclass(frozen=True)
class TaskDef:
    """One checked task: its name, its files' sha256 by repository path, and its config
    (data files as repository paths: `map_files` turns them into local paths)."""

    name: str
    path: str
    sha256: str
    includes: dict[str, str]
    data: dict[str, str]
    config: dict[str, Any]


@dataclass(frozen=True)
class _Source:
    """A task YAML file being read: its repository path and text."""

    rel: str
    text: str

    def where(self, line: int | None) -> str:
        return f"{self.rel}:{line}" if line else self.rel


def doc_tasks(loaded: LoadedDocument, *, replay: bool = False) -> list[TaskDef]:
    """The tasks a document names, checked: params.yaml's `docs.<doc>.eval.tasks` where
    it sets them, else the document's `eval.tasks` (`replay`: params.yaml judged as a
    replay judges it, the document's own entry only)."""
    from dlm_git.train.doc_params import EVAL_KEY, doc_key, read_doc_params

    key = doc_key(loaded)
    entries = read_doc_params(loaded.repo_root, key, replay=replay).eval_tasks
    where = f"params.yaml: docs.{key}.{EVAL_KEY}.tasks"
    if entries is None:
        entries = loaded.doc.frontmatter.eval.tasks
        where = f"{_rel(loaded.repo_root, loaded.doc.path)}: eval.tasks"
    return load_tasks(worktree(loaded.repo_root), key, entries, where)


def _rel(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def load_tasks(
    read: Reader, doc_rel: str, entries: tuple[str, ...], where: str = "eval.tasks"
) -> list[TaskDef]:
    """The tasks `entries` (paths relative to the document's directory `doc_rel`, named
    at `where`), each checked; two tasks of one name are refused."""
    tasks = [load_task(read, doc_rel, entry, where) for entry in entries]
    seen: dict[str, str] = {}
    for task in tasks:
        if task.name in seen:
            raise EvalError(
                task.path,
                f"task name {task.name!r} is also {seen[task.name]}'s",
                "give each task its own `task:` name",
            )
        seen[task.name] = task.path
    return tasks


def load_task(read: Reader, doc_rel: str, entry: str, where: str = "eval.tasks") -> TaskDef:
    """One task file, checked (see the module invariants)."""
    rel, raw = repo_file(read, doc_rel, entry, where)
    includes: dict[str, str] = {}
    config, sha = _read_config(read, rel, raw, includes, ())
    source = _Source(rel, "")
    name = config.get("task")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise EvalError(
            rel,
            f"`task:` {name!r:.60} is not a task name",
            "name it with letters, digits, _ and - (a DVC metrics key)",
        )
    _check_dataset(config, source)
    data = _data_files(read, rel, config)
    del includes[rel]
    return TaskDef(name, rel, sha, includes, data, config)


def repo_file(read: Reader, base_rel: str, entry: object, what: str) -> tuple[str, bytes]:
    """`entry` (relative to the repository directory `base_rel`) as a repository path
    of a regular file inside the repository, and its bytes."""
    if not isinstance(entry, str) or not entry or "://" in entry or entry.startswith("/"):
        raise EvalError(
            f"{what} {entry!r:.80}",
            "is not a path relative to its directory (remote and absolute paths are refused)",
            "commit the file in the repository and name it by a relative path",
        )
    if _PATTERN.search(entry) or "${" in entry:
        raise EvalError(  # `datasets` globs a data path; DVC interpolates `${...}`
            f"{what} {entry!r:.80}",
            "holds a pattern character (* ? [ ] { } or ${)",
            "name each file by its plain relative path",
        )
    rel = posixpath.normpath(posixpath.join(base_rel, entry))
    bad = problem(rel) if not rel.startswith("../") and rel != ".." else "is outside it"
    if bad is not None:
        why = bad if isinstance(bad, str) else bad.value
        raise EvalError(
            f"{what} {entry!r:.80}",
            f"{why} (as a repository path)",
            "keep task files and their data inside the repository",
        )
    raw = read(rel)
    if isinstance(raw, Absent):
        raise EvalError(f"{what} {entry!r:.80}", f"{raw.value} ({rel})", ABSENT_HINTS[raw])
    return rel, raw


def _through_link(root: Path, rel: str) -> bool:
    probe = root
    for part in rel.split("/"):
        probe = probe / part
        if probe.is_symlink():
            return True
    return False


def _read_config(
    read: Reader, rel: str, raw: bytes, includes: dict[str, str], chain: tuple[str, ...]
) -> tuple[dict[str, Any], str]:
    """The merged config of `rel` (its `include:` first, then its own keys), and the
    sha256 of its bytes; every file read is recorded in `includes`."""
    if rel in chain or len(chain) > MAX_INCLUDE_DEPTH:
        raise EvalError(rel, "is included in a cycle or too deeply", "simplify the includes")
    if len(raw) > MAX_TASK_BYTES:
        raise EvalError(rel, f"is larger than {MAX_TASK_BYTES} bytes", "a task file is small")
    sha = sha256_bytes(canonical_text(raw))  # a CRLF checkout: the same text, the same digest
    includes[rel] = sha
    source = _Source(rel, _decode(raw, rel))
    data = _parse(source)
    _judge(data, source)
    base: dict[str, Any] = {}
    if "include" in data:
        inc, inc_raw = repo_file(read, posixpath.dirname(rel), data["include"], f"{rel}: include")
        base, _ = _read_config(read, inc, inc_raw, includes, (*chain, rel))
    merged = {**base, **{k: v for k, v in data.items() if k != "include"}}
    return merged, sha


def _decode(raw: bytes, rel: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EvalError(rel, "is not UTF-8 text", "save the task file as UTF-8") from None


def _parse(source: _Source) -> dict[str, Any]:
    """The YAML mapping of `source`: tags refused with their line, then safely loaded."""
    try:
        node = compose_yaml(source.text)
        tagged = _first_tag(node)
        if tagged is not None:
            raise EvalError(
                source.where(tagged.start_mark.line + 1),
                f"the YAML tag {tagged.tag!r:.40} runs code (lm-eval imports Python for it)",
                _CODE_HINT,
            )
        data = load_yaml(source.text, unique_keys=True)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        what = str(getattr(exc, "problem", None) or exc).strip().splitlines()[0]
        raise EvalError(source.where(line), f"does not parse: {what}", "fix the YAML") from None
    if not isinstance(data, dict):
        raise EvalError(source.rel, "is not a mapping of task settings", "see docs/eval.md")
    return data


def _first_tag(node: yaml.Node | None) -> yaml.Node | None:
    """The first node (document order) carrying an explicit, non-standard tag; an aliased
    node is visited once."""
    stack = [node] if node is not None else []
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if not current.tag.startswith("tag:yaml.org,2002:"):
            return current
        if isinstance(current, yaml.MappingNode):
            stack.extend(reversed([n for pair in current.value for n in pair]))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(reversed(current.value))
    return None


def _line_of(source: _Source, key: str) -> int | None:
    node = compose_yaml(source.text) if source.text else None
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if k.value == key:
                return int(k.start_mark.line) + 1
    return None


def _refuse(source: _Source, key: str, what: str, hint: str) -> EvalError:
    return EvalError(source.where(_line_of(source, key)), f"`{key}` {what}", hint)


def _judge(data: dict[str, Any], source: _Source) -> None:
    """Every key of one file (before merging) is one dlm-git runs, with a value of the
    shape it runs (`taskrules.RULES`); code-running keys are refused by name."""
    for key, value in data.items():
        if key in _CODE_KEYS:
            raise _refuse(source, key, f"is {_CODE_KEYS[key]}: it runs code", _CODE_HINT)
        rule = RULES.get(key)
        if rule is None:
            raise _refuse(source, str(key), "is not a task setting dlm-git runs", _CODE_HINT)
        wrong = rule(value)
        if wrong is not None:
            raise _refuse(source, key, wrong, "see docs/eval.md, 'Tasks'")
        if key in TEMPLATE_KEYS and isinstance(value, str):
            _check_template(source, key, value)


TEMPLATE_KEYS = ("doc_to_text", "doc_to_target", "doc_to_choice", "description")
"""The keys lm-eval renders as Jinja templates (a value naming a column is not rendered,
and it is one plain text: always accepted)."""


def _check_template(source: _Source, key: str, value: str) -> None:
    """A template outside what the bounded sandbox renders is refused here, before
    anything runs, as it would be at render (`eval.sandbox.problem`, one rule)."""
    try:
        from dlm_git.eval.sandbox import problem
    except ImportError:
        raise _refuse(
            source, key, "is a template, and jinja2 is not installed to judge it", INSTALL_HINT
        ) from None
    why = problem(value)
    if why is not None:
        raise _refuse(source, key, f"is a template dlm-git does not render: {why}", _TEMPLATE_HINT)


def _check_dataset(config: dict[str, Any], source: _Source) -> None:
    """The merged config names its data and its kind (each value checked by `taskrules.RULES`)."""
    for key in ("dataset_path", "output_type", "doc_to_text"):
        if key not in config:
            raise EvalError(source.rel, f"sets no `{key}`", "see docs/eval.md, 'Tasks'")


def _data_files(read: Reader, rel: str, config: dict[str, Any]) -> dict[str, str]:
    """Each data file (relative to the task file's directory): its repository path to its
    sha256; the config's `data_files` rewritten to those repository paths."""
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    if files is None:
        raise EvalError(rel, "names no dataset_kwargs.data_files", "name the task's JSONL file")
    out: dict[str, str] = {}

    def one(entry: str) -> str:
        found, raw = repo_file(read, posixpath.dirname(rel), entry, f"{rel}: data_files")
        out[found] = sha256_bytes(canonical_text(raw))
        _check_rows(found, raw, config.get("doc_to_choice"))
        return found

    config["dataset_kwargs"] = {"data_files": map_files(files, one)}
    return dict(sorted(out.items()))


def _check_rows(rel: str, raw: bytes, choices: object) -> None:
    """Each JSONL row of a data file is an object holding the column `doc_to_choice`
    names, when it names one (a bare name is never a template lm-eval can use there)."""
    if not isinstance(choices, str) or not COLUMN.fullmatch(choices):
        return
    if raw.lstrip()[:1] == b"[":  # one JSON array, not JSONL: lm-eval judges it
        return
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = load_json(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise EvalError(f"{rel}:{number}", "is not a JSON object", "write one object a line")
        if choices not in row:
            raise EvalError(
                f"{rel}:{number}",
                f"the row has no column {choices!r} (the task's doc_to_choice)",
                "give every row the columns the task names",
            )


def map_files(files: Any, one: Callable[[str], str]) -> Any:
    """`data_files` (a file, a list, or splits to either) with each file mapped by `one`."""
    if isinstance(files, str):
        return one(files)
    if isinstance(files, list):
        return [one(f) for f in files]
    return {split: map_files(f, one) for split, f in files.items()}
