"""The library versions a training run records (`dlm.lock` `pinned_versions`).

Invariant: the one list of packages whose versions can change an adapter's bits; the lock
policy (lock/policy.py) judges changes to them, replay compares them (numerics.expect_bits).
Reads installed package metadata only: no import of the packages themselves.
"""

from __future__ import annotations

from importlib import metadata

from dlm_git import __version__

VERSIONED_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "safetensors",
    "tokenizers",
    "numpy",
    "accelerate",
)


def pinned_versions() -> dict[str, str]:
    """dlm-git's version and each installed package of `VERSIONED_PACKAGES`."""
    out = {"dlm_git": __version__}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
