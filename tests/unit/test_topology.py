"""The topology record, the bucket layout, the rank shares, and how a failed run is named."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dlm_git.childproc import ended
from dlm_git.errors import UsageError
from dlm_git.lock.policy import classify
from dlm_git.topology import (
    MAX_NPROC,
    check_nproc,
    recorded_world_size,
    topology_flags,
)
from dlm_git.train.distributed import Rank, buckets, local_share, rank_seed
from dlm_git.train.launch import root_cause
from dlm_git.train.protocol import PEER_LOST


def test_one_process_records_nothing() -> None:
    assert topology_flags(1, "cpu") == {}


@pytest.mark.parametrize(("device", "backend"), [("cpu", "gloo"), ("cuda", "nccl")])
def test_ranks_record_world_backend_buckets_and_sharding(device: str, backend: str) -> None:
    record = topology_flags(3, device)["distributed"]
    assert record["world_size"] == 3 and record["backend"] == backend
    assert record["bucket_elements"] == 1 << 22 and record["sharding"] == "group-stride"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [({}, 1), ({"distributed": {"world_size": 2}}, 2), ({"distributed": {"world_size": 64}}, 64)],
)
def test_recorded_world_size(flags: dict[str, object], expected: int) -> None:
    assert recorded_world_size(flags) == expected


@pytest.mark.parametrize(
    "record",
    [[], "2", {"world_size": 1}, {"world_size": 65}, {"world_size": "2"}, {"world_size": True}],
)
def test_a_malformed_world_size_is_named(record: object) -> None:
    problem = recorded_world_size({"distributed": record})
    assert isinstance(problem, str) and "determinism_flags.distributed" in problem


@pytest.mark.parametrize("nproc", [0, -1, MAX_NPROC + 1])
def test_nproc_bounds_are_misuse(nproc: int) -> None:
    with pytest.raises(UsageError) as info:
        check_nproc(nproc)
    assert info.value.exit_code == 2


def test_a_world_size_change_is_warn_drift() -> None:
    before = {"determinism_flags": {"threads": 2, **topology_flags(2, "cpu")}}
    after = {"determinism_flags": {"threads": 2}}
    (finding,) = classify(before, after)
    assert finding.field == "determinism_flags.distributed" and finding.severity == "WARN"


@pytest.mark.parametrize(
    ("sizes", "cap", "layout"),
    [
        ([2, 2, 1], 5, [[0, 1, 2]]),
        ([3, 3, 3], 5, [[0], [1], [2]]),
        ([10, 1, 1], 4, [[0], [1, 2]]),
        ([1, 10, 1], 4, [[0], [1], [2]]),
        ([], 4, []),
    ],
)
def test_bucket_layout_is_a_function_of_sizes_and_cap(
    sizes: list[int], cap: int, layout: list[list[int]]
) -> None:
    assert buckets(sizes, cap) == layout


def test_each_rank_takes_a_stride_of_the_group() -> None:
    group = [[0], [1], [2], [3], [4]]
    assert local_share(group, Rank(0, 2, 8)) == [[0], [2], [4]]
    assert local_share(group, Rank(1, 2, 8)) == [[1], [3]]
    assert local_share(group, None) == group


def test_rank_seeds_differ_per_rank_and_are_stable() -> None:
    assert rank_seed(42, 0) != rank_seed(42, 1)
    assert rank_seed(42, 1) == rank_seed(42, 1) < 2**63


@dataclass
class Failure:
    exitcode: int
    timestamp: int
    local_rank: int = 0


def test_the_cause_is_the_rank_that_failed_on_its_own() -> None:
    """A rank that lost its peer, or that the launcher stopped, is not the cause, even
    when it was noticed first."""
    failures = {0: Failure(PEER_LOST, 1), 1: Failure(-9, 2), 2: Failure(-15, 0)}
    assert root_cause(failures)[0] == 1
    assert root_cause({0: Failure(-15, 1), 3: Failure(1, 5)})[0] == 3
    assert root_cause({0: Failure(PEER_LOST, 1)})[0] == 0


def test_how_a_rank_ended() -> None:
    assert ended(-9) == "was killed by SIGKILL"
    assert ended(3) == "exited 3"
    assert ended(-200) == "was killed by signal 200"
