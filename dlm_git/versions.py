"""The library versions a training run records (`dlm.lock` `pinned_versions`).

Invariant: the one list of packages whose versions can change an adapter's bits; the lock
policy (lock/policy.py) judges changes to them, replay compares them (numerics.judge.expect_bits).
Reads installed package metadata only: no import of the packages themselves.
"""

from __future__ import annotations

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

RECORDED_PACKAGES = frozenset({"dlm_git", *VERSIONED_PACKAGES})
"""Every key `pinned_versions` may hold. All of them are bit-relevant: dlm-git's own code
(the loop, the data order, the save), torch (kernels), transformers (the model's
forward), peft (LoRA init, forward, save), safetensors (the adapter file's bytes),
tokenizers (token ids), numpy (the token stream and seeded RNG), accelerate (the device
hooks peft and transformers run through). A replay under other versions of any of them
expects no bits (docs/verify.md)."""


def pinned_versions() -> dict[str, str]:
    """dlm-git's version and each installed package of `VERSIONED_PACKAGES`."""
    from importlib import metadata  # not at import: the hooks read RECORDED_PACKAGES

    out = {"dlm_git": __version__}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
