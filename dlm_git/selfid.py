"""The running verifier's identity: which dlm-git reached a verdict.

Invariants:
- `identity()` names the code that runs: dlm-git's version, `digest` (a Merkle root over
  every file of the directory Python imported `dlm_git` from) and, where known, the git
  commit that directory was checked out from, with `dirty` saying whether the files the
  digest covers differ from that commit's.
- The digest rule (`package_digest`, versioned by `RULE`): every file below the package
  directory except those in `__pycache__/` directories (what Python writes, not what it
  was given; a sourceless `*.pyc` anywhere else is code Python runs, and counts), by its
  path relative to that directory (`/`-separated, bytes as the file system gives them),
  sorted by that path; each a leaf `b"f" path NUL sha256(bytes)` of its bytes exactly as
  they are on disk, or `b"o" path NUL` for what is no readable regular file (a FIFO, a
  broken link: never read, never waited on); links are followed, as Python's import
  follows them; `merkle.merkle_root` over the leaves. Timestamps, permissions and the
  directory's own location are not in it, so the same files give the same digest on
  every machine, and one changed byte changes it. Bytes are not normalized: a checkout
  with CRLF line endings runs other bytes than the LF files git stores, and its digest
  says so. Python also runs bytecode from `__pycache__/` whose header matches its
  source's time and size: not covered (`PYTHONPYCACHEPREFIX` sends it elsewhere).
- The commit is known only for a package directory that is `dlm_git/` at the top of a git
  work tree whose HEAD holds `dlm_git/` (an editable install of a clone): git is asked
  there with the caller's repository variables dropped (`gitio.process.LOCAL_VARS`: a
  hook's `GIT_DIR` names the repository being verified, not the verifier), and a
  package installed anywhere else (a wheel in a virtual environment, even one inside a
  git work tree) has `commit` and `dirty` null.
- `dirty` is decided by content, never by `git status` (which trusts
  `--assume-unchanged`/`--skip-worktree` bits and end-of-line conversion, and writes the
  index): the files on disk are clean when they are exactly HEAD's tree `dlm_git/`'s
  covered paths (`head_blobs`) and each one's bytes have that entry's git object id
  (computed here from the bytes on disk, SHA-1 or SHA-256 as the repository names
  objects: the `commit` itself is such a name, so this trusts nothing it does not),
  and of the bytes the digest covers (each file is read once, in chunks, and hashed
  both ways as it is read: `package_contents`). A
  link (mode 120000) is a blob of the link's text, so a committed link the disk follows
  is dirty; a submodule, or what is no readable regular file on disk, is dirty. Only
  read-only git commands run there (`rev-parse`, `ls-tree`): no lock is taken, nothing
  in that repository is written.
- Never fails: an unreadable file is a leaf of its own (so is one another process holds
  a conflicting lease on: it is opened without waiting), git's refusal or absence is a
  null commit (a null `dirty` where HEAD's tree cannot be read).
- Local and per process: computed on first use (`identity` is cached), never at import,
  and written into reports and this machine's remembered verdicts only, never into a
  committed record (`dlm.lock`, manifest, `verify.json`), so a change of dlm-git's code
  makes no committed record drift.
- `from_json` reads an identity back from bytes dlm-git wrote earlier (the remembered
  verdicts) as hostile input: anything not of this shape is no identity (None).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from dlm_git import __version__
from dlm_git.fsutil import NotRegularFile, open_regular
from dlm_git.merkle import merkle_root

NAME = "dlm-git"
RULE = "dlm-git/selfid/v1"
"""The digest rule's name (module invariant); a change to the leaf encoding bumps it."""
PACKAGE = Path(os.path.dirname(os.path.abspath(__file__)))
"""The directory Python imported `dlm_git` from: the code that runs."""
_MAX_TEXT = 64
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Identity:
    """The verifier that ran: `commit` and `dirty` are None where no commit is known."""

    version: str
    digest: str
    files: int
    commit: str | None
    dirty: bool | None
    name: str = NAME

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "files": self.files,
            "commit": self.commit,
            "dirty": self.dirty,
        }

    def describe(self) -> str:
        """`dlm-git 0.1.0, digest 1a2b3c4d5e6f7a8b, commit 6397896abcde (dirty)`."""
        if self.commit is None:
            built = "commit unknown"
        else:
            state = {True: " (dirty)", False: "", None: " (dirty: unknown)"}[self.dirty]
            built = f"commit {self.commit[:12]}{state}"
        return f"{self.name} {self.version}, digest {self.digest[:16]}, {built}"


