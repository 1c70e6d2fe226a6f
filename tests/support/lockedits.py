"""A trained document's `dlm.lock` rewritten as if it had been recorded elsewhere (another
base, other library versions, another machine), and the outcome `train` must then give:
one line on stderr, and on refusal every output of the document untouched.

A `Drift` edits the lock's JSON in place; `drift` applies edits and writes the lock back
canonically, as a dlm-git would have written it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlm_git.hashing import canonical_json
from tests.support.files import snapshot

Drift = Callable[[dict[str, Any]], None]


def read_lock_json(doc_dir: Path) -> dict[str, Any]:
    return json.loads((doc_dir / "dlm.lock").read_bytes())


def write_lock_json(doc_dir: Path, obj: dict[str, Any]) -> bytes:
    data = canonical_json(obj)
    (doc_dir / "dlm.lock").write_bytes(data)
    return data


def drift(doc_dir: Path, *edits: Drift) -> bytes:
    """Apply `edits` to the lock's JSON, write it back canonically, return the bytes."""
    obj = read_lock_json(doc_dir)
    for edit in edits:
        edit(obj)
    return write_lock_json(doc_dir, obj)


def set_field(path: str, value: Any) -> Drift:
    """An edit setting the lock's field `path` (dotted: `pinned_versions.torch`)."""

    def edit(obj: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        target = obj
        for p in parents:
            target = target[p]
        assert leaf in target or parents, f"lock has no field {path}"
        target[leaf] = value

    return edit


def torch_version(obj: dict[str, Any]) -> str:
    return obj["pinned_versions"]["torch"]


def torch_major_drift(obj: dict[str, Any]) -> None:
    major = int(torch_version(obj).split(".")[0])
    obj["pinned_versions"]["torch"] = f"{major - 1}.13.0"


def torch_minor_drift(obj: dict[str, Any]) -> None:
    major = torch_version(obj).split(".")[0]
    obj["pinned_versions"]["torch"] = f"{major}.999.0"


def torch_local_drift(obj: dict[str, Any]) -> None:
    public = torch_version(obj).split("+")[0]
    obj["pinned_versions"]["torch"] = public + "+cu130"


def assert_untouched(doc_dir: Path, before: dict[str, bytes]) -> None:
    """Every file in the document directory is byte-identical; nothing new appeared."""
    after = snapshot(doc_dir)
    assert sorted(after) == sorted(before)
    for name in before:
        assert after[name] == before[name], f"{name} changed after a failed run"
    # a killed or refused run's staging directories (the training's .gitignore, written
    # before it trained, is compared with the files above)
    leftovers = [p.name for p in doc_dir.iterdir() if p.name.startswith(".")]
    assert leftovers in ([], [".gitignore"]), leftovers
