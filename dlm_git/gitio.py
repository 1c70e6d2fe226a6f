"""Git access through git's own plumbing commands: the one place dlm-git talks to git.

Invariants:
- Plain `git` subprocesses, so `GIT_INDEX_FILE` (which git sets inside hooks for
  `git commit -a` and `git commit <path>`) and `GIT_DIR` are honoured exactly as git
  does; no library that might read a different index.
- Blobs are read in one `git cat-file --batch` process per call, by object name
  (`:path` = the index, `<rev>:path` = a commit's tree).
- Nothing here imports anything heavy: the hooks use it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from dlm_git.errors import DlmGitError


class GitError(DlmGitError):
    """A git command failed."""


def git(args: Sequence[str], cwd: Path, input: bytes | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}", msg[-1] if msg else f"exit {proc.returncode}")
    return proc.stdout


def toplevel(cwd: Path) -> Path:
    out = git(["rev-parse", "--show-toplevel"], cwd, check=False).decode().strip()
    if not out:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    return Path(out)


def toplevel_and_head(cwd: Path) -> tuple[Path, str | None]:
    """The work tree's root and HEAD's commit (None before the first commit), in one call."""
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel", "--verify", "--quiet", "HEAD^{commit}"],
        cwd=cwd,
        capture_output=True,
    )
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if not lines or not lines[0]:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    head = lines[1].strip() if proc.returncode == 0 and len(lines) > 1 else None
    return Path(lines[0]), head or None


def resolve_commit(rev: str, cwd: Path) -> str | None:
    out = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd, check=False)
    sha = out.decode().strip()
    return sha or None


_UNKNOWN = "?"


def staged_paths(cwd: Path, head: str | None = _UNKNOWN) -> list[str]:
    """Paths whose index entry differs from HEAD (all of them before the first commit).
    `head`: HEAD's commit if already resolved (None: there is no HEAD yet)."""
    if head == _UNKNOWN:
        head = resolve_commit("HEAD", cwd)
    against = head if head else _empty_tree(cwd)
    out = git(["diff-index", "--cached", "--name-only", "--no-renames", "-z", against], cwd)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def _empty_tree(cwd: Path) -> str:
    return git(["hash-object", "-t", "tree", "--stdin"], cwd, input=b"").decode().strip()


def cat_files(names: Iterable[str], cwd: Path) -> dict[str, bytes | None]:
    """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    request = "".join(n + "\n" for n in names).encode("utf-8", "surrogateescape")
    out = git(["cat-file", "--batch"], cwd, input=request)
    result: dict[str, bytes | None] = {}
    pos = 0
    for name in names:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode("utf-8", "surrogateescape")
        pos = end + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            result[name] = None
            continue
        _, kind, size_text = header.rsplit(" ", 2)
        size = int(size_text)
        result[name] = out[pos : pos + size] if kind == "blob" else None
        pos += size + 1
    return result


class BlobReader:
    """One `git cat-file --batch` process for several rounds of reads (`read(names)` like
    `cat_files`), so a reader that only learns what it needs from what it read first does
    not start a git process per round. Requests go in chunks far below a pipe's buffer,
    each chunk's answers read before the next is sent: no deadlock."""

    CHUNK = 128

    def __init__(self, cwd: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def read(self, names: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
        names = list(dict.fromkeys(names))
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        result: dict[str, bytes | None] = {}
        for i in range(0, len(names), self.CHUNK):
            chunk = names[i : i + self.CHUNK]
            try:
                stdin.write("".join(n + "\n" for n in chunk).encode("utf-8", "surrogateescape"))
                stdin.flush()
            except BrokenPipeError:
                raise GitError("git cat-file", "exited early") from None
            for name in chunk:
                line = stdout.readline()
                if not line.endswith(b"\n"):
                    raise GitError("git cat-file", "exited early")
                header = line[:-1].decode("utf-8", "surrogateescape")
                if header.endswith(" missing") or header.endswith(" ambiguous"):
                    result[name] = None
                    continue
                _, kind, size_text = header.rsplit(" ", 2)
                size = int(size_text)
                data = stdout.read(size + 1)[:size]
                result[name] = data if kind == "blob" else None
        return result

    def close(self) -> None:
        if self._proc.stdin is not None:
            # git may have exited already (e.g. not a repository): nothing left to flush
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc.wait()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ls_files(paths: Sequence[str], cwd: Path, rev: str | None = None) -> list[str]:
    """Tracked files under `paths`: in the index (rev None) or in commit `rev`."""
    if rev is None:
        out = git(["ls-files", "-z", "--", *paths], cwd)
    else:
        out = git(["ls-tree", "-r", "-z", "--name-only", rev, "--", *paths], cwd)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


SYMLINK_MODE = "120000"


def ls_index(paths: Sequence[str], cwd: Path) -> list[tuple[str, str]]:
    """(mode, path) of the index's files under `paths` (mode `120000`: a symlink)."""
    out = git(["ls-files", "-s", "-z", "--", *paths], cwd)
    entries = []
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            entries.append((meta.split(" ", 1)[0], path))
    return entries


def materialize(paths: Sequence[str], dest: Path, cwd: Path, rev: str | None = None) -> None:
    """Write the index's (or commit `rev`'s) version of `paths` under `dest`."""
    files = ls_files(paths, cwd, rev)
    if not files:
        return
    if rev is None:
        prefix = str(dest).rstrip("/") + "/"
        payload = "\0".join(files).encode("utf-8", "surrogateescape") + b"\0"
        git(["checkout-index", "-z", "--stdin", f"--prefix={prefix}"], cwd, input=payload)
        return
    blobs = cat_files([f"{rev}:{f}" for f in files], cwd)
    for f in files:
        data = blobs[f"{rev}:{f}"]
        if data is None:
            continue
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def config_get(key: str, cwd: Path) -> str | None:
    out = git(["config", "--get", key], cwd, check=False).decode().strip()
    return out or None


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
