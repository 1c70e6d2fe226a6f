"""Golden determinism: train a fixed fixture document and compare it with an approved SHA.

Shared by `tests/integration/test_determinism_golden.py` and
`scripts/regen-determinism-golden.py`.

Invariants:
- The fixture (document text, source file, training config) is a constant of this module:
  changing it changes `FIXTURE_DOC_SHA256` and invalidates every approved golden.
- The fixture is always trained in a fresh interpreter (`python -m dlm_git train`), so no
  state of the caller (threads, RNGs, deterministic-algorithm flags, hash seed) can leak
  into the run.
- A golden is keyed by the *determinism tuple*: everything the lock says the adapter's bits
  depend on (pinned library versions, hardware tier, determinism flags with the numerics
  profile). The tuple is read back from the `dlm.lock` the run wrote, so it is exactly
  what the training process saw. Its hash names the golden. Under the portable
  `x86-64-v3` profile the tuple is the same on every x86-64 machine with AVX2.
- `.determinism/lock.json` and the golden files are canonical JSON written atomically, and
  hold no dates, hostnames or paths outside the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json, canonical_json_sha256, sha256_bytes
from dlm_git.layout import LOCK_NAME
from tests.support.env import subprocess_env

GOLDEN_LOCK_VERSION = 1
GOLDEN_THREADS = 2
GOLDEN_LOCK_RELPATH = ".determinism/lock.json"
GOLDEN_DIR_RELPATH = "tests/golden/determinism"
TRAIN_TIMEOUT_S = 1800

FIXTURE_DOC_NAME = "golden.dlm"
FIXTURE_SOURCE_RELPATH = "src/checksum.py"
# Dropout, grad accumulation, a cosine schedule with warmup and several data windows make
# the fixture exercise the RNG, accumulation and shuffling paths, not just a forward pass.
FIXTURE_DOC = """\
---
dlm_id: 01JGD0GQ1DKM7VY3S5RX2E8W4T
dlm_version: 1
base_model: builtin:tiny
system_prompt: You answer questions about checksums in one sentence.
training:
  lora_r: 4
  lora_alpha: 8
  lora_dropout: 0.1
  sequence_len: 64
  micro_batch_size: 2
  grad_accum: 2
  learning_rate: 0.003
  max_steps: 6
  seed: 1234
  lr_scheduler: cosine
  warmup_ratio: 0.2
  precision: fp32
  sources:
    - path: src
      include: ["*.py"]
---

# Checksums

A checksum is a short digest computed from a block of data. When the data changes, even
by a single bit, the checksum changes too, so comparing two checksums tells you whether
two copies of the data are the same without comparing every byte.

Content addressing goes one step further: the digest becomes the name of the data. Two
files with the same name under content addressing hold the same bytes, always.

::instruction::
### Q
Why compare checksums instead of whole files?

### A
Because two equal digests mean equal data, and a digest is far smaller than the data.

### Q
What is content addressing?

### A
Naming data by the digest of its bytes, so the name changes whenever the bytes do.
"""
FIXTURE_SOURCE = '''\
"""A tiny checksum helper used by the golden determinism fixture."""

import hashlib


def checksum(data: bytes) -> str:
    """Hex SHA-256 of data."""
    return hashlib.sha256(data).hexdigest()


def same(a: bytes, b: bytes) -> bool:
    return checksum(a) == checksum(b)
'''
FIXTURE_DOC_SHA256 = sha256_bytes(FIXTURE_DOC.encode("utf-8"))


class GoldenError(DlmGitError):
    """The golden fixture could not be trained, or a golden file is malformed."""


@dataclass(frozen=True)
class FixtureRun:
    """What one training run of the fixture produced."""

    adapter_sha256: str
    tensor_root: str
    final_loss_hex: str
    doc_sha256: str
    base_model_sha256: str
    lock: dict[str, Any]
    """The `dlm.lock` the run wrote (parsed)."""
    determinism_tuple: dict[str, Any]
    tuple_hash: str


@dataclass(frozen=True)
class GoldenEntry:
    """One entry of `.determinism/lock.json`."""

    file: str
    adapter_sha256: str
    tensor_root: str


# --------------------------------------------------------------------------- the tuple


def determinism_tuple(
    pinned_versions: Mapping[str, str],
    hardware_tier: str,
    determinism_flags: Mapping[str, Any],
) -> dict[str, Any]:
    """The setup a golden belongs to: exactly what the lock says the bits depend on.

    Under a pinned numerics profile (`x86-64-v3`) the flags are the same on every machine
    able to run it, so one golden serves them all; under `native` they name this
    machine's CPU code path."""
    return {
        "pinned_versions": dict(pinned_versions),
        "hardware_tier": hardware_tier,
        "determinism_flags": dict(determinism_flags),
    }


