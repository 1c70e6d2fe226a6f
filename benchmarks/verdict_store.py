"""verify's remembered verdicts at their cap: one file per commit against the single
`verdicts.json` of 951e786 (the baseline, measured in the same run).

Builds, in temp git repositories, a store of COMMITS commits (one document each, the
entries `dlm-git verify` writes, the running dlm-git as their verifier):

- old: the single file, written in the old format, used through the old module's own code
  (`git show 951e786:dlm_git/verify/verdicts.py`, loaded into a temp module: no old code
  is kept in the tree);
- new: the same file moved into per-commit files by the new module's first `remember`
  (timed once: what an upgrade costs, once), and a store of SMALL commits beside it.

Then times, alternating round by round (medians of REPS, wall and CPU): `remember` of one
more commit (what every `dlm-git verify COMMIT` adds), and a lookup of the 3 newest
commits (what `dlm-git log -n 3` reads: old `known(root)` whole, new `known(root, shas)`).
Each lookup is timed after one untimed call (what the previous case left in the caches
is not charged to it). Beside: the listing of names each `remember` of a commit new to
the store makes (its one cost that grows with the store), and a `remember` that prunes
(once per SLACK new commits over the cap). Goals: the new remember at most 1/10 of the
old; the new lookup too, and within 2x of new at SMALL (no growth with the store).

    .venv/bin/python benchmarks/verdict_store.py [--commits 10000] [--reps 7]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from _timing import alternate, load, verdict

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

BASELINE = "951e786"
SMALL = 100
FRESH = 10_000_000
"""Where the commits remembered during the timing are numbered from."""


def old_module() -> types.ModuleType | None:
    """The store's module as of BASELINE, from git; None where this checkout lacks it."""
    proc = subprocess.run(
        ["git", "show", f"{BASELINE}:dlm_git/verify/verdicts.py"],
        cwd=REPO_ROOT,
        capture_output=True,
    )
    if proc.returncode != 0:
        return None
    module = types.ModuleType(f"verdicts_{BASELINE}")
    exec(compile(proc.stdout, f"{BASELINE}:dlm_git/verify/verdicts.py", "exec"), vars(module))
    return module


def sha(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def repo(at: Path) -> Path:
    at.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=at, check=True)
    return at


def write_old_store(root: Path, commits: int, by: dict[str, Any]) -> int:
    """The single file as the old code writes it (commit -> document -> entry); its size."""
    from dlm_git.fsutil import atomic_write_bytes
    from dlm_git.hashing import canonical_json
    from dlm_git.statedir import state_path

    at = int(time.time()) - commits
    store = {
        sha(i): {"doc": {"verdict": "VERIFIED", "level": "hash", "at": at + i, "verifier": by}}
        for i in range(commits)
    }
    data = canonical_json(store)
    atomic_write_bytes(state_path(root, "verdicts.json"), data, sync_dir=False)
    return len(data)


def lookup(
    old: types.ModuleType | None, root: Path, shas: list[str]
) -> Callable[[], dict[str, Any]]:
    """What `log` reads for `shas`: with the `old` module the whole store, then picked;
    with the new one (None) their files."""
    if old is not None:
        return lambda: {s: d for s, d in old.known(root).items() if s in shas}
    from dlm_git.verify.verdicts import known

    return partial(known, root, shas)


def names(directory: Path) -> int:
    """The count of names in the directory, as each `remember` of a new commit lists it."""
    return len(os.listdir(directory))


