"""A repository with dlm-git's hooks installed, driven by real `git commit` / `git merge` /
`git push` subprocesses (tests/integration/hooks/).

The repository is the starter document `notes` (`dlm-git init --doc notes`, which
installs the hooks), trained by `dvc repro` and committed through the hook. The helpers
stage edits of its records and judge a commit by git's own outcome: a refused commit
exits 1, says `commit refused`, and leaves HEAD where it was.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from dlm_git.hashing import canonical_json, sha256_bytes
from tests.support.env import VENV_BIN, run
from tests.support.gitrepo import git, head

DOC = "notes"
DLM = f"{DOC}/{DOC}.dlm"
LOCK = f"{DOC}/dlm.lock"
MANIFEST = f"{DOC}/manifest.json"
SOURCE = f"{DOC}/notes/README.md"
ADAPTER_OUT = f"{DOC}/adapter"
EVAL = f"{DOC}/eval.json"
EVAL_METRICS = f"{DOC}/eval_metrics.json"
WEIGHTS = "adapter_model.safetensors"
HEAVY = ("torch", "transformers", "peft", "dvc")
"""Modules no hook may import (the hook budget)."""
OFF_PRE_COMMIT_PATH = ("dlm_git.gitio.history", "dlm_git.safetensors_header")
"""dlm-git modules the pre-commit hook never needs (issue 28: each was taken off its
start): commits and a path's history, and the safetensors header reader (the hook hashes
adapter files whole, through its hash cache)."""
# Prose inserted at the top of the body: inside the first training sequence, so the
# retrained adapter really differs (an edit past `sequence_len` would not change it).
EDIT = "Hook tests: this line changes what the adapter learns.\n"


def repro(repo: Path) -> None:
    run([VENV_BIN / "dvc", "repro", "-q"], repo)


def commit(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`git commit -q -m test <args>` (the hooks run); never raises."""
    return run(["git", "commit", "-q", "-m", "test", *args], repo, check=False, **env)


def refused(proc: subprocess.CompletedProcess[str], repo: Path, before: str) -> str:
    """Assert the commit was refused by dlm-git and HEAD did not move; the hook's stderr."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "commit refused" in proc.stderr, proc.stderr
    assert head(repo) == before
    return proc.stderr


def passed(proc: subprocess.CompletedProcess[str], repo: Path, before: str) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "dlm-git: ERROR" not in proc.stderr
    assert head(repo) != before
    assert git(repo, "rev-parse", "HEAD~1").strip() == before
    return proc.stderr


def read(repo: Path, rel: str) -> bytes:
    return (repo / rel).read_bytes()


def write(repo: Path, rel: str, data: bytes | str, stage: bool = True) -> None:
    path = repo / rel
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    if stage:
        git(repo, "add", "--", rel)


def edit_dlm(text: str) -> str:
    """Insert `EDIT` as the first line of the document's body (after the frontmatter)."""
    first, sep, rest = text.partition("\n---\n")
    assert sep, "the document has no closing frontmatter fence"
    return first + sep + EDIT + rest


def rebind(repo: Path, lock: dict[str, object]) -> None:
    """Write and stage `lock`, and re-bind (and stage) manifest.json's lock_sha256 to it."""
    lock_bytes = canonical_json(lock)
    write(repo, LOCK, lock_bytes)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["lock_sha256"] = sha256_bytes(lock_bytes)
    write(repo, MANIFEST, canonical_json(manifest))
    rebind_eval(repo)


def rebind_eval(repo: Path) -> None:
    """Re-bind (and stage) eval.json, and its metrics file, to the manifest.json in the
    work tree, as a forger would: its `manifest_sha256` and `adapter_sha256` (check
    `eval.binding`)."""
    from dlm_git.eval.record import metrics_of

    record = json.loads(read(repo, EVAL))
    manifest = read(repo, MANIFEST)
    record["manifest_sha256"] = sha256_bytes(manifest)
    record["adapter_sha256"] = json.loads(manifest)["adapter"]["files"][WEIGHTS]["sha256"]
    write(repo, EVAL, canonical_json(record))
    write(repo, EVAL_METRICS, canonical_json(metrics_of(record)))


def stage_other_adapter(repo: Path) -> tuple[str, str]:
    """In a retrained repository (`retrained_repo`): stage HEAD's manifest and dvc.lock
    recording the retrained adapter (in the DVC cache) instead, consistently (eval.json
    re-bound to them: `rebind_eval`); the `.dlm`
    and lock in the index stay HEAD's. What a nondeterministic run looks like: every hash
    binding holds, only the determinism check can object. (HEAD's, the new) tensor roots."""
    other_manifest = json.loads(read(repo, MANIFEST))
    other_dvc = yaml.safe_load(read(repo, "dvc.lock"))
    manifest = json.loads(git(repo, "show", f"HEAD:{MANIFEST}"))
    old_root = manifest["adapter"]["tensor_root"]
    manifest["adapter"] = other_manifest["adapter"]
    dvc = yaml.safe_load(git(repo, "show", "HEAD:dvc.lock"))
    train = f"train@{DOC}"
    new_out = next(o for o in other_dvc["stages"][train]["outs"] if o["path"] == ADAPTER_OUT)
    for out in dvc["stages"][train]["outs"]:
        if out["path"] == ADAPTER_OUT:
            out.update(new_out)
    write(repo, MANIFEST, canonical_json(manifest))
    write(repo, "dvc.lock", yaml.safe_dump(dvc, sort_keys=False))
    rebind_eval(repo)
    staged = set(git(repo, "diff", "--cached", "--name-only").split())
    assert {MANIFEST, "dvc.lock", EVAL} <= staged <= {MANIFEST, "dvc.lock", EVAL, EVAL_METRICS}
    return old_root, other_manifest["adapter"]["tensor_root"]


def adapter_md5(dvc_lock: bytes) -> str:
    for body in yaml.safe_load(dvc_lock)["stages"].values():
        for out in body.get("outs") or []:
            if out["path"] == ADAPTER_OUT:
                return str(out["md5"])
    raise AssertionError("dvc.lock records no adapter")


def cache_path(repo: Path, md5: str) -> Path:
    return repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def imported_modules(stderr: str) -> set[str]:
    """Top-level module names from `python -X importtime` output."""
    return {name.split(".")[0] for name in imported_names(stderr)}


def imported_names(stderr: str) -> set[str]:
    """Full (dotted) module names from `python -X importtime` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names
