"""A segment chain holds a training's start and its end: a manifest recording fewer than
two boundaries names no segment to replay, and `verify --level segments` fails it in
one line (`segments.chain`), never with a traceback and never as replayed bitwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.manifest.schema import SegmentsRecord
from dlm_git.verify.segments import check_chain

GENESIS = "a" * 64


@pytest.mark.parametrize("count", [0, 1])
def test_fewer_than_two_boundaries_is_a_failed_chain(tmp_path: Path, count: int) -> None:
    blob = b"tensors"
    meta = canonical_json({"prev": GENESIS, "step": 0, "tensors_sha256": sha256_bytes(blob)})
    boundaries = [(0, meta, blob)][:count]
    root = sha256_bytes(meta) if count else GENESIS  # what the manifest would record
    record = SegmentsRecord(every=1, count=count, chain_root=root)
    digests, problem = check_chain(boundaries, GENESIS, record, tmp_path)
    assert problem is not None and "no segment" in problem, problem
