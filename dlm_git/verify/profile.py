"""The recorded numerical setup of a commit's run, as a replay (full or segments) needs it.

Invariant: everything a replay takes from the lock's `determinism_flags` is validated here
first (an object, a thread count from 1 to 1024, a profile this dlm-git knows), and the
profile's own requirements are checked against this machine before anything trains: a
malformed record is FAILED, a profile this machine cannot run is CANNOT_VERIFY naming
where it can run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlm_git.contract.outcome import Check, absent, failed
from dlm_git.errors import DlmGitError
from dlm_git.numerics.flags import malformed_setting
from dlm_git.numerics.plan import MAX_THREADS
from dlm_git.numerics.probe import cannot_run, cuda_problem
from dlm_git.numerics.table import NATIVE, PROFILES, Profile
from dlm_git.topology import recorded_world_size
from dlm_git.verify.report import Verdict


class Setup:
    """The recorded numerical setup of a run, validated, that a replay re-applies, and
    where this machine keeps a local-directory base (never part of the commit)."""

    def __init__(
        self,
        profile: Profile,
        flags: Mapping[str, Any],
        threads: int,
        base_dir: Path | None = None,
        nproc: int = 1,
    ) -> None:
        self.profile, self.flags, self.threads = profile, dict(flags), threads
        self.base_dir, self.nproc = base_dir, nproc

    @property
    def device(self) -> str:
        return "cuda" if self.profile.device == "cuda" else str(self.flags.get("device") or "cpu")

    def describe(self) -> str:
        ranks = f", {self.nproc} ranks" if self.nproc > 1 else ""
        return f"profile {self.profile.name}, threads {self.threads}{ranks}: runs here"


def recorded_setup(
    lock: Mapping[str, Any], root: Path, doc_rel: str
) -> Setup | tuple[Check, Verdict]:
    """The lock's profile and threads, or the failed `replay.profile` check with its
    verdict: FAILED when the lock is malformed, CANNOT_VERIFY when this machine (or this
    dlm-git) cannot run the profile."""
    flags = lock.get("determinism_flags")
    if not isinstance(flags, dict):
        bad = "dlm.lock: determinism_flags is not an object"
        return failed("replay.profile", bad), Verdict.FAILED
    threads = flags.get("threads")
    if type(threads) is not int or not 1 <= threads <= MAX_THREADS:
        bad = (
            f"dlm.lock: determinism_flags.threads {threads!r} is not a count"
            f" from 1 to {MAX_THREADS}"
        )
        return failed("replay.profile", bad), Verdict.FAILED
    nproc = recorded_world_size(flags)
    if isinstance(nproc, str):
        return failed("replay.profile", f"dlm.lock: {nproc}"), Verdict.FAILED
    if not _plain_json(flags):  # a replay hands the flags on (to ranks, to a child)
        bad = "dlm.lock: determinism_flags holds a value JSON cannot carry (NaN, Infinity)"
        return failed("replay.profile", bad), Verdict.FAILED
    bad_setting = malformed_setting(flags)
    if bad_setting is not None:  # would go into the replay's environment
        return failed("replay.profile", f"dlm.lock: {bad_setting}"), Verdict.FAILED
    name = flags.get("numerics", NATIVE)  # recorded before profiles: its own CPU path
    profile = PROFILES.get(name) if isinstance(name, str) else None
    if profile is None:
        why = (
            f"cannot replay: unknown numerics profile {name!r} (this dlm-git knows"
            f" {', '.join(PROFILES)}; upgrade dlm-git)"
        )
        return absent("replay.profile", why), Verdict.CANNOT_VERIFY
    problem = cannot_run(profile)
    if problem is None and profile.device == "cuda":
        problem = cuda_problem()
    if problem is not None:
        why = (
            f"cannot replay profile {profile.name} here: {problem}"
            f" (replay {where_it_runs(profile, flags)})"
        )
        return absent("replay.profile", why), Verdict.CANNOT_VERIFY
    moved = registry_pin_moved(lock)
    if moved is not None:
        return absent("replay.profile", moved), Verdict.CANNOT_VERIFY
    base_dir = local_base_dir(root, doc_rel, lock.get("base_model"))
    return Setup(profile, flags, threads, base_dir, nproc)


def registry_pin_moved(lock: Mapping[str, Any]) -> str | None:
    """Why a replay cannot retrain on the recorded base: the lock names a registry key at
    a revision other than the key's pin (a record an older dlm-git made from the cache's
    `refs/main`), and a replay resolves the key to its pin, another snapshot. None when
    the replay trains on the recorded base."""
    from dlm_git.base.registry import REGISTRY
    from dlm_git.base.spec import REV_RE

    key, revision = lock.get("base_model"), lock.get("base_model_revision")
    entry = REGISTRY.get(key) if isinstance(key, str) else None
    if entry is None or entry.revision is None or revision == entry.revision:
        return None
    named = revision if isinstance(revision, str) and REV_RE.fullmatch(revision) else "another"
    return (
        f"cannot replay: dlm.lock records {key} at revision {named}, not its pinned "
        f"{entry.revision} (recorded before registry keys were pinned); a replay trains "
        "on the pinned snapshot, another base (the hash level checks the recorded one)"
    )


def _plain_json(value: object) -> bool:
    from dlm_git.hashing import canonical_json

    try:
        canonical_json(value)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


def local_base_dir(root: Path, doc_rel: str, spec: object) -> Path | None:
    """A local-directory base where the hash level finds it: beside the real work tree
    (its identity is checked against the manifest there and recorded by the replay)."""
    from dlm_git.base.spec import parse_base_spec
    from dlm_git.verify.locate import locate_base_dir

    if not isinstance(spec, str):
        return None
    try:
        kind = parse_base_spec(spec).kind
    except DlmGitError:
        return None
    if kind != "local":
        return None
    return locate_base_dir(spec, root / doc_rel, root, None, build=False)


def where_it_runs(profile: Profile, flags: Mapping[str, Any]) -> str:
    if profile.device == "cuda":
        return (
            f"on a {flags.get('gpu_name')} (sm {flags.get('gpu_capability')}) with CUDA"
            f" {flags.get('cuda_version')} and a CUDA build of torch"
        )
    if profile.name == NATIVE:
        return (
            f"on a {flags.get('machine')} CPU like the trainer's ({flags.get('cpu_vendor')},"
            f" {flags.get('cpu_isa')}, ATen {flags.get('cpu_capability')})"
        )
    needs = ", ".join(sorted(profile.cpu_flags)) or "the baseline ISA"
    return f"on an {profile.arch} CPU with {needs}"
