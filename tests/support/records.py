"""Records shared by unit tests, in the shape a dlm-git writes: a `dlm.lock` (built with
overrides) and a dvc.lock of several documents.

`lock_record()` is a lock as `dlm-git train` writes it on a CPU under the portable
`x86-64-v3` numerics profile (the golden fixture's setup): every field of
`dlm_git/lock/fields.py` present and valid, so a test that changes one field knows the
rest passes every reader (tests/unit/test_support_records.py holds it to that).
"""

from __future__ import annotations

import copy
from typing import Any

LOCK_RECORD: dict[str, Any] = {
    "base_model": "builtin:tiny",
    "base_model_revision": "tiny-6e2e54f2131b67ae",
    "base_model_sha256": "d6" * 32,
    "cuda_version": None,
    "determinism_class": "strong",
    "determinism_flags": {
        "cpu_capability": "AVX2",
        "deterministic_algorithms": True,
        "device": "cpu",
        "machine": "x86_64",
        "mkl_cbwr": "AVX2,STRICT",
        "numerics": "x86-64-v3",
        "onednn_max_cpu_isa": "AVX2",
        "threads": 2,
    },
    "dlm_id": "01M800GRBP0GEV3WAMXAHDD42B",
    "dlm_sha256": "79" * 32,
    "hardware_tier": "cpu",
    "license_acceptance": {"accepted": True, "license": "MIT", "requires_acceptance": False},
    "lock_version": 1,
    "pinned_versions": {
        "accelerate": "1.15.0",
        "dlm_git": "0.1.0",
        "numpy": "2.4.6",
        "peft": "0.21.2",
        "safetensors": "0.8.0",
        "tokenizers": "0.23.3",
        "torch": "2.13.0+cpu",
        "transformers": "5.23.0",
    },
    "rocm_version": None,
    "seed": 42,
    "supersedes": None,
}
"""Never modify it: `lock_record()` gives a copy."""


def lock_record(**overrides: Any) -> dict[str, Any]:
    """A fresh copy of `LOCK_RECORD` with top-level fields replaced by `overrides`."""
    out = copy.deepcopy(LOCK_RECORD)
    out.update(copy.deepcopy(overrides))
    return out


BIG_DVC_LOCK = b"""schema: '2.0'
stages:
  base:
    cmd: dlm-git base build --out bases/tiny
    outs:
    - path: bases/tiny
      hash: md5
      md5: 074602d49c8a19cc9c331f8e839634da.dir
  verify@doc:
    cmd: dlm-git verify --worktree --doc doc
    deps:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
  train@doc:
    cmd: dlm-git train doc --tiny-dir bases/tiny --quiet --lock-mode default
      --device cpu --threads 2
    deps:
    - path: bases/tiny
      md5: 074602d49c8a19cc9c331f8e839634da.dir
    outs:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
      size: 10
      nfiles: 2
    - path: doc/dlm.lock
      hash: md5
      md5: ffffffffffffffffffffffffffffffff
  train@other:
    cmd: dlm-git train other
    outs:
    - path: other/adapter
      hash: md5
      md5: 22222222222222222222222222222222.dir
"""
"""A dvc.lock of two documents (`doc`, `other`), a base stage and a verify stage."""
