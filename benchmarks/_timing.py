"""Timing for the benchmarks: one clock, one way to run cases in alternation, one summary.

Invariants:
- Every benchmark times with `time.perf_counter` (`timed`); a subprocess's CPU time, where
  a benchmark reports it beside, is `child_cpu`'s difference around it.
- Cases run alternating, round by round (`alternate`), so a change in the machine's load
  hits every case alike; the first `warmup` rounds fill caches (OS, bytecode, imports)
  and are not counted.
- Results are medians of what was counted (`median_of`, `medians`), reported with the
  machine's load where it matters (`load`); a target is PASS or FAIL (`verdict`).
Each benchmark keeps its own output format; this module prints nothing.
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

K = TypeVar("K")
T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """(seconds, result) of one call of `fn`."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def child_cpu() -> float:
    """Seconds of CPU (user + system) used so far by this process's finished children and
    their descendants (`RUSAGE_CHILDREN`). A child's CPU is the difference around it: on a
    shared machine, other processes' load inflates it far less than the child's wall
    time, so it tells a change of cost from a change of load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alternate(
    keys: Iterable[K], reps: int, sample: Callable[[K, int], T], *, warmup: int = 1
) -> dict[K, list[T]]:
    """`sample(key, round)` for every key in turn, `warmup + reps` rounds (numbered from 0,
    the warm-up first); per key, the samples of the last `reps` rounds, in order."""
    order = list(keys)
    samples: dict[K, list[T]] = {key: [] for key in order}
    for round_ in range(warmup + reps):
        for key in order:
            value = sample(key, round_)
            if round_ >= warmup:
                samples[key].append(value)
    return samples


def median_of(fn: Callable[[], object], reps: int) -> float:
    """The median seconds of `reps` calls of `fn` (none untimed)."""
    return statistics.median(timed(fn)[0] for _ in range(reps))


def medians(samples: Mapping[K, Sequence[float]]) -> dict[K, float]:
    return {key: statistics.median(values) for key, values in samples.items()}


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def bench_root(
    keep: Path | None, prefix: str
) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """Where a benchmark builds its repositories: `keep` (made if missing; kept and reused)
    or a temporary directory (the second item: the caller cleans it up). Sets the offline,
    no-analytics environment, and the base cache under the root, for what the benchmark runs."""
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = None
    if keep is None:
        tmp = tempfile.TemporaryDirectory(prefix=prefix)
        root = Path(tmp.name)
    else:
        root = keep.resolve()
        root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DLM_GIT_BASE_CACHE", str(root / "base-cache"))
    return root, tmp
