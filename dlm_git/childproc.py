"""The one protocol between dlm-git and the child interpreters it starts.

Invariants:
- A parent and its child exchange typed dataclasses, never a command's output: the
  request and the answer are each one JSON document (ASCII, sorted keys) in a private
  directory the parent makes and names to the child (`python -m MODULE DIR`: the child
  reads `DIR/request.json` and writes `DIR/answer.json`, atomically, last). The CLI's
  `--json` output is for users; no parent reads it. The pairs and their types are
  `dlm_git.train.protocol`'s and verify's (the segment replay, `dlm_git.verify.segments`;
  the pre-push hook's remote query, `dlm_git.verify.remote`).
- Whatever a process reads back is hostile bytes: a bounded regular-file read,
  `safeparse.load_json` (bounded nesting, finite numbers), then `decode`, field by field
  into the dataclass (exact keys, exact JSON types, enums and literals by value, pydantic
  models by their own validation); any other shape is one `ProtocolError` line, never a
  traceback.
- A child's user error travels in its answer (its one line and exit code) and is raised
  in the parent as a `ChildError` with that line and code; a child that leaves no
  answer (a crash, a signal) is a `ChildError` naming how it ended and its last line.
- The child is this interpreter and this dlm-git (`sys.executable -P -m dlm_git...`):
  nothing read from a commit chooses what runs. `-P`: the working directory (often a
  work tree, every byte of it the commit's) is not put on the child's import path, so
  a `dlm_git/` directory there is never imported in place of this dlm-git.
- Imports nothing heavy (no pydantic, torch or dvc until a model is decoded): a hook's
  child may use it too.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePath
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from dlm_git.errors import DlmGitError, EnvironmentFailure
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, atomic_write_bytes, read_regular
from dlm_git.safeparse import load_json

T = TypeVar("T")
R = TypeVar("R")

REQUEST = "request.json"
ANSWER = "answer.json"


class ProtocolError(DlmGitError):
    """A document between dlm-git and a child of its is not of its type."""


class ChildError(DlmGitError):
    """A child failed; its one-line error is the message, its exit code this one's."""

    def __init__(self, line: str, exit_code: int) -> None:
        super().__init__("", line)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- the wire


