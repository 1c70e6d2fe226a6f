"""Golden determinism: the same input trains to the same adapter SHA.

The fixture document of `tests.support.golden` is trained in fresh interpreters (different
`PYTHONHASHSEED`, working directory and repository path); the adapters must be
byte-identical, and equal to the golden approved for the determinism tuple in
`.determinism/lock.json` (`scripts/regen-determinism-golden.py --approve` records it).
The fixture trains under the default profile, `x86-64-v3` on x86-64: its tuple is the
same on every x86-64 machine with AVX2, so the golden is asserted there, and a missing
or different one fails.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dlm_git.hashing import canonical_json
from tests.support.golden import (
    FIXTURE_DOC_SHA256,
    GOLDEN_THREADS,
    FixtureRun,
    golden_file_relpath,
    golden_lock_path,
    load_golden_file,
    load_golden_lock,
    train_fixture_at,
    tuple_hash,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
PORTABLE_PROFILE = "x86-64-v3"
RecordProperty = Callable[[str, object], None]


@pytest.fixture(scope="module")
def _base_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the tiny base out of ~/.cache even when no conftest set a cache."""
    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get("DLM_GIT_BASE_CACHE"):
            mp.setenv("DLM_GIT_BASE_CACHE", str(tmp_path_factory.mktemp("golden-base-cache")))
        yield


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, _base_cache: None) -> dict[str, FixtureRun]:
    """Three fresh-interpreter runs of the fixture: two alike, one with threads=1."""
    root = tmp_path_factory.mktemp("golden-runs")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return {
        # cwd is the repository itself.
        "a": train_fixture_at(root / "repo-a", threads=GOLDEN_THREADS, hash_seed="0"),
        # Other repository path, other working directory, other hash seed.
        "b": train_fixture_at(
            root / "nested" / "repo-b",
            threads=GOLDEN_THREADS,
            cwd=elsewhere,
            hash_seed="3141592653",
        ),
        "threads1": train_fixture_at(root / "repo-t1", threads=1, hash_seed="0"),
    }


@pytest.mark.slow
def test_two_fresh_runs_give_the_same_adapter(runs: dict[str, FixtureRun]) -> None:
    a, b = runs["a"], runs["b"]
    assert a.doc_sha256 == b.doc_sha256 == FIXTURE_DOC_SHA256
    assert a.tuple_hash == b.tuple_hash
    assert a.base_model_sha256 == b.base_model_sha256
    assert a.final_loss_hex == b.final_loss_hex
    assert a.adapter_sha256 == b.adapter_sha256
    assert a.tensor_root == b.tensor_root
    assert len(a.adapter_sha256) == 64 and len(a.tensor_root) == 64


@pytest.mark.slow
def test_matches_the_approved_golden_for_this_tuple(
    runs: dict[str, FixtureRun], record_property: RecordProperty
) -> None:
    run = runs["a"]
    record_property("tuple_hash", run.tuple_hash)
    record_property("adapter_sha256", run.adapter_sha256)
    entry = load_golden_lock(REPO_ROOT).get(run.tuple_hash)
    if entry is None:
        message = (
            f"no golden approved for determinism tuple {run.tuple_hash} "
            f"(adapter {run.adapter_sha256}); to record one run "
            "`python scripts/regen-determinism-golden.py --approve`"
        )
        # The portable profile has one golden for every x86-64 AVX2 machine with the
        # pinned versions: a missing one is a failure there, never a warning.
        assert run.lock["determinism_flags"].get("numerics") != PORTABLE_PROFILE, message
        print(message)
        warnings.warn(message, UserWarning, stacklevel=1)
        return
    golden = load_golden_file(REPO_ROOT, entry)
    assert golden["fixture_doc_sha256"] == FIXTURE_DOC_SHA256, (
        "the fixture changed since this golden was approved; re-approve it"
    )
    assert golden["tuple"] == run.determinism_tuple
    assert (run.adapter_sha256, run.tensor_root) == (entry.adapter_sha256, entry.tensor_root), (
        f"adapter of the golden fixture drifted on tuple {run.tuple_hash}: "
        f"got {run.adapter_sha256}, approved {entry.adapter_sha256}"
    )
    assert golden["final_loss_hex"] == run.final_loss_hex


@pytest.mark.slow
def test_thread_count_is_recorded_in_the_lock(
    runs: dict[str, FixtureRun], record_property: RecordProperty
) -> None:
    two, one = runs["a"], runs["threads1"]
    assert one.lock["determinism_flags"]["threads"] == 1
    assert two.lock["determinism_flags"]["threads"] == GOLDEN_THREADS
    assert one.determinism_tuple["determinism_flags"]["threads"] == 1
    # A different thread count is a different setup: it gets its own golden.
    assert one.tuple_hash != two.tuple_hash
    # Everything else about the lock is the same input.
    strip = {"determinism_flags"}
    assert {k: v for k, v in one.lock.items() if k not in strip} == {
        k: v for k, v in two.lock.items() if k not in strip
    }
    # Whether the adapter bits depend on the thread count is measured, not asserted.
    same = one.adapter_sha256 == two.adapter_sha256
    record_property("adapter_sha256_threads1", one.adapter_sha256)
    record_property(f"adapter_sha256_threads{GOLDEN_THREADS}", two.adapter_sha256)
    record_property("threads_change_adapter", not same)
    print(
        f"threads=1 adapter {one.adapter_sha256}\n"
        f"threads={GOLDEN_THREADS} adapter {two.adapter_sha256}\n"
        f"{'same' if same else 'different'} adapter SHA across thread counts"
    )


def test_golden_lock_entries_are_consistent() -> None:
    """Every approved golden names its file, and the file agrees with the entry."""
    goldens = load_golden_lock(REPO_ROOT)
    lock_path = golden_lock_path(REPO_ROOT)
    if lock_path.is_file():
        raw = lock_path.read_bytes()
        assert raw == canonical_json(json.loads(raw)), "lock.json is not canonical JSON"
    for key, entry in goldens.items():
        assert entry.file == golden_file_relpath(key)
        golden = load_golden_file(REPO_ROOT, entry)
        assert (REPO_ROOT / entry.file).read_bytes() == canonical_json(golden)
        assert golden["tuple_hash"] == key == tuple_hash(golden["tuple"])
        assert golden["adapter_sha256"] == entry.adapter_sha256
        assert golden["tensor_root"] == entry.tensor_root
        assert golden["fixture_doc_sha256"] == FIXTURE_DOC_SHA256, (
            f"golden {key} was approved for another fixture; re-approve it"
        )
