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
  into the dataclass (exact keys, exact JSON types, enums and literals by value, records
  (`dlm_git.validated`) by their own validation); any other shape is one `ProtocolError`
  line, never a traceback.
- A child's user error travels in its answer (its one line and exit code) and is raised
  in the parent as a `ChildError` with that line and code; a child that leaves no
  answer (a crash, a signal) is a `ChildError` naming how it ended and its last line.
  So a child's stderr (a library's warnings, a crash's traceback) is never shown: the
  parent keeps its last `STDERR_TAIL` bytes only, for that last line.
- While it runs, a child may tell its parent what a user should see (`report`): one
  ASCII JSON line per report on a pipe of its own (`python -m MODULE DIR FD`, the pipe's
  write end), read as it comes, decoded like an answer (`Listener.kind`, at most
  `MAX_REPORT_BYTES` a line) and handed to `Listener.handle` in the parent. Nothing is
  kept but the line being read, so a long training's reports cost no memory. A
  report that is not of its type stops the child (killed) and is a `ProtocolError`;
  a parent that is gone costs the child nothing but its reports (`report` is False).
- The child is this interpreter and this dlm-git (`sys.executable -P -m dlm_git...`):
  nothing read from a commit chooses what runs. `-P`: the working directory (often a
  work tree, every byte of it the commit's) is not put on the child's import path, so
  a `dlm_git/` directory there is never imported in place of this dlm-git.
- Imports nothing heavy (no torch or dvc; a record's schema module only when one is
  decoded): a hook's child may use it too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
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
MAX_REPORT_BYTES = 1 << 24
"""The longest report line a parent reads (a longer one is a `ProtocolError`): room for
any line a training says (a lock WARN quotes the lock's values)."""
READ_CHUNK = 1 << 16
STDERR_TAIL = 1 << 16
"""The bytes of a child's stderr a parent keeps (the end: its last line is said)."""


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
    records (`dlm_git.validated`) as their JSON dump."""
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
        obj = load_json(data, finite=True, text_only=False)  # paths keep undecodable bytes
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
    from dlm_git.validated import ValidationError

    try:
        return kind.model_validate(_is(dict, value, where))
    except ValidationError as exc:
        first = exc.problems[0]
        key = ".".join(str(p) for p in first.loc)
        raise ProtocolError(f"{where}.{key}", first.message) from None


def _decode_scalar(kind: Any, value: Any, where: str) -> Any:
    if kind is Path:
        return Path(_is(str, value, where))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer of 309 digits or more
            raise ProtocolError(where, "is a number too large for a float") from None
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


@dataclass(frozen=True)
class Listener:
    """What a parent does with its child's reports: decode each as a `kind` (a dataclass
    or a union of them), then `handle` it."""

    kind: Any
    handle: Callable[[Any], None]


def call_child(
    module: str,
    request: object,
    answer: type[T],
    *,
    env: Mapping[str, str],
    what: str,
    listen: Listener | None = None,
) -> T:
    """Run `python -m module DIR` with `request` in DIR; its answer as an `answer`.
    `what` names the child in errors ("the training child"); `listen` hears its reports
    while it runs (none are sent without it)."""
    with tempfile.TemporaryDirectory(prefix="dlm-git-child-") as tmp:
        work = Path(tmp)
        write_document(work / REQUEST, request)
        returncode, tail = _run_child(
            [sys.executable, "-P", "-m", module, str(work)], env, listen, what
        )
        if not (work / ANSWER).exists():
            raise _no_answer(what, returncode, tail)
        got = read_document(work / ANSWER, Answer, f"{what}'s answer")
    if got.error is not None:
        raise ChildError(got.error.line, got.error.exit_code or 1)
    result: T = decode(answer, got.result, f"{what}'s answer.result")
    return result


def _run_child(
    args: list[str], env: Mapping[str, str], listen: Listener | None, what: str
) -> tuple[int, bytes]:
    """Run `args` (with a report pipe's write end as its last argument when `listen`)
    to its end; its exit code and the end of its stderr. Any failure here kills it."""
    read_end, write_end = os.pipe() if listen is not None else (-1, -1)
    try:
        proc = subprocess.Popen(
            [*args, str(write_end)] if listen is not None else args,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(write_end,) if listen is not None else (),
        )
    except BaseException:
        _close(read_end)
        raise
    finally:
        _close(write_end)  # the child holds it now: end of file when it ends
    tail = _Tail(proc.stderr)
    try:
        if listen is not None:
            _hear(read_end, listen, what)
        returncode = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        _close(read_end)
        tail.join()
    return returncode, tail.data


def _close(fd: int) -> None:
    if fd >= 0:
        os.close(fd)


class _Tail(threading.Thread):
    """Reads a child's stderr to its end, keeping the last `STDERR_TAIL` bytes."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream, self.data = stream, b""
        self.start()

    def run(self) -> None:
        with self.stream:
            while chunk := self.stream.read1(STDERR_TAIL):
                self.data = (self.data + chunk)[-STDERR_TAIL:]


def _hear(fd: int, listen: Listener, what: str) -> None:
    """Each report line on `fd`, decoded and handled as it comes, until end of file."""
    parts: list[bytes] = []  # the line being read, at most MAX_REPORT_BYTES
    size = 0
    while chunk := os.read(fd, READ_CHUNK):
        *lines, rest = chunk.split(b"\n")
        if lines:
            lines[0], parts, size = b"".join([*parts, lines[0]]), [], 0
        for line in lines:
            listen.handle(parse_document(line, listen.kind, f"{what}'s report"))
        parts.append(rest)
        size += len(rest)
        if size > MAX_REPORT_BYTES:
            raise ProtocolError(f"{what}'s report", f"is longer than {MAX_REPORT_BYTES} bytes")
    if size:
        raise ProtocolError(f"{what}'s report", "ends without a newline")


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


class _Reports:
    """This child's report pipe to its parent (`serve` opens it; `report` writes it)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.lock = fd, threading.Lock()

    def send(self, value: object) -> bool:
        text = json.dumps(encode(value), sort_keys=True, ensure_ascii=True, allow_nan=False)
        data = text.encode("ascii") + b"\n"
        with self.lock:
            if self.fd < 0:
                return False
            try:
                while data:
                    data = data[os.write(self.fd, data) :]
            except OSError:  # the parent is gone (EPIPE): the run goes on, unheard
                self.fd = -1
                return False
        return True


_REPORTS: _Reports | None = None


def reporting() -> bool:
    """True in a child whose parent listens to its reports."""
    return _REPORTS is not None


def report(value: object) -> bool:
    """Tell this child's parent `value` (one report line); False when none listens."""
    return _REPORTS is not None and _REPORTS.send(value)


def serve(argv: list[str], request: type[R], handle: Callable[[R], object], what: str) -> int:
    """A child's side: read the request in `argv[0]`, answer it there (reports, if its
    parent listens, on the pipe `argv[1]`); the exit code."""
    global _REPORTS
    if len(argv) not in (1, 2) or (len(argv) == 2 and not argv[1].isdigit()):
        sys.stderr.write(f"usage: python -m {what} DIR [FD] (dlm-git starts this itself)\n")
        return 2
    work = Path(argv[0])
    if len(argv) == 2:
        _REPORTS = _Reports(int(argv[1]))
    try:
        got = Answer(handle(read_document(work / REQUEST, request, f"{what}'s request")), None)
    except DlmGitError as exc:
        got = Answer(None, Failure(exc.one_line(), exc.exit_code))
    except OSError as exc:  # the machine refused (disk full, permissions, a file gone)
        failure = EnvironmentFailure.from_os_error(exc)
        got = Answer(None, Failure(failure.one_line(), failure.exit_code))
    write_document(work / ANSWER, got)
    return got.error.exit_code if got.error is not None else 0
