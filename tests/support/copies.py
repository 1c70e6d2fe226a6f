"""Copies of a trained document in one repository: a commit of many documents without
training each one (`tests/integration/test_verify_many.py`, `benchmarks/verify_many.py`).

A copy is a directory of its own holding the source document's git-tracked files (its
`.dlm` renamed `<copy>.dlm`, records, sources), listed in params.yaml's `documents:`,
with every dvc.lock stage of the source recorded once more under the copy's paths. The
recorded md5s stay the same: DVC's cache is content-addressed, so the copies share the
source's cache objects, as identical trainings would. Each copy is judged on its own
records; nothing here is committed.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

DVC_OUTS = ("adapter", "tokens", "segments")
"""A document's directory outs: in the DVC cache, never copied as files."""


def copy_document(repo: Path, src: str, names: Sequence[str]) -> None:
    """Copy document directory `src` of `repo` to each of `names` (see the module)."""
    for name in names:
        dest = repo / name
        shutil.copytree(repo / src, dest, ignore=shutil.ignore_patterns(*DVC_OUTS))
        for dlm in dest.glob("*.dlm"):
            dlm.rename(dest / f"{name}.dlm")
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
            stages[key.removesuffix(src) + name] = _renamed(body, src, name)
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