def tuple_hash(det_tuple: Mapping[str, Any]) -> str:
    return canonical_json_sha256(dict(det_tuple))[:16]


def tuple_from_lock(lock: Mapping[str, Any]) -> dict[str, Any]:
    return determinism_tuple(
        lock["pinned_versions"], lock["hardware_tier"], lock["determinism_flags"]
    )


# --------------------------------------------------------------------------- the fixture


def write_fixture(repo: Path) -> Path:
    """Create a git work tree at `repo` holding the fixture; return the document's path."""
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True, text=True)
    doc = repo / FIXTURE_DOC_NAME
    doc.write_bytes(FIXTURE_DOC.encode("utf-8"))
    source = repo / FIXTURE_SOURCE_RELPATH
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(FIXTURE_SOURCE.encode("utf-8"))
    return doc


def train_env(
    hash_seed: str | None = None, outer: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for a training subprocess: the tests' isolated one
    (`tests/support/env.py`), offline, optional fixed hash seed, and `outer` variables on
    top (e.g. what another CPU's environment would hold)."""
    env = subprocess_env(**(outer or {}))
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env.pop("DLM_GIT_THREADS", None)  # --threads is always explicit
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    return env


def train_fixture_at(
    repo: Path,
    *,
    threads: int = GOLDEN_THREADS,
    device: str = "auto",
    cwd: Path | None = None,
    hash_seed: str | None = None,
    timeout: float = TRAIN_TIMEOUT_S,
    numerics: str | None = None,
    outer_env: Mapping[str, str] | None = None,
) -> FixtureRun:
    """Write the fixture into the fresh directory `repo` and train it in a new interpreter
    (under `numerics`, default: the device's default profile; `outer_env` added to its
    environment)."""
    if repo.exists() and any(repo.iterdir()):
        raise GoldenError(str(repo), "fixture directory is not empty")
    doc = write_fixture(repo)
    cmd = [
        sys.executable,
        "-m",
        "dlm_git",
        "train",
        str(doc.resolve()),
        "--json",
        "-q",
        "--threads",
        str(threads),
        "--device",
        device,
        *(["--numerics", numerics] if numerics else []),
    ]
    proc = subprocess.run(
        cmd,
        cwd=str(cwd or repo),
        env=train_env(hash_seed, outer_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise GoldenError(
            "golden fixture",
            f"`dlm_git train` exited {proc.returncode}: {proc.stderr.strip()[-2000:]}",
        )
    try:
        out = json.loads(proc.stdout)
        lock = json.loads((repo / LOCK_NAME).read_text("utf-8"))
    except (ValueError, OSError) as exc:
        raise GoldenError("golden fixture", f"unreadable training output: {exc}") from exc
    if lock.get("dlm_sha256") != FIXTURE_DOC_SHA256:
        raise GoldenError(
            "golden fixture",
            f"trained document sha256 {lock.get('dlm_sha256')} is not the fixture's "
            f"{FIXTURE_DOC_SHA256}",
        )
    det_tuple = tuple_from_lock(lock)
    return FixtureRun(
        adapter_sha256=str(out["adapter_sha256"]),
        tensor_root=str(out["tensor_root"]),
        final_loss_hex=str(out["final_loss_hex"]),
        doc_sha256=str(lock["dlm_sha256"]),
        base_model_sha256=str(lock["base_model_sha256"]),
        lock=lock,
        determinism_tuple=det_tuple,
        tuple_hash=tuple_hash(det_tuple),
    )


def train_fixture(
    *,
    threads: int = GOLDEN_THREADS,
    device: str = "auto",
    hash_seed: str | None = None,
    timeout: float = TRAIN_TIMEOUT_S,
) -> FixtureRun:
    """Train the fixture in a throwaway repository (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="dlm-golden-") as tmp:
        return train_fixture_at(
            Path(tmp) / "repo",
            threads=threads,
            device=device,
            hash_seed=hash_seed,
            timeout=timeout,
        )


# --------------------------------------------------------------------------- lock + goldens


def golden_lock_path(root: Path) -> Path:
    return root / GOLDEN_LOCK_RELPATH


def golden_file_relpath(t_hash: str) -> str:
    return f"{GOLDEN_DIR_RELPATH}/tuple-{t_hash}.json"


def load_golden_lock(root: Path) -> dict[str, GoldenEntry]:
    """The approved goldens by tuple hash ({} when `.determinism/lock.json` is absent)."""
    path = golden_lock_path(root)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        raise GoldenError(str(path), f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("version") != GOLDEN_LOCK_VERSION:
        raise GoldenError(str(path), f"expected an object with version {GOLDEN_LOCK_VERSION}")
    goldens = data.get("goldens")
    if not isinstance(goldens, dict):
        raise GoldenError(str(path), "'goldens' must be an object")
    out: dict[str, GoldenEntry] = {}
    for key, entry in goldens.items():
        if not isinstance(entry, dict) or set(entry) != {"file", "adapter_sha256", "tensor_root"}:
            raise GoldenError(
                str(path), f"golden {key!r} must have exactly file, adapter_sha256, tensor_root"
            )
        out[key] = GoldenEntry(
            file=str(entry["file"]),
            adapter_sha256=str(entry["adapter_sha256"]),
            tensor_root=str(entry["tensor_root"]),
        )
    return out


def save_golden_lock(root: Path, goldens: Mapping[str, GoldenEntry]) -> None:
    data = {
        "version": GOLDEN_LOCK_VERSION,
        "goldens": {
            key: {"file": e.file, "adapter_sha256": e.adapter_sha256, "tensor_root": e.tensor_root}
            for key, e in goldens.items()
        },
    }
    atomic_write_bytes(golden_lock_path(root), canonical_json(data))


def golden_record(run: FixtureRun) -> dict[str, Any]:
    """The content of `tests/golden/determinism/tuple-<hash>.json` for `run`."""
    return {
        "tuple_hash": run.tuple_hash,
        "tuple": run.determinism_tuple,
        "fixture_doc_sha256": run.doc_sha256,
        "base_model_sha256": run.base_model_sha256,
        "adapter_sha256": run.adapter_sha256,
        "tensor_root": run.tensor_root,
        "final_loss_hex": run.final_loss_hex,
    }


def load_golden_file(root: Path, entry: GoldenEntry) -> dict[str, Any]:
    path = root / entry.file
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise GoldenError(str(path), f"unreadable golden file: {exc}") from exc
    if not isinstance(data, dict):
        raise GoldenError(str(path), "golden file must be a JSON object")
    return data


def approve(root: Path, run: FixtureRun) -> Path:
    """Write the golden file for `run` and upsert its entry in `.determinism/lock.json`."""
    relpath = golden_file_relpath(run.tuple_hash)
    golden_path = root / relpath
    atomic_write_bytes(golden_path, canonical_json(golden_record(run)))
    goldens = load_golden_lock(root)
    goldens[run.tuple_hash] = GoldenEntry(
        file=relpath, adapter_sha256=run.adapter_sha256, tensor_root=run.tensor_root
    )
    save_golden_lock(root, goldens)
    return golden_path
