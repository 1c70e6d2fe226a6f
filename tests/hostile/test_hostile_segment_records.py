"""Hostile segment records reach `verify --level segments` as a failed check in one line:
never a traceback, never a hang, whatever a committed boundary holds.

Each forgery below is made consistent up to the chain (the boundary's `tensors_sha256`,
every later `prev`, the manifest's chain root re-recorded), so nothing but the reading
and restoring of a boundary can catch it. Before, these raised ValueError (a file named
`boundary-x.json`; Python RNG state of three words) or SafetensorError (a malformed
tensors file), or stepped the schedule 10**12 times before training (a scheduler
position of 10**12).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.tensorfiles import rename_tensor, st_join, st_split
from tests.support.verified import SEGMENTS_OUT

pytestmark = pytest.mark.slow

TIMEOUT = 120.0
"""Far more than a whole segments run takes here (~15 s): a run past it hangs."""


def _rechained(forge: Any, files: dict[str, bytes]) -> None:
    """Re-record each boundary's tensors sha256 and `prev` from boundary 0's on, and the
    manifest's chain root: a chain the chain check cannot tell from training's."""
    from dlm_git.hashing import canonical_json, sha256_bytes

    stems = sorted(n.removesuffix(".json") for n in files if n.endswith(".json"))
    prev = json.loads(files[stems[0] + ".json"])["prev"]  # the genesis digest
    for stem in stems:
        meta = json.loads(files[stem + ".json"])
        meta["prev"], meta["tensors_sha256"] = prev, sha256_bytes(files[stem + ".safetensors"])
        files[stem + ".json"] = canonical_json(meta)
        prev = sha256_bytes(files[stem + ".json"])
    forge.store_out(SEGMENTS_OUT, files)
    manifest = forge.manifest()
    manifest["segments"]["chain_root"] = prev
    forge.write_manifest(manifest)


def _segments(forge: Any) -> Any:
    result = forge.verify_cli(
        "HEAD", "--level", "segments", "--sample", "4", "--seed", "0", timeout=TIMEOUT
    )
    assert result.code == 1 and result.verdict == "FAILED", result.explain()
    assert "Traceback" not in result.stderr, result.stderr
    return result


def _edit_json(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(meta: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        node = meta
        for part in parents:
            node = node[part]
        node[key] = value

    return edit


JSON_EDITS = {
    "scheduler 10**12": (_edit_json("scheduler_last_epoch", 10**12), "scheduler position"),
    "python RNG of three words": (_edit_json("rng_python.state", [1, 2, 3]), "rng_python"),
    "numpy RNG position": (_edit_json("rng_numpy.pos", 10**6), "rng_numpy"),
    "cursor as text": (_edit_json("cursor", "0"), "cursor"),
}


@pytest.mark.parametrize(("edit", "words"), list(JSON_EDITS.values()), ids=list(JSON_EDITS))
def test_a_start_record_training_does_not_write_fails_the_chain(
    forge: Any, edit: Callable[[dict[str, Any]], None], words: str
) -> None:
    files = forge.dir_files(SEGMENTS_OUT)
    meta = json.loads(files["boundary-0000000.json"])
    edit(meta)
    files["boundary-0000000.json"] = json.dumps(meta).encode()
    _rechained(forge, files)
    forge.commit("a boundary record training does not write")
    detail = _segments(forge).check("segments.chain")["detail"]
    assert detail.startswith(f"boundary 0: {words}"), detail


def test_a_listing_entry_that_names_no_boundary_fails_the_chain(forge: Any) -> None:
    files = forge.dir_files(SEGMENTS_OUT)
    forge.store_out(SEGMENTS_OUT, {**files, "boundary-x.json": b"{}"})
    forge.commit("a file that is no boundary")
    detail = _segments(forge).check("segments.chain")["detail"]
    assert detail == "segments: 'boundary-x.json' is not a boundary file", detail


def test_a_malformed_tensors_file_fails_the_chain(forge: Any) -> None:
    """One parameter's header entry deleted: its bytes belong to no tensor."""
    files = forge.dir_files(SEGMENTS_OUT)
    header, data = st_split(files["boundary-0000000.safetensors"])
    del header[next(n for n in header if n.startswith("param/"))]
    files["boundary-0000000.safetensors"] = st_join(header, data)
    _rechained(forge, files)
    forge.commit("a malformed tensors file")
    detail = _segments(forge).check("segments.chain")["detail"]
    assert detail.startswith("boundary 0: tensors file: gap in the data buffer"), detail


def test_a_boundary_the_model_could_not_have_given_is_refused_before_restore(
    forge: Any,
) -> None:
    """Boundary 1's tensors well formed, one LoRA tensor renamed to a layer the model does
    not have: segment 2, which starts from it, fails (whatever the profile), and nothing
    is trained from it."""
    files = forge.dir_files(SEGMENTS_OUT)
    files["boundary-0000001.safetensors"] = rename_tensor(files["boundary-0000001.safetensors"])
    _rechained(forge, files)
    forge.commit("a boundary of another model")
    result = _segments(forge)
    failed = [c["detail"] for c in result.checks if c["state"] == "failed"]
    refused = "segment 2 (steps 2-2): boundary 1: tensor "
    assert any(d.startswith(refused) for d in failed), result.explain()
