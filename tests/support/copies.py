"""Copies of a trained document in one repository: a commit of many documents without
training each one (`tests/integration/test_verify_many.py`, `benchmarks/verify_many.py`).

A copy is a directory of its own holding the source document's git-tracked files (its
`.dlm` renamed `<copy>.dlm`, records, sources), listed in params.yaml's `documents:`,
with every dvc.lock stage of the source recorded once more under the copy's paths. The
recorded md5s of the outs in the DVC cache stay the same: DVC's cache is
content-addressed, so the copies share the source's cache objects, as identical trainings
would. Each copy is a document of its own: a fresh `dlm_id` (the `docset.dlm_id` check
refuses two documents naming one), with `dlm_sha256` and `lock_sha256` re-bound in its
records and the records' md5s in its dvc.lock stages, as a training of that text records
them (its `eval.json` names its own manifest). Each copy is judged on its own records;
nothing here is committed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from dlm_git.doc.ulid import new_ulid
from dlm_git.hashing import canonical_json, sha256_bytes

DVC_OUTS = ("adapter", "tokens", "segments")
"""A document's directory outs: in the DVC cache, never copied as files."""


def copy_document(repo: Path, src: str, names: Sequence[str]) -> None:
    """Copy document directory `src` of `repo` to each of `names` (see the module)."""
    for name in names:
        dest = repo / name
        shutil.copytree(repo / src, dest, ignore=shutil.ignore_patterns(*DVC_OUTS))
        for dlm in dest.glob("*.dlm"):
            dlm.rename(dest / f"{name}.dlm")
        _own_identity(dest, name)
    params_path = repo / "params.yaml"
    params = yaml.safe_load(params_path.read_text("utf-8")) or {}
    params["documents"] = [*(params.get("documents") or [src]), *names]
    params_path.write_text(yaml.safe_dump(params, sort_keys=False), "utf-8")
    lock_path = repo / "dvc.lock"
    lock = yaml.safe_load(lock_path.read_text("utf-8"))
    stages = lock["stages"]
    sources = {key: body for key, body in stages.items() if key.endswith(f"@{src}")}
    for name in names:
        for key, body in sources.items():
            stages[key.removesuffix(src) + name] = _rehashed(repo, _renamed(body, src, name))
    lock_path.write_text(yaml.safe_dump(lock, sort_keys=False), "utf-8")


def _renamed(body: Any, src: str, name: str) -> Any:
    """A stage body with `src`'s paths (`src/...`) and its name in `cmd` made `name`'s."""
    if isinstance(body, dict):
        return {k: _renamed(v, src, name) for k, v in body.items()}
    if isinstance(body, list):
        return [_renamed(v, src, name) for v in body]
    if isinstance(body, str) and body.startswith(f"{src}/"):
        return name + body[len(src) :]
    if isinstance(body, str) and f" {src} " in body:
        return body.replace(f" {src} ", f" {name} ")
    return body


def _own_identity(dest: Path, name: str) -> None:
    """Give copy `dest` a fresh `dlm_id` and re-bind its records to the new text."""
    dlm = dest / f"{name}.dlm"
    text, n = re.subn(rb"(?m)^dlm_id: \S+$", b"dlm_id: " + new_ulid().encode(), dlm.read_bytes())
    assert n == 1, f"{dlm} has no dlm_id line"
    dlm.write_bytes(text)
    dlm_id = re.search(rb"(?m)^dlm_id: (\S+)$", text)
    assert dlm_id is not None
    lock = json.loads((dest / "dlm.lock").read_bytes())
    lock["dlm_id"], lock["dlm_sha256"] = dlm_id.group(1).decode(), sha256_bytes(text)
    lock_bytes = canonical_json(lock)
    (dest / "dlm.lock").write_bytes(lock_bytes)
    manifest = json.loads((dest / "manifest.json").read_bytes())
    manifest["dlm_id"], manifest["dlm_sha256"] = lock["dlm_id"], lock["dlm_sha256"]
    manifest["lock_sha256"] = sha256_bytes(lock_bytes)
    manifest_bytes = canonical_json(manifest)
    (dest / "manifest.json").write_bytes(manifest_bytes)
    record = dest / "eval.json"
    if record.is_file():  # the same adapter evaluated: only the manifest it names differs
        scores = json.loads(record.read_bytes())
        scores["manifest_sha256"] = sha256_bytes(manifest_bytes)
        record.write_bytes(canonical_json(scores))


def _rehashed(repo: Path, body: Any) -> Any:
    """A stage body whose file entries (not `.dir` listings, not DVC cache outs) carry the
    md5 and size of the file now in the work tree."""
    if isinstance(body, list):
        return [_rehashed(repo, v) for v in body]
    if not isinstance(body, dict):
        return body
    body = {k: _rehashed(repo, v) for k, v in body.items()}
    path = body.get("path")
    md5 = body.get("md5")
    if isinstance(path, str) and isinstance(md5, str) and not md5.endswith(".dir"):
        file = repo / path
        if file.is_file():
            data = file.read_bytes()
            body["md5"], body["size"] = hashlib.md5(data).hexdigest(), len(data)
    return body