@functools.cache
def identity() -> Identity:
    """This process's verifier (computed once, on first use)."""
    return identify(PACKAGE)


class Hashed(NamedTuple):
    """One covered file, read once: the sha256 of its bytes and, in a checkout, git's
    object id of the same bytes (`blob`); both None for what is no readable regular file."""

    sha256: bytes | None
    blob: str | None


NOT_READ = Hashed(None, None)
CHUNK = 1 << 20
"""Bytes read at a time: a stray large file in the package is hashed, never held."""
Contents = dict[bytes, Hashed]
"""Each covered file by its relative path (`package_files`), hashed once, so the digest
and `dirty` judge the same bytes."""


class Head(NamedTuple):
    """HEAD of the checkout `dlm_git/` is at the top of: its commit and the object id of
    its tree `dlm_git/` (None where HEAD holds none)."""

    commit: str
    tree: str | None

    def blob_algo(self) -> str:
        """The hash git names objects with here: SHA-1 for a 40-hex commit, else SHA-256."""
        return "sha1" if len(self.commit) == 40 else "sha256"


def identify(package: Path) -> Identity:
    """The identity of the package directory `package` (named `dlm_git`)."""
    head = checkout_head(package)
    contents = package_contents(package, head)
    digest, count = package_digest(package, contents)
    commit, dirty = _state(package, head, contents)
    return Identity(__version__, digest, count, commit, dirty)


def package_digest(package: Path, contents: Contents | None = None) -> tuple[str, int]:
    """(the Merkle root of the module invariant, the number of files it covers); `contents`:
    `package_contents(package)`, read when not given."""
    read = package_contents(package) if contents is None else contents
    leaves = [_leaf(rel, read[rel]) for rel in sorted(read)]
    return merkle_root(leaves), len(leaves)


def package_contents(package: Path, head: Head | None = None) -> Contents:
    """Every covered file of `package`, hashed (module invariant: links followed, a FIFO
    or a broken link never read), with its blob id where `head` has a tree to compare."""
    algo = None if head is None or head.tree is None else head.blob_algo()
    return {rel: _hashed(package, rel, algo) for rel in package_files(package)}


