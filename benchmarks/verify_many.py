"""Hash-level `dlm-git verify HEAD` on a commit of many documents, against the pre-commit
hook on the same commit.

Builds a git + DVC repository in a temp directory: `dlm-git init --doc d000` (the
starter document with `max_steps: 1`, `sequence_len: 32`), really trained by
`dvc repro`; then N-1 copies of that document directory (`d001`, ...,
`tests/support/copies.py`), each with its `.dlm` (renamed `<dir>.dlm`), `notes/`,
`base.json`, `dlm.lock`, `manifest.json`, `metrics.json`, `train_loss.tsv` and
`verify.json`, listed in params.yaml's `documents:`, and `dvc.lock` given every stage of
d000 once more for each copy with its paths renamed (the same adapter and token directory
md5s: DVC's cache is content-addressed, so the copies share their objects, as identical
trainings would). Every copy verifies on its own merits: every check runs on every
document.

Then, with all N documents staged on top of a commit that holds none (the hooks see N
new documents: every check of the pre-commit hook runs on every one):
- hook:   `python -m dlm_git.hooks.pre_commit`, the hash cache removed before each run
          (a first sight of every adapter, as on the commit that adds them);
- verify: `dlm-git verify <commit>` of that index committed (`git commit-tree`, on a
          branch of its own, so HEAD and the index stay as staged): the hash level the
          pre-push hook runs, as a subprocess.
Timed alternately, REPS times each after one untimed round (medians reported); every run
must pass (exit 0, N documents VERIFIED). Prints both, the ratio verify / hook, and
PASS/FAIL against the goals: verify <= 15 s for 300 documents, verify <= 2x the hook.
`--profile` adds a cProfile of `verify_commit` (in-process, after imports).
Always exits 0.

    .venv/bin/python benchmarks/verify_many.py [--docs 300] [--reps 3] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _timing import alternate, bench_root, load, medians, timed, verdict

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

BIN = Path(sys.executable).parent
GOAL_DOCS, GOAL_S = 300, 15.0  # verify of 300 documents in <= 15 s
GOAL_RATIO = 2.0
FIRST = "d000"
PYC_PREFIX: Path | None = None  # set in main()


def env() -> dict[str, str]:
    """git/dvc/dlm-git subprocesses: the venv's bin first, no user or system git config,
    bytecode cached (under PYC_PREFIX) as on a user's machine."""
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e["DVC_NO_ANALYTICS"] = "1"
    e["GIT_CONFIG_NOSYSTEM"] = "1"
    e["GIT_CONFIG_GLOBAL"] = os.devnull
    e.pop("DLM_GIT_STRICT", None)
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYC_PREFIX is not None:
        e["PYTHONPYCACHEPREFIX"] = str(PYC_PREFIX)
    return e


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=env())
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def train_first(repo: Path) -> None:
    """git init, `dlm-git init --doc d000`, a one-step training by `dvc repro`, committed
    without the document (the base commit the staged documents are added on)."""
    repo.mkdir(parents=True)
    run(repo, "git", "init", "-q")
    run(repo, "git", "config", "user.name", "bench")
    run(repo, "git", "config", "user.email", "bench@dlm-git.invalid")
    run(repo, "git", "config", "commit.gpgsign", "false")
    run(repo, str(BIN / "dlm-git"), "init", "--doc", FIRST, "--no-hooks")
    dlm = repo / FIRST / f"{FIRST}.dlm"
    text = dlm.read_text("utf-8")
    text = re.sub(r"(?m)^(  max_steps:) \d+$", r"\1 1", text)
    text = re.sub(r"(?m)^(  sequence_len:) \d+$", r"\1 32", text)
    dlm.write_text(text, "utf-8")
    t0 = time.perf_counter()
    run(repo, str(BIN / "dvc"), "repro", "-q")
    print(f"  trained {FIRST} in {time.perf_counter() - t0:.0f} s", flush=True)


def copy_documents(repo: Path, ndocs: int) -> list[str]:
    """d001.. as copies of d000 (`tests.support.copies`); params.yaml and dvc.lock name all."""
    from tests.support.copies import copy_document

    names = [f"d{i:03d}" for i in range(ndocs)]
    copy_document(repo, FIRST, names[1:])
    return names


def build(repo: Path, ndocs: int) -> None:
    train_first(repo)
    # the base commit: the pipeline without any document, so the hook sees N new ones
    run(repo, "git", "add", "-A")
    run(repo, "git", "rm", "-r", "-q", "--cached", FIRST)
    run(repo, "git", "rm", "-q", "--cached", "dvc.lock", "params.yaml")
    run(repo, "git", "commit", "-q", "--no-verify", "-m", "pipeline")
    copy_documents(repo, ndocs)
    run(repo, "git", "add", "-A")
    staged = run(repo, "git", "diff", "--cached", "--name-only").stdout.split()
    print(f"  {ndocs} documents staged ({len(staged)} paths)", flush=True)