def clocked(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call of `fn`."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    old = old_module()
    if old is None:
        print(f"baseline unavailable: this checkout has no commit {BASELINE}; nothing timed")
        return 0
    from dlm_git.selfid import identity
    from dlm_git.statedir import state_path
    from dlm_git.verify import verdicts as new
    from dlm_git.verify.report import DocReport, Verdict

    new.MAX_COMMITS = max(args.commits, new.MAX_COMMITS)
    old.MAX_COMMITS = new.MAX_COMMITS  # type: ignore[attr-defined]
    ident = identity()
    reports = [DocReport("doc", "hash", Verdict.VERIFIED, [])]
    with tempfile.TemporaryDirectory(prefix="dlm-git-bench-verdicts-") as tmp:
        roots = {name: repo(Path(tmp) / name) for name in ("old", "new", "small")}
        size = write_old_store(roots["old"], args.commits, ident.to_json())
        write_old_store(roots["new"], args.commits, ident.to_json())
        write_old_store(roots["small"], SMALL, ident.to_json())
        move, move_cpu = clocked(lambda: new.remember(roots["new"], sha(-1), reports, ident))
        new.remember(roots["small"], sha(-1), reports, ident)
        files = state_path(roots["new"], new.STORE)
        print(
            f"store: {args.commits} commits, 1 document each; old verdicts.json "
            f"{size / 1e6:.1f} MB; new: {len(os.listdir(files))} files; load {load()}"
        )
        print(
            f"one-off move of the old store into per-commit files (the first remember): "
            f"{move * 1000:.0f} ms wall, {move_cpu * 1000:.0f} ms CPU"
        )
        for (store, name), i in ((case, i) for case in CASES for i in (1, 2)):
            module = old if store == "old" else new  # the lookup's 3 newest exist at once
            module.remember(roots[name], sha(FRESH - i), reports, ident)

        def sample(key: str, round_: int) -> tuple[float, float]:
            store, name, what = key.split()
            module = old if store == "old" else new
            root = roots[name]
            if what == "remember":
                return clocked(partial(module.remember, root, sha(FRESH + round_), reports, ident))
            newest = [sha(FRESH + round_ - i) for i in range(3)]
            read = lookup(old if store == "old" else None, root, newest)
            assert len(read()) == 3  # untimed first: the previous case's caches are not charged
            return clocked(read)

        keys = [f"{s} {n} {w}" for w in ("remember", "lookup") for s, n in CASES]
        got = alternate(keys, args.reps, sample)
        wall = {k: statistics.median(v[0] for v in got[k]) for k in keys}
        cpu = {k: statistics.median(v[1] for v in got[k]) for k in keys}
        print(f"medians of {args.reps} (wall ms / CPU ms); load {load()}")
        for what in ("remember", "lookup"):
            n, s, o = (f"{st} {name} {what}" for st, name in CASES)
            print(
                f"{what:9s} old {wall[o] * 1e3:7.1f} / {cpu[o] * 1e3:6.1f}   "
                f"new {wall[n] * 1e3:6.2f} / {cpu[n] * 1e3:5.2f}   "
                f"new at {SMALL} {wall[s] * 1e3:6.2f} / {cpu[s] * 1e3:5.2f}   "
                f"old/new {wall[o] / wall[n]:5.0f}x  new/small {wall[n] / wall[s]:4.1f}x"
            )
            if what == "remember":  # its listing of names grows with the store
                print(f"  goal: new <= old / 10: {verdict(wall[n] * 10 <= wall[o])}")
            else:
                ok = wall[n] <= 2 * wall[s] and wall[n] * 10 <= wall[o]
                print(f"  goal: new <= 2x new at {SMALL}, new <= old / 10: {verdict(ok)}")
        listing = statistics.median(clocked(lambda: names(files))[0] for _ in range(args.reps))
        listed = names(files)
        prune = []
        for i in range(args.reps):  # the cap just under the count: this remember prunes
            new.MAX_COMMITS = len(os.listdir(files)) - new.SLACK
            fresh = sha(20_000_000 + i)
            prune.append(clocked(partial(new.remember, roots["new"], fresh, reports, ident))[0])
        print(
            f"new, beside: listing {listed} names {listing * 1e3:.2f} ms (every remember of "
            f"a new commit); one that prunes {statistics.median(prune) * 1e3:.1f} ms (once per "
            f"{new.SLACK} over the cap; {new.SLACK + 1} files go each); load {load()}"
        )
    return 0


CASES = (("new", "new"), ("new", "small"), ("old", "old"))
"""(module, store) of each case: new at COMMITS and at SMALL, old at COMMITS."""


if __name__ == "__main__":
    sys.exit(main())