def encode(value: Any) -> Any:
    """`value` as JSON values: dataclasses by field, enums by value, paths as text,
    pydantic models as their JSON dump."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def dump(value: Any) -> bytes:
    """One protocol document: ASCII JSON (a path's undecodable bytes survive as escapes)."""
    text = json.dumps(encode(value), sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False)
    return text.encode("ascii") + b"\n"


def write_document(path: Path, value: Any) -> None:
    atomic_write_bytes(path, dump(value), sync_dir=False)


def read_document(path: Path, kind: type[T], what: str) -> T:
    """The document at `path` as a `kind` (`ProtocolError` when it is not one)."""
    try:
        data = read_regular(path, MAX_RECORD_BYTES, follow_symlinks=False)
    except (OSError, NotRegularFile) as exc:
        why = exc.message if isinstance(exc, NotRegularFile) else exc.strerror or str(exc)
        raise ProtocolError(what, f"cannot be read ({why})") from None
    return parse_document(data, kind, what)


def parse_document(data: bytes, kind: type[T], what: str) -> T:
    try:
        obj = load_json(data, finite=True)
    except ValueError as exc:  # UnicodeDecodeError and nesting too deep included
        raise ProtocolError(what, f"is not JSON ({exc})") from None
    decoded: T = decode(kind, obj, what)
    return decoded


def decode(kind: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) checked and converted into `kind`."""
    origin = get_origin(kind)
    if kind is Any:
        return value
    if origin in (Union, types.UnionType):
        return _decode_union(get_args(kind), value, where)
    if origin is Literal:
        if not any(type(value) is type(a) and value == a for a in get_args(kind)):
            raise _wrong(where, f"one of {list(get_args(kind))}", value)
        return value
    if origin is list:
        (item,) = get_args(kind)
        return [decode(item, v, f"{where}[{i}]") for i, v in enumerate(_is(list, value, where))]
    if origin is dict:
        _, item = get_args(kind)
        return {k: decode(item, v, f"{where}.{k}") for k, v in _is(dict, value, where).items()}
    if dataclasses.is_dataclass(kind):
        return _decode_dataclass(kind, value, where)
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except (ValueError, TypeError):
            raise _wrong(where, f"one of {[m.value for m in kind]}", value) from None
    if hasattr(kind, "model_validate"):
        return _decode_model(kind, value, where)
    return _decode_scalar(kind, value, where)


def _decode_union(arms: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in arms:
        return None
    problems = []
    for arm in (a for a in arms if a is not type(None)):
        try:
            return decode(arm, value, where)
        except ProtocolError as exc:
            problems.append(exc.message)
    raise ProtocolError(where, "; ".join(problems) or f"is {_kind_of(value)}, not null")


def _decode_dataclass(kind: Any, value: Any, where: str) -> Any:
    obj = _is(dict, value, where)
    hints = get_type_hints(kind)
    names = [f.name for f in dataclasses.fields(kind) if f.init]
    extra, missing = sorted(set(obj) - set(names)), [n for n in names if n not in obj]
    if extra or missing:
        parts = [f"unknown key '{extra[0]}'"] if extra else []
        parts += [f"missing key '{missing[0]}'"] if missing else []
        raise ProtocolError(where, ", ".join(parts))
    return kind(**{n: decode(hints[n], obj[n], f"{where}.{n}") for n in names})


def _decode_model(kind: Any, value: Any, where: str) -> Any:
    from pydantic import ValidationError

    try:
        return kind.model_validate(_is(dict, value, where))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ProtocolError(f"{where}.{key}", str(first["msg"])) from None


def _decode_scalar(kind: Any, value: Any, where: str) -> Any:
    if kind is Path:
        return Path(_is(str, value, where))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in (str, int, float, bool):
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if ok:
            return value
        raise _wrong(where, kind.__name__, value)
    if kind is type(None):
        if value is None:
            return None
        raise _wrong(where, "null", value)
    raise TypeError(f"{kind!r} has no wire form")  # a dlm-git bug, not hostile input


def _is(kind: type[T], value: Any, where: str) -> T:
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    raise _wrong(where, _kind_of(kind()), value)


def _wrong(where: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(where, f"is {_kind_of(value)}, not {expected}")


def _kind_of(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names |= {list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------- a child


@dataclass(frozen=True)
class Failure:
    """A child's user error: its one line and exit code."""

    line: str
    exit_code: int


@dataclass(frozen=True)
class Answer:
    """What a child leaves: its result (decoded into the pair's type) or its failure."""

    result: Any
    error: Failure | None


def call_child(
    module: str,
    request: object,
    answer: type[T],
    *,
    env: Mapping[str, str],
    what: str,
) -> T:
    """Run `python -m module DIR` with `request` in DIR; its answer as an `answer`.
    `what` names the child in errors ("the training child")."""
    with tempfile.TemporaryDirectory(prefix="dlm-git-child-") as tmp:
        work = Path(tmp)
        write_document(work / REQUEST, request)
        proc = subprocess.run(
            [sys.executable, "-P", "-m", module, str(work)],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        if not (work / ANSWER).exists():
            raise _no_answer(what, proc.returncode, proc.stderr)
        got = read_document(work / ANSWER, Answer, f"{what}'s answer")
    if got.error is not None:
        raise ChildError(got.error.line, got.error.exit_code or 1)
    result: T = decode(answer, got.result, f"{what}'s answer.result")
    return result


def _no_answer(what: str, returncode: int, stderr: bytes) -> ChildError:
    lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    last = f": {lines[-1][:300]}" if lines else ""
    code = 128 - returncode if returncode < 0 else returncode or 1
    return ChildError(f"{what} {ended(returncode)} without an answer{last}", code)


def ended(exitcode: int) -> str:
    """How a process ended: `exited N` or `was killed by SIGNAME`."""
    if exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}"
    return f"exited {exitcode}"


def serve(argv: list[str], request: type[R], handle: Callable[[R], object], what: str) -> int:
    """A child's side: read the request in `argv[0]`, answer it there; the exit code."""
    if len(argv) != 1:
        sys.stderr.write(f"usage: python -m {what} DIR (dlm-git starts this itself)\n")
        return 2
    work = Path(argv[0])
    try:
        got = Answer(handle(read_document(work / REQUEST, request, f"{what}'s request")), None)
    except DlmGitError as exc:
        got = Answer(None, Failure(exc.one_line(), exc.exit_code))
    except OSError as exc:  # the machine refused (disk full, permissions, a file gone)
        failure = EnvironmentFailure.from_os_error(exc)
        got = Answer(None, Failure(failure.one_line(), failure.exit_code))
    write_document(work / ANSWER, got)
    return got.error.exit_code if got.error is not None else 0
