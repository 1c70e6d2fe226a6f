"""Are a commit's adapter objects on the DVC remote? (the pre-push hook's remote check)

Invariants:
- The objects are exactly those `verify` needs from the remote: each document's
  `adapter/` `.dir` object that the commit's `dvc.lock` names (md5s checked by
  `dlm_git.dvcfiles`) and the files its listing names (read from the local cache, where
  `dvc repro` put them; without the listing, only the `.dir` object is asked for).
- The remote is the work tree's default DVC remote (`core.remote` of `.dvc/config`, or of
  `.dvc/config.local`, read here as INI: the hook itself never imports DVC). The
  existence queries (one per object, through DVC's own object database for that remote:
  no download, no upload) run in a child interpreter (`python -m dlm_git.verify.remote
  DIR`), like DVC's own hook runs `dvc push`; only when there is a remote and something
  to ask. The child is asked and answers through `dlm_git.childproc` (`RemoteQuery` →
  `RemoteState`); a child that cannot answer, or answers out of shape, is one
  `RemoteQueryError` line (the hook warns: not knowing is not "missing").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git import docat, gitio
from dlm_git.dvcfiles import (
    MAX_CONFIG_BYTES,
    DvcRecordError,
    dir_listing,
    find_out,
    parse_dvc_lock,
)
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import NotRegularFile, read_regular
from dlm_git.layout import ADAPTER_DIR

CHILD = "dlm_git.verify.remote"


@dataclass(frozen=True)
class RemoteState:
    remote: str | None
    """The default remote's name (None: none is configured)."""
    missing: dict[str, list[str]]
    """document -> md5s of its adapter objects the remote lacks."""


@dataclass(frozen=True)
class RemoteQuery:
    """What the child asks the default DVC remote of the work tree at `root`."""

    root: Path
    objects: dict[str, list[str]]
    """document -> md5s of its adapter objects (`adapter_objects`)."""


def adapter_objects(root: Path, sha: str, docs: list[str]) -> dict[str, list[str]]:
    """document -> md5s of the adapter objects commit `sha` names (malformed records are
    left to verify's `dvc.binding`)."""
    data = gitio.cat_files([f"{sha}:dvc.lock"], root).get(f"{sha}:dvc.lock")
    if data is None:
        return {}
    try:
        lock = parse_dvc_lock(data)
    except DvcRecordError:
        return {}
    out: dict[str, list[str]] = {}
    for doc in docs:
        path = docat.prefix_of(doc) + ADAPTER_DIR
        try:
            rec = find_out(lock, path)
            listing = dir_listing(root, rec.md5) if rec is not None else None
        except DvcRecordError:
            continue
        if rec is not None:
            out[doc] = [rec.md5, *dict.fromkeys((listing or {}).values())]
    return out


def default_remote(root: Path) -> str | None:
    """The default DVC remote's name from the repository's DVC config files (the local
    one overrides), without DVC."""
    import configparser

    name = None
    for path in (root / ".dvc" / "config", root / ".dvc" / "config.local"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(read_regular(path, MAX_CONFIG_BYTES).decode("utf-8"))
        except (OSError, UnicodeDecodeError, configparser.Error, NotRegularFile):
            continue
        value = parser.get("core", "remote", fallback=None)
        name = value.strip() if value and value.strip() else name
    return name


def query_remote(root: Path, objects: dict[str, list[str]]) -> RemoteState:
    """`remote_state` in a child interpreter (DVC and its remote's client stay out of the
    hook's process). `RemoteQueryError` when the child cannot answer."""
    import os

    from dlm_git.childproc import ChildError, ProtocolError, call_child

    try:
        return call_child(
            CHILD, RemoteQuery(root, objects), RemoteState, env=os.environ, what="the remote query"
        )
    except (ChildError, ProtocolError) as exc:
        raise RemoteQueryError("DVC remote", f"could not be queried: {exc.one_line()}") from None


class RemoteQueryError(DlmGitError):
    """The DVC remote could not be asked (network, credentials, a broken config)."""


def answer(query: RemoteQuery) -> RemoteState:
    """The child's side of `query_remote`."""
    return remote_state(query.root, query.objects)


def remote_state(root: Path, objects: dict[str, list[str]]) -> RemoteState:
    """Which of `objects` the default DVC remote lacks."""
    if not any(objects.values()):
        return RemoteState(None, {})
    from dvc.config import NoRemoteError
    from dvc.repo import Repo

    repo: Any = Repo(str(root))
    try:
        name = repo.config["core"].get("remote")
        if not name:
            return RemoteState(None, {})
        odb = repo.cloud.get_remote_odb(name, "push")
    except NoRemoteError:
        return RemoteState(None, {})
    missing = {}
    for doc, md5s in objects.items():
        absent = [m for m in md5s if not odb.exists(m)]
        if absent:
            missing[doc] = absent
    return RemoteState(name, missing)


if __name__ == "__main__":
    import sys

    from dlm_git.childproc import serve

    sys.exit(serve(sys.argv[1:], RemoteQuery, answer, CHILD))