def commit_staged(repo: Path) -> str:
    """Commit the staged documents (once) on a branch of their own; HEAD stays on the
    base commit with the index as staged, so the hook keeps seeing N new documents."""
    tree = run(repo, "git", "write-tree").stdout.strip()
    head = run(repo, "git", "rev-parse", "HEAD").stdout.strip()
    sha = run(repo, "git", "commit-tree", tree, "-p", head, "-m", "documents").stdout.strip()
    run(repo, "git", "update-ref", "refs/heads/documents", sha)
    return sha


def run_timed(repo: Path, argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(seconds, process) of `argv` in `repo`."""
    return timed(lambda: subprocess.run(argv, cwd=repo, capture_output=True, text=True, env=env()))


def check_verify(proc: subprocess.CompletedProcess[str], ndocs: int) -> None:
    try:
        docs = json.loads(proc.stdout)["documents"]
    except (ValueError, KeyError):
        raise SystemExit(f"verify did not answer JSON:\n{proc.stdout}\n{proc.stderr}") from None
    verdicts = [d["verdict"] for d in docs]
    if proc.returncode != 0 or verdicts != ["VERIFIED"] * ndocs:
        bad = [(d["doc"], d["verdict"]) for d in docs if d["verdict"] != "VERIFIED"][:5]
        raise SystemExit(f"verify did not pass ({proc.returncode}): {bad}\n{proc.stderr}")


def measure(repo: Path, sha: str, ndocs: int, reps: int) -> dict[str, list[float]]:
    from dlm_git.hooks.hashcache import CACHE_NAME
    from dlm_git.statedir import state_path

    cache = state_path(repo, CACHE_NAME)
    argv = {
        "hook": [sys.executable, "-m", "dlm_git.hooks.pre_commit"],
        "verify": [str(BIN / "dlm-git"), "verify", sha, "--json"],
    }

    def sample(key: str, i: int) -> float:
        cache.unlink(missing_ok=True)
        seconds, proc = run_timed(repo, argv[key])
        if key == "hook" and proc.returncode != 0:
            raise SystemExit(f"the pre-commit hook refused the documents:\n{proc.stderr}")
        if key == "verify":
            check_verify(proc, ndocs)
        print(f"    {'round' if i else 'warm-up'} {i}: {key} {seconds:.2f} s", flush=True)
        return seconds

    # the first round fills caches (OS, bytecode): not counted
    return alternate(argv, reps, sample)


def profile(repo: Path, sha: str) -> None:
    code = (
        "import cProfile, pstats, io; from pathlib import Path;"
        "from dlm_git.verify.commit import verify_commit;"
        "pr = cProfile.Profile(); pr.enable();"
        f"verify_commit(Path.cwd(), {sha!r}, None);"
        "pr.disable(); s = io.StringIO();"
        "pstats.Stats(pr, stream=s).sort_stats('cumulative').print_stats(25);"
        "print(s.getvalue())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, env=env()
    )
    print("  cProfile of verify_commit (after imports), by cumulative time:")
    for line in [ln for ln in proc.stdout.splitlines() if ln.strip()][:40]:
        print(f"    {line}")
    if proc.returncode != 0:
        print(proc.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build here and keep (or reuse) the repo")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    root, tmp = bench_root(args.keep, "dlm-git-verify-many-")
    global PYC_PREFIX
    PYC_PREFIX = root / "pycache"
    print(f"{os.cpu_count()} CPUs, load average {load()}")
    try:
        repo = root / f"docs{args.docs}"
        built = repo / ".git" / "bench-built"
        if not built.is_file():
            if repo.exists():
                shutil.rmtree(repo)
            build(repo, args.docs)
            built.write_text("ok\n")
        sha = commit_staged(repo)
        times = measure(repo, sha, args.docs, args.reps)
        med = medians(times)
        print(f"{args.docs} documents, median (min-max) of {args.reps} runs, load {load()}:")
        for key, label in (("hook", "pre-commit hook"), ("verify", "verify (hash level)")):
            v = times[key]
            print(f"  {label:<22} {med[key]:>7.2f} s  ({min(v):.2f}-{max(v):.2f})")
        ratio = med["verify"] / med["hook"]
        per_doc = med["verify"] / args.docs * 1000
        print(f"  verify / hook = {ratio:.2f}x; verify per document {per_doc:.1f} ms")
        print("targets:")
        if args.docs == GOAL_DOCS:
            ok = med["verify"] <= GOAL_S
            print(f"  {verdict(ok)}  verify {med['verify']:.2f} s <= {GOAL_S:.0f} s")
        else:
            print(f"  (the {GOAL_S:.0f} s goal is for {GOAL_DOCS} documents)")
        print(f"  {verdict(ratio <= GOAL_RATIO)}  verify / hook {ratio:.2f}x <= {GOAL_RATIO}x")
        if args.profile:
            profile(repo, sha)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
