"""Read what DVC records, without importing DVC (the git hooks use this).

Invariants:
- `dvc.lock` is read with `yaml.safe_load`; a stage's out is matched by its exact path
  relative to the repository root.
- Directory outs are recorded as `<md5>.dir`; the listing (relpath + md5 per file) is the
  JSON object stored in the DVC cache at `.dvc/cache/files/md5/<2>/<30>.dir` (DVC 3).
- File md5s are plain md5 of the bytes (DVC 3 does no line-ending normalisation).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DVC_LOCK = "dvc.lock"
# libyaml's safe loader when available (same results as yaml.safe_load, much faster).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class DvcOut:
    stage: str
    path: str
    md5: str
    size: int | None
    nfiles: int | None

    @property
    def is_dir(self) -> bool:
        return self.md5.endswith(".dir")


def parse_dvc_lock(data: bytes) -> dict[str, Any]:
    obj = yaml.load(data.decode("utf-8"), Loader=_LOADER) or {}
    if not isinstance(obj, dict):
        raise ValueError("dvc.lock is not a mapping")
    return obj


def find_out(lock: dict[str, Any], path: str) -> DvcOut | None:
    """The recorded out at `path` (repo-relative POSIX), from any stage."""
    for stage, body in (lock.get("stages") or {}).items():
        for out in (body or {}).get("outs") or []:
            if out.get("path") == path and out.get("md5"):
                return DvcOut(stage, path, str(out["md5"]), out.get("size"), out.get("nfiles"))
    return None


def _stage_blocks(text: str) -> list[str] | None:
    """dvc.lock's stages as YAML text, one `name:\n  body` block each, in file order, when
    the file has the layout DVC writes (`stages:` at column 0, each stage name alone on a
    line at column 2, its body deeper); None for any other layout."""
    lines = text.split("\n")
    try:
        start = lines.index("stages:")
    except ValueError:
        return None
    blocks: list[list[str]] = []
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        if not line.startswith(" "):  # a later top-level key
            if line.startswith("#"):
                continue
            break
        if not line.startswith("   "):
            if not line.rstrip().endswith(":") or line.lstrip().startswith(("-", "#")):
                return None
            blocks.append([line[2:]])
        elif not blocks:
            return None
        else:
            blocks[-1].append(line[2:])
    return ["\n".join(b) + "\n" for b in blocks]


def find_out_in(data: bytes, path: str) -> DvcOut | None:
    """`find_out(parse_dvc_lock(data), path)`, parsing only the stages whose text names
    `path` when the file has DVC's layout: a dvc.lock of many documents is thousands of
    lines, and building all of it in Python would dominate the pre-commit hook's time.
    Falls back to parsing everything whenever the quick look finds nothing."""
    blocks = _stage_blocks(data.decode("utf-8"))
    needle = f"path: {path}\n"
    for block in blocks or []:
        if needle in block:
            stage = yaml.load(block, Loader=_LOADER)
            if isinstance(stage, dict):
                out = find_out({"stages": stage}, path)
                if out is not None:
                    return out
    return find_out(parse_dvc_lock(data), path)


def cache_dir(repo_root: Path) -> Path:
    """The DVC cache directory (`core`/`cache.dir` config is honoured when set locally)."""
    config = repo_root / ".dvc" / "config.local"
    for candidate in (config, repo_root / ".dvc" / "config"):
        if candidate.is_file():
            section = ""
            for line in candidate.read_text("utf-8").splitlines():
                stripped = line.strip()
                if stripped.startswith("["):
                    section = stripped.strip("[]").strip().strip("'\"")
                    continue
                key, _, value = line.partition("=")
                if section == "cache" and key.strip() == "dir" and value.strip():
                    path = Path(value.strip())
                    return path if path.is_absolute() else (candidate.parent / path).resolve()
    return repo_root / ".dvc" / "cache"


def cache_object(repo_root: Path, md5: str) -> Path:
    return cache_dir(repo_root) / "files" / "md5" / md5[:2] / md5[2:]


def dir_listing(repo_root: Path, md5: str) -> dict[str, str] | None:
    """relpath -> md5 of a directory out, from the DVC cache; None if not cached."""
    path = cache_object(repo_root, md5)
    try:
        entries = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return {str(e["relpath"]): str(e["md5"]) for e in entries}


def md5_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "md5").hexdigest()
