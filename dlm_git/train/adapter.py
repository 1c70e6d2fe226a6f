"""Write a trained LoRA adapter so that its bytes depend only on the training result.

Invariants:
- `adapter/` holds exactly `adapter_model.safetensors`, `adapter_config.json` and
  dlm-git's own model card `README.md` (`dlm_git.train.card`; peft's card is dropped).
- `adapter_config.json` is canonical JSON: lists that peft writes in set order
  (`target_modules`, ...) are sorted, and the base is named in the fields peft reads:
  a Hub base (`hf:` or a registry key) by its repo id in `base_model_name_or_path` and its
  40-hex `revision`; `builtin:tiny` and a local directory by null in both (nothing that
  would load from elsewhere, never an absolute path). So the config depends on the base,
  never on how the document spells it.
- Records written before this form (the spec in `base_model_name_or_path`, revision
  null, no card) are recognised by `legacy_adapter_config`, never rewritten.
- The new adapter replaces the old one by rename; a failure before that leaves the old
  adapter untouched. Every file of the new copy, and its directory, is flushed to disk
  before the rename (`install_dir`), so a record written after it never names bytes a
  crash could lose (peft's own save does not fsync).
- Staging directories are `.<out>.new.<pid>.*` / `.<out>.old.<pid>.*` beside the out:
  ignored by git (`dlm-git init`'s .gitignore lines) and, when a killed run leaves them
  behind, removed by the next train of the document (`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.fsutil import DIR_MODE, FILE_MODE, atomic_write_bytes, fsync_dir
from dlm_git.hashing import canonical_json
from dlm_git.layout import ADAPTER_CONFIG, ADAPTER_WEIGHTS
from dlm_git.safeparse import load_json

if TYPE_CHECKING:
    from peft import PeftModel

SORTED_LIST_KEYS = ("target_modules", "modules_to_save", "layers_to_transform")


@dataclass(frozen=True)
class HubBase:
    """The base as peft names it: a Hub repo id at a 40-hex revision, or neither (a base
    that is not on the Hub: `builtin:tiny`, a local directory)."""

    repo_id: str | None = None
    revision: str | None = None


def canonical_adapter_config(config: dict[str, Any], base: HubBase) -> dict[str, Any]:
    out = dict(config)
    for key in SORTED_LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = sorted(out[key])
    out["base_model_name_or_path"] = base.repo_id
    out["revision"] = base.revision
    return out


def legacy_adapter_config(config: dict[str, Any], base_spec: str) -> bytes:
    """The bytes dlm-git wrote before the Hub form, for the adapter whose current config is
    `config`: the document's base spec in `base_model_name_or_path`, revision null."""
    out = dict(config)
    out["base_model_name_or_path"] = base_spec
    if "revision" in out:
        out["revision"] = None
    return canonical_json(out)


def save_adapter(model: PeftModel, staging: Path, base: HubBase) -> None:
    """Save a peft model's adapter into `staging` in canonical form (the card is written
    by the launcher, once the weights are there: `dlm_git.train.card`)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model.save_pretrained(str(staging), safe_serialization=True)
    for path in staging.iterdir():
        if path.name not in (ADAPTER_WEIGHTS, ADAPTER_CONFIG):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    os.chmod(staging / ADAPTER_WEIGHTS, FILE_MODE)
    config = load_json((staging / ADAPTER_CONFIG).read_text("utf-8"))
    atomic_write_bytes(
        staging / ADAPTER_CONFIG, canonical_json(canonical_adapter_config(config, base))
    )


def staging_dir(dest: Path) -> Path:
    """A fresh `.<name>.new.<pid>.<random>` directory beside `dest` (the pid lets the
    next train tell a killed run's leftovers from a live run's; see `sweep_stale`)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.new.{os.getpid()}.", dir=dest.parent))


STALE_RE = re.compile(r"\.(?P<name>[^/]+)\.(?:new|old)\.(?:(?P<pid>\d+)\.)?[^/]*")


def sweep_stale(directory: Path, names: tuple[str, ...]) -> list[str]:
    """Remove `.<name>.new.*` / `.<name>.old.*` entries (for `name` in `names`) that a
    killed or crashed train left in `directory`: those of no live process (this one
    included: a train sweeps before it stages anything). Returns the names removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = STALE_RE.fullmatch(entry.name)
        if match is None or match["name"] not in names:
            continue
        pid = int(match["pid"]) if match["pid"] else None
        if pid is not None and pid != os.getpid() and _alive(pid):
            continue  # another train of this document is running: its staging, not junk
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        removed.append(entry.name)
    return sorted(removed)


def _flush(staging: Path) -> None:
    """Every regular file directly in `staging` fsynced, then `staging` itself."""
    for entry in os.scandir(staging):
        if entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_dir(staging)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def install_dir(staging: Path, dest: Path) -> None:
    """Replace `dest` with `staging` (rename dance; the old copy is removed last), its
    files and itself durable first."""
    os.chmod(staging, DIR_MODE)
    _flush(staging)
    old = None
    if dest.exists() or dest.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.{os.getpid()}.", dir=dest.parent))
        os.rmdir(old)
        os.replace(dest, old)
    os.replace(staging, dest)
    fsync_dir(dest.parent)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
