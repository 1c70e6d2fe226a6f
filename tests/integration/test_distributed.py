"""Data-parallel training on torch.distributed (gloo, CPU): the contract with N ranks.

A repository is built once for this module the way a user builds one (`dlm-git init`,
`pipeline.nproc: 2` in params.yaml, `dvc repro`, `git commit`): its adapter was trained by
two ranks. Against it:
- a second `--nproc 2` run gives the same adapter bytes, and the lock records the topology;
- `verify --level replay` relaunches two ranks and says BITWISE;
- training with another world size is lock drift (WARN; ERROR under --strict-lock);
- a rank killed mid-run: one line naming it, no process left, the outputs as they were;
- segment snapshots with ranks, and a hostile world size in a lock, are refused.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.docs import set_training
from tests.support.env import run, subprocess_env
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.verified import DOC, EXTRA_QA, WEIGHTS, copy_repo, install_tiny_base

pytestmark = pytest.mark.slow

RANK_MODULE = b"dlm_git.train.rank"


@pytest.fixture(scope="module")
def ranked_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed repository whose `demo` adapter `dvc repro` trained on two ranks."""
    repo = init_repo(tmp_path_factory.mktemp("ranked") / "repo")
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    doc = repo / DOC / f"{DOC}.dlm"
    # one sequence per micro-batch, so that each step's pair really is split over the ranks
    text = set_training(doc.read_text("utf-8"), max_steps=4, sequence_len=64, micro_batch_size=1)
    doc.write_text(text.rstrip("\n") + "\n" + EXTRA_QA, "utf-8")
    params = yaml.safe_load((repo / "params.yaml").read_text("utf-8"))
    params["pipeline"].update({"nproc": 2, "threads": 1})
    (repo / "params.yaml").write_text(yaml.safe_dump(params), "utf-8")
    run(["dvc", "repro"], repo)
    commit_all(repo, "train demo on two ranks")
    install_tiny_base(repo)
    return repo


@pytest.fixture
def repo(tmp_path: Path, ranked_repo: Path) -> Path:
    return Path(copy_repo(ranked_repo, tmp_path / "repo"))


def train(repo: Path, *flags: str, check: bool = False) -> Any:
    argv = ["dlm-git", "train", DOC, "--tiny-dir", "bases/tiny", "-q", "--device", "cpu"]
    return run([*argv, "--threads", "1", *flags], repo, check=check)


def doc_files(repo: Path) -> dict[str, bytes]:
    """Every file in the document directory but the machine-local run record."""
    root = repo / DOC
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "run.json"
    }


def lock(repo: Path) -> dict[str, Any]:
    return dict(json.loads((repo / DOC / "dlm.lock").read_text("utf-8")))


def test_the_lock_records_the_topology(ranked_repo: Path) -> None:
    flags = lock(ranked_repo)["determinism_flags"]
    assert flags["distributed"] == {
        "world_size": 2,
        "backend": "gloo",
        "bucket_elements": 4194304,
        "sharding": "group-stride",
    }
    manifest = json.loads((ranked_repo / DOC / "manifest.json").read_text("utf-8"))
    assert manifest["training_config"]["world_size"] == 2
    assert manifest["segments"] is None  # ranks take no snapshots


def test_two_runs_on_two_ranks_are_bit_identical(repo: Path) -> None:
    committed = doc_files(repo)
    train(repo, "--nproc", "2", check=True)
    again = doc_files(repo)
    assert again[f"adapter/{WEIGHTS}"] == committed[f"adapter/{WEIGHTS}"]
    assert again == committed  # lock, manifest, metrics and loss curve too
    assert git(repo, "status", "--porcelain") == ""


def test_replay_relaunches_the_recorded_world_size(repo: Path) -> None:
    forge = Forge(repo, None)
    result = forge.verify_cli("HEAD", "--level", "replay")
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()
    assert "2 ranks" in result.check("replay.profile")["detail"]
    assert any("on 2 ranks" in note for note in result.doc["notes"]), result.explain()


def test_segment_replay_refuses_a_ranked_commit(repo: Path) -> None:
    forge = Forge(repo, None)
    result = forge.verify_cli("HEAD", "--level", "segments")
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", result.explain()


def test_another_world_size_is_lock_drift(repo: Path) -> None:
    """One process instead of two: ERROR under --strict-lock (nothing written), WARN by
    default, and other bits (another sum, another global batch)."""
    before = doc_files(repo)
    strict = train(repo, "--nproc", "1", "--strict-lock")
    assert strict.returncode == 1
    assert "determinism_flags.distributed" in strict.stderr
    assert doc_files(repo) == before

    loose = train(repo, "--nproc", "1")
    assert loose.returncode == 0, loose.stderr
    assert "WARN determinism_flags.distributed changed" in loose.stderr
    assert "distributed" not in lock(repo)["determinism_flags"]
    assert doc_files(repo)[f"adapter/{WEIGHTS}"] != before[f"adapter/{WEIGHTS}"]


def test_two_ranks_train_what_one_process_with_twice_the_accumulation_trains(repo: Path) -> None:
    """Each step of N ranks reads `grad_accum x N` micro-batches and sums the gradients:
    the same optimisation as one process with N times the accumulation, in another
    summation order (the same steps and losses, to float rounding; not the same bits)."""
    ranked = (repo / DOC / "train_loss.tsv").read_text("utf-8")
    doc = repo / DOC / f"{DOC}.dlm"
    text = re.sub(r"(?m)^(  micro_batch_size: 1)$", r"\1\n  grad_accum: 2", doc.read_text())
    doc.write_text(text, "utf-8")
    train(repo, "--nproc", "1", "--ignore-lock", check=True)
    single = (repo / DOC / "train_loss.tsv").read_text("utf-8")
    a, b = losses(ranked), losses(single)
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        assert abs(x - y) <= 1e-5 * abs(x), (a, b)