def package_files(package: Path) -> list[bytes]:
    """Every covered file's relative path (`/`-separated bytes), sorted."""
    found: list[bytes] = []
    seen: set[str] = set()
    for top, dirs, names in os.walk(package, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:  # a link back up the tree: walked once
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(top, package)
        for name in names:
            path = name if rel == "." else os.path.join(rel, name)
            found.append(os.fsencode(path).replace(os.sep.encode(), b"/"))
    return sorted(found)


def _hashed(package: Path, rel: bytes, algo: str | None) -> Hashed:
    """The regular file `rel` read once, in chunks: its sha256 and (with `algo`) its blob
    id, None where the bytes read are not the size git's header named (it changed while
    read). Opened only once `stat` says it is a regular file, and then as every regular
    file is (`fsutil.open_regular`: a FIFO swapped in between is never waited on)."""
    path = os.path.join(os.fsencode(package), rel)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return NOT_READ
        with open_regular(os.fsdecode(path)) as f:
            return _hash_stream(f, os.fstat(f.fileno()).st_size, algo)
    except (OSError, NotRegularFile):
        return NOT_READ


def _hash_stream(f: io.FileIO, size: int, algo: str | None) -> Hashed:
    leaf = hashlib.sha256()
    blob = None if algo is None else hashlib.new(algo, b"blob %d\0" % size)
    total = 0
    while chunk := f.read(CHUNK):
        leaf.update(chunk)
        if blob is not None:
            blob.update(chunk)
        total += len(chunk)
    return Hashed(leaf.digest(), None if blob is None or total != size else blob.hexdigest())


def _leaf(rel: bytes, hashed: Hashed) -> bytes:
    if hashed.sha256 is None:
        return b"o" + rel + b"\0"
    return b"f" + rel + b"\0" + hashed.sha256


def checkout_head(package: Path) -> Head | None:
    """HEAD of the git work tree `package` is `dlm_git/` at the top of; None for any
    other place."""
    from dlm_git.gitio.process import is_oid, run_git

    top = package.parent
    try:
        found = run_git(
            ["rev-parse", "--show-toplevel", "HEAD", "HEAD:dlm_git"], top, elsewhere=True
        )
    except OSError:  # no git to start, or `top` cannot be entered: no commit known
        return None
    lines = found.stdout.decode("utf-8", "surrogateescape").splitlines()
    if found.returncode != 0 or len(lines) != 3 or package.name != "dlm_git":
        return None
    if os.path.realpath(lines[0]) != os.path.realpath(top) or not is_oid(lines[1]):
        return None
    return Head(lines[1], lines[2] if is_oid(lines[2]) else None)


def checkout_state(package: Path) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether the files on disk differ from HEAD's tree `dlm_git/`) of
    the git work tree `package` is `dlm_git/` at the top of; (None, None) for any other
    place."""
    head = checkout_head(package)
    return _state(package, head, None if head is None else package_contents(package, head))


def _state(
    package: Path, head: Head | None, contents: Contents | None
) -> tuple[str | None, bool | None]:
    if head is None:
        return None, None
    committed = None if head.tree is None else head_blobs(package.parent, head.tree)
    if committed is None or contents is None:
        return head.commit, None
    return head.commit, not _same_blobs(contents, committed)


def head_blobs(top: Path, tree: str) -> dict[bytes, str] | None:
    """The object id of each covered entry of the git tree `tree` (HEAD's `dlm_git/`) of
    the repository at `top`, by path; None where git cannot list it."""
    from dlm_git.gitio import GitError, tree_entries

    try:
        listed = tree_entries([], top, tree, recursive=True, check=True, elsewhere=True)
    except GitError:
        return None
    return {
        path.encode("utf-8", "surrogateescape"): oid if kind == "blob" else ""
        for _mode, kind, oid, path in listed  # a link (120000) is a blob: its text
        if _covered(path)
    }


def _same_blobs(contents: Contents, committed: dict[bytes, str]) -> bool:
    """Whether `contents` are exactly HEAD's covered paths, each with the bytes of its
    blob: git's own object id of the bytes on disk (`commit` is named by git's object
    ids, so this trusts nothing that name does not)."""
    if set(contents) != set(committed):
        return False
    return all(hashed.blob == committed[rel] for rel, hashed in contents.items())


def _covered(path: str) -> bool:
    """Whether a path of HEAD's tree is one the digest covers (none in `__pycache__/`)."""
    return "__pycache__" not in path.split("/")[:-1]


def from_json(value: object) -> Identity | None:
    """An identity written by `Identity.to_json`, or None for anything else."""
    if not isinstance(value, dict):
        return None
    name, version, digest = value.get("name"), value.get("version"), value.get("digest")
    files, commit, dirty = value.get("files"), value.get("commit"), value.get("dirty")
    if not (_text(name) and _text(version) and _hex(digest, 64)):
        return None
    if type(files) is not int or files < 0:
        return None
    if not (commit is None or _hex(commit, 40) or _hex(commit, 64)):
        return None
    if not (dirty is None or isinstance(dirty, bool)) or (commit is None and dirty is not None):
        return None
    return Identity(version, digest, files, commit, dirty, name)


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= _MAX_TEXT


def _hex(value: object, size: int) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) == size and set(value) <= _HEX
