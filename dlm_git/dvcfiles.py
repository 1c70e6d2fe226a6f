"""Read what DVC records, without importing DVC (the git hooks use this).

Invariants:
- `dvc.lock` is read with `yaml.safe_load`; a stage's out is matched by its exact path
  relative to the repository root.
- Directory outs are recorded as `<md5>.dir`; the listing (relpath + md5 per file) is the
  JSON object stored in the DVC cache at `.dvc/cache/files/md5/<2>/<30>.dir` (DVC 3).
- File md5s are plain md5 of the bytes (DVC 3 does no line-ending normalisation).
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=8)
def _stage_index(data: bytes) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]] | None:
    """dvc.lock's stages as YAML text, one `name:\n  body` block each, in file order, and
    for every `path:` value the blocks naming it, when the file has the layout DVC writes
    (`stages:` at column 0, each stage name alone on a line at column 2, its body deeper);
    None for any other layout."""
    lines = data.decode("utf-8").split("\n")
    try:
        start = lines.index("stages:")
    except ValueError:
        return None
    blocks: list[list[str]] = []
    naming: dict[str, list[int]] = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("#"):
            continue
        if not line.startswith(" "):  # a later top-level key
            break
        if not line.startswith("   "):
            if not line.rstrip().endswith(":") or line.lstrip().startswith(("-", "#")):
                return None
            blocks.append([line[2:]])
            continue
        if not blocks:
            return None
        blocks[-1].append(line[2:])
        key = line.lstrip(" -")
        if key.startswith("path: "):
            naming.setdefault(key[6:].rstrip(), []).append(len(blocks) - 1)
    texts = tuple("\n".join(b) + "\n" for b in blocks)
    return texts, {k: tuple(dict.fromkeys(v)) for k, v in naming.items()}


def stages_naming(data: bytes, path: str) -> tuple[str, ...]:
    """The text of every dvc.lock stage with a `path: <path>` entry, in file order (empty
    when there is none, or the file is not laid out the way DVC writes it)."""
    index = _stage_index(data)
    if index is None:
        return ()
    texts, naming = index
    return tuple(texts[i] for i in naming.get(path, ()))


@functools.lru_cache(maxsize=256)
def _parse_stage(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)


def find_out_in(data: bytes, path: str) -> DvcOut | None:
    """`find_out(parse_dvc_lock(data), path)`, parsing only the stages that name `path`
    when the file has DVC's layout: a dvc.lock of many documents is thousands of lines,
    and building all of it in Python would dominate the pre-commit hook's time. Falls
    back to parsing everything whenever the quick look finds nothing."""
    for text in stages_naming(data, path):
        stage = _parse_stage(text)
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
        return {str(e["relpath"]): str(e["md5"]) for e in entries}
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent or not a DVC directory listing: treated as not cached


def dir_md5(listing: dict[str, str]) -> str:
    """The md5 DVC names a directory out by (`<md5>.dir`): the md5 of its listing as DVC
    serialises it (entries sorted by relpath, keys sorted, JSON's default separators)."""
    entries = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(listing.items())]
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def md5_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "md5").hexdigest()