def losses(tsv: str) -> list[float]:
    return [float(line.split("\t")[1]) for line in tsv.splitlines()[1:]]


def test_segment_snapshots_with_ranks_are_refused(repo: Path) -> None:
    before = doc_files(repo)
    proc = train(repo, "--nproc", "2", "--segment-every", "2")
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "segment snapshots are taken by one process" in lines[0]
    assert doc_files(repo) == before


@pytest.mark.parametrize("nproc", ["0", "65", "two"])
def test_nproc_out_of_range_is_misuse(repo: Path, nproc: str) -> None:
    proc = train(repo, "--nproc", nproc)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_a_hostile_world_size_is_not_launched(repo: Path) -> None:
    """A lock claiming a million ranks is a malformed record, not a fork bomb."""
    forge = Forge(repo, None)
    recorded = forge.lock()
    recorded["determinism_flags"]["distributed"]["world_size"] = 1_000_000
    forge.write_lock(recorded)
    forge.commit("hostile world size")
    result = forge.verify_cli("HEAD", "--level", "replay")
    assert result.code == 1 and result.verdict == "FAILED", result.explain()
    assert "world_size 1000000" in result.check("lock.parse")["detail"], result.explain()
    replay = result.check("replay")
    assert "nothing replayed" in replay["detail"], result.explain()  # refused when read


# --------------------------------------------------------------------------- a killed rank


def rank_processes(doc_dir: Path) -> dict[int, tuple[int, Path]]:
    """pid -> (rank, job dir) of every live rank training into `doc_dir`."""
    found: dict[int, tuple[int, Path]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if RANK_MODULE not in argv:
                continue
            job_dir = Path(argv[argv.index(RANK_MODULE) + 1].decode())
            job = json.loads((job_dir / "job.json").read_text("utf-8"))
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if Path(job["staging"]).parent != doc_dir.resolve():
            continue
        rank = next(int(v[5:]) for v in environ if v.startswith(b"RANK="))
        found[int(entry.name)] = (rank, job_dir)
    return found


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def trained_steps(job_dir: Path) -> int:
    logs = list(job_dir.glob("logs/*/attempt_*/0/stdout.log"))
    text = logs[0].read_text("utf-8") if logs else ""
    return len(re.findall(r"(?m)^rank 0 step ", text))


@pytest.mark.parametrize(
    ("victim", "code", "line"),
    [
        ("rank 1", 1, "rank 1 of 2 was killed by SIGKILL"),
        ("launcher", 143, "killed by SIGTERM; the 2 ranks were stopped"),
    ],
)
def test_a_killed_run_leaves_the_outputs_as_they_were(
    repo: Path, victim: str, code: int, line: str
) -> None:
    """Mid-run, rank 1 is killed (SIGKILL), or the launcher is told to stop (SIGTERM):
    one line naming what happened, no rank left running, nothing installed."""
    doc = repo / DOC / f"{DOC}.dlm"
    doc.write_text(re.sub(r"(?m)^(  max_steps:) .*$", r"\1 100000", doc.read_text()), "utf-8")
    before = doc_files(repo)
    argv = ["dlm-git", "train", DOC, "--tiny-dir", "bases/tiny", "-q", "--device", "cpu"]
    proc = subprocess.Popen(
        [*argv, "--threads", "1", "--nproc", "2"],
        cwd=repo,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ranks = wait_for(
            lambda: (found := rank_processes(repo / DOC)) and len(found) == 2 and found,
            120,
            "two ranks",
        )
        job_dir = next(iter(ranks.values()))[1]
        wait_for(lambda: trained_steps(job_dir) >= 2, 120, "two optimizer steps")
        if victim == "launcher":
            proc.send_signal(signal.SIGTERM)
        else:
            os.kill(next(pid for pid, (rank, _) in ranks.items() if rank == 1), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code
    lines = [text for text in stderr.splitlines() if text.strip()]
    assert len(lines) == 1, stderr
    assert line in lines[0]
    assert not rank_processes(repo / DOC), "a rank outlived its launcher"
    assert not job_dir.exists()
    assert doc_files(repo) == before
    assert not [p.name for p in (repo / DOC).iterdir() if ".new." in p.name]


def test_a_failing_rank_is_named_and_the_launcher_gets_its_handlers_back() -> None:
    """In this process: ranks that fail at once (a job without a plan, which a rank reads
    back through the protocol as one line, not a traceback) make one
    `RankFailedError` naming a rank and its last line; afterwards Ctrl-C is a
    KeyboardInterrupt here again, not the elastic agent's handler; and the job directory
    a killed launcher left behind was swept by this launch."""
    from dlm_git.token_stream import TokenStream
    from dlm_git.train.launch import RankFailedError, run_ranks

    gone = subprocess.Popen(["true"])  # noqa: S607
    gone.wait()
    left = Path(tempfile.gettempdir()) / f".dlm-git-ranks.new.{gone.pid}.killed"
    (left / "logs").mkdir(parents=True)  # a SIGKILLed launcher's job directory
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RankFailedError) as info:
        run_ranks({"launcher_pid": os.getpid()}, TokenStream.from_rows([]), 2)
    line = info.value.one_line()
    assert re.search(r"rank [01] of 2 exited 1: the ranks' job: missing key 'device'", line)
    assert "nothing was installed" in info.value.one_line()
    assert signal.getsignal(signal.SIGINT) is before
    assert not left.exists()  # swept: its launcher is gone
