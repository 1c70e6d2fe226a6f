"""`dlm-git fsck`: a full check (every object re-hashed) vs a re-check of the unchanged
cache (the stat-keyed record vouches for every file), measured in the same run.

Builds a git repository in a temp directory with a history of `--commits` commits, each
retraining one document: its `dvc.lock` names a new `demo/adapter` directory out of
`--files` files of `--kb` KiB each (random bytes), stored the way DVC 3 stores them
(`.dvc/cache/files/md5/<2>/<30>` and the `.dir` listing as DVC serialises it), plus
`--tokens` token-cache entries encoded by `dlm_git.cache.entry`. No DVC and no training:
only the layout fsck reads. Files are then left alone past the racy window
(`statcache.RACY_NS`), as a cache is between two checks.

Timed in one process, alternating, `--reps` times each after an untimed round (medians):
- full:    `run_fsck(root, full=True)`: the history walked, every object read and hashed,
           every token-cache file decoded and its checksum checked;
- recheck: `run_fsck(root)` right after: the history walked, one `lstat` per file (a
           `.dir` listing is still read), nothing hashed;
- walk:    `references.collect(root)` alone: the history part of both;
- floor:   one `lstat` of every cache file (scandir of the shards), the least any check of
           "is it unchanged" can cost.
Prints the medians and full/recheck, recheck/(walk + floor). The files stay in the page
cache, so `full` is hashing from memory: on a cold disk it is slower, the re-check not.
Always exits 0.

    .venv/bin/python benchmarks/fsck_recheck.py [--commits 200] [--files 10] [--kb 64]
                                                [--tokens 500] [--reps 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import alternate, medians, timed

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from dlm_git.fsck.run import run_fsck  # noqa: E402
from dlm_git.history import references  # noqa: E402
from dlm_git.statcache import RACY_NS  # noqa: E402

DOC = "demo"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def put(cache: Path, data: bytes, suffix: str = "") -> str:
    md5 = hashlib.md5(data).hexdigest()
    path = cache / "files" / "md5" / md5[:2] / (md5[2:] + suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o444)
    return md5 + suffix


def build(repo: Path, commits: int, files: int, kb: int, tokens: int) -> int:
    """The repository; returns the number of cache files written."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "user.email", "bench@dlm-git.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / ".dvc").mkdir()
    (repo / ".dvc" / "config").write_text("")
    (repo / ".dvc" / ".gitignore").write_text("/config.local\n/tmp\n/cache\n")  # as `dvc init`
    (repo / ".gitignore").write_text(".dlm-git/\n/demo/adapter\n")
    (repo / "params.yaml").write_text(f"documents:\n- {DOC}\n")
    doc = repo / DOC
    doc.mkdir()
    (doc / f"{DOC}.dlm").write_text("---\ndlm_id: 01M800GRBP0GEV3WAMXAHDD42B\n---\nhello\n")
    cache = repo / ".dvc" / "cache"
    written = 0
    for c in range(commits):
        listing = [
            {"md5": put(cache, os.urandom(kb * 1024)), "relpath": f"part-{i:03d}.bin"}
            for i in range(files)
        ]
        dir_md5 = put(cache, json.dumps(listing, sort_keys=True).encode("utf-8"), ".dir")
        written += files + 1
        (doc / "dlm.lock").write_text(json.dumps({"run": c}))
        (repo / "dvc.lock").write_text(
            "schema: '2.0'\nstages:\n  train@demo:\n    cmd: train\n    outs:\n"
            f"    - path: demo/adapter\n      hash: md5\n      md5: {dir_md5}\n"
            f"      size: {files * kb * 1024}\n      nfiles: {files}\n"
            "    - path: demo/dlm.lock\n      hash: md5\n"
            f"      md5: {hashlib.md5((doc / 'dlm.lock').read_bytes()).hexdigest()}\n"
        )
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"train {c}")
    written += write_tokens(repo / ".git" / "dlm-git" / "token-cache", tokens)
    return written


def write_tokens(root: Path, n: int) -> int:
    import numpy as np

    from dlm_git.cache.entry import encode_entry, entry_key
    from dlm_git.token_stream import RowTokens, Sequence

    rng = np.random.default_rng(0)
    for i in range(n):
        row_id = f"{i:016x}"
        ids = rng.integers(0, 30000, size=256, dtype=np.int32)
        row = RowTokens.from_sequences(row_id, [Sequence(row_id, ids, ids.copy())])
        key = entry_key(row_id, "0" * 64, 256)
        path = root / "entries" / key[:2] / f"{key}.tok"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_entry(key, row))
    return n


def floor(repo: Path) -> int:
    """lstat every cache file; returns how many."""
    n = 0
    for top in (
        repo / ".dvc" / "cache" / "files" / "md5",
        repo / ".git" / "dlm-git" / "token-cache",
    ):
        stack = [str(top)]
        while stack:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        os.lstat(entry.path)
                        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--files", type=int, default=10, help="files per adapter directory")
    ap.add_argument("--kb", type=int, default=64, help="KiB per file")
    ap.add_argument("--tokens", type=int, default=500, help="token-cache entries")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="dlm-git-fsck-bench-") as tmp:
        repo = Path(tmp) / "repo"
        t0 = time.perf_counter()
        written = build(repo, args.commits, args.files, args.kb, args.tokens)
        built = time.perf_counter() - t0
        time.sleep(RACY_NS / 1e9 + 0.5)  # past the racy window: recordable
        mib = (args.commits * args.files * args.kb) / 1024
        print(
            f"repo: {args.commits} commits, {written} cache files "
            f"({mib:.0f} MiB of adapter files, {args.tokens} token entries); built in {built:.1f} s"
        )

        first = run_fsck(repo, full=True)  # untimed round (and the record)
        assert first.ok and first.dvc.missing == 0, first.to_json()
        run_fsck(repo)
        cases = {
            "full": lambda: run_fsck(repo, full=True),
            "recheck": lambda: run_fsck(repo),
            "walk": lambda: references.collect(repo),
            "floor": lambda: floor(repo),
        }

        def sample(key: str, _round: int) -> float:
            seconds = timed(cases[key])[0]
            if key == "full":
                assert run_fsck(repo).ok  # settle the record after the full run
            return seconds

        med = medians(alternate(cases, args.reps, sample, warmup=0))  # warmed up above
        last = run_fsck(repo)
        assert last.hashed == 0, f"re-check hashed {last.hashed} files"
        full, recheck, walk, stat_floor = (med[k] for k in cases)
        print(f"full     {full * 1000:8.1f} ms  (every file hashed: {first.hashed})")
        print(
            f"recheck  {recheck * 1000:8.1f} ms  (hashed {last.hashed}, unchanged {last.unchanged})"
        )
        print(f"walk     {walk * 1000:8.1f} ms  (history: {first.commits} commits)")
        print(f"floor    {stat_floor * 1000:8.1f} ms  (lstat of every cache file)")
        print(f"full / recheck           {full / recheck:6.1f}x")
        print(f"recheck / (walk + floor) {recheck / (walk + stat_floor):6.2f}x")


if __name__ == "__main__":
    main()
