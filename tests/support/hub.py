"""A throwaway Hugging Face cache in which a random build stands in for a registry key.

A registry key resolves to its pinned revision only (`dlm_git/base/registry.py`), so a
test that trains a document naming the key offline needs the key's snapshot: `stand_in`
gives the build that `refs/main` names (`dlm-git base build NAME --hf-cache HUB
--repo-id <the key's repo>`) a second name, `snapshots/<pin>/`, of the same relative
links to the same blobs. Only ever in a temporary cache: it is not the real model.
"""

from __future__ import annotations

import os
from pathlib import Path

from dlm_git.base.registry import REGISTRY


def repo_dir(hub: Path, repo_id: str) -> Path:
    return hub / ("models--" + repo_id.replace("/", "--"))


def stand_in(hub: Path, key: str) -> str:
    """Let `hub`'s build of the key's repository answer to the key's pin; the pin."""
    entry = REGISTRY[key]
    assert entry.revision is not None, f"{key} has no pinned revision"
    repo = repo_dir(hub, entry.repo_id)
    built = repo / "snapshots" / (repo / "refs" / "main").read_text("ascii").strip()
    pinned = repo / "snapshots" / entry.revision
    pinned.mkdir(exist_ok=True)
    for link in sorted(built.iterdir()):
        if not (pinned / link.name).is_symlink():
            os.symlink(os.readlink(link), pinned / link.name)
    return entry.revision
