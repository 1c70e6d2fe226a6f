"""The git hooks, driven by real `git commit` / `git push` subprocesses in temp repositories.

One repository is set up once per module the way a user would (`dlm-git init --doc notes`,
`dvc repro`, `git add -A`, `git commit`; the hook is installed by `init`), and every test
works on a full copy of it (`.git` and `.dvc/cache` included), so nothing is retrained per
test. A second module fixture retrains once after a `.dlm` edit (`dvc repro`), for the
"retrained and committed" case and as the source of a second, real adapter.

Every refusal is checked against HEAD: a refused commit must leave HEAD where it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from dlm_git.hashing import canonical_json, sha256_bytes

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
DOC = "notes"
DLM = f"{DOC}/{DOC}.dlm"
LOCK = f"{DOC}/dlm.lock"
MANIFEST = f"{DOC}/manifest.json"
SOURCE = f"{DOC}/notes/README.md"
ADAPTER_OUT = f"{DOC}/adapter"
HEAVY = ("torch", "transformers", "peft", "dvc")
# Prose inserted at the top of the body: inside the first training sequence, so the
# retrained adapter really differs (an edit past `sequence_len` would not change it).
EDIT = "Hook tests: this line changes what the adapter learns.\n"


def hook_env(**extra: str) -> dict[str, str]:
    """The environment for git/dvc subprocesses: the venv's tools first, no global or
    system git config (a user's `core.hooksPath` must not leak in), strict mode off."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    for key in ("DLM_GIT_STRICT", "GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"):
        env.pop(key, None)
    env.update(extra)
    return env


def sh(repo: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), cwd=repo, capture_output=True, text=True, env=hook_env(**env))
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def git(repo: Path, *args: str, check: bool = True, **env: str) -> str:
    return sh(repo, "git", *args, check=check, **env).stdout


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def commit(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`git commit -q -m test <args>` (the hooks run); never raises."""
    return sh(repo, "git", "commit", "-q", "-m", "test", *args, check=False, **env)


def dlm_git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh(repo, str(VENV_BIN / "dlm-git"), *args, check=check)


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


def canonical(obj: object) -> bytes:
    return canonical_json(obj)


def rebind(repo: Path, lock: dict[str, object]) -> None:
    """Write and stage `lock`, and re-bind (and stage) manifest.json's lock_sha256 to it."""
    lock_bytes = canonical(lock)
    write(repo, LOCK, lock_bytes)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["lock_sha256"] = sha256_bytes(lock_bytes)
    write(repo, MANIFEST, canonical(manifest))


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
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name.split(".")[0])
    return names


# --------------------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class Trained:
    repo: Path
    head: str


def _setup(repo: Path) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "dlm-git tests")
    git(repo, "config", "user.email", "tests@dlm-git.invalid")
    git(repo, "config", "commit.gpgsign", "false")


def _repro(repo: Path) -> None:
    proc = sh(repo, str(VENV_BIN / "dvc"), "repro", "-q", check=False)
    assert proc.returncode == 0, f"dvc repro failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def hermetic_dvc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DVC_SITE_CACHE_DIR", str(tmp_path_factory.mktemp("dvc-site-cache")))
        yield


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, hermetic_dvc: None) -> Trained:
    """`dlm-git init --doc notes` + `dvc repro` + first commit (through the hook)."""
    repo = tmp_path_factory.mktemp("hooks-trained") / "repo"
    _setup(repo)
    out = dlm_git(repo, "init", "--doc", DOC).stdout
    assert "pre-commit: installed" in out
    text = read(repo, DLM).decode("utf-8")
    text, n = re.subn(r"(?m)^(  max_steps:) \d+$", r"\1 2", text)
    assert n == 1, "the starter document has no training.max_steps"
    text = re.sub(r"(?m)^(  sequence_len:) \d+$", r"\1 32", text)
    write(repo, DLM, text, stage=False)
    write(repo, "README.md", "# A project with a trained document\n", stage=False)
    _repro(repo)
    git(repo, "add", "-A")
    proc = commit(repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    _seed_base_cache(repo)
    return Trained(repo, head(repo))


def _seed_base_cache(repo: Path) -> None:
    """Put the pipeline's built tiny base into the base cache (`DLM_GIT_BASE_CACHE`), where
    `verify COMMIT` (the pre-push hook) looks for it; a machine that ever ran `dlm-git
    train` without `--tiny-dir` has it there. The cold-cache case has its own test."""
    from dlm_git.base.tiny import check_tiny_dir, tiny_dir

    cached = tiny_dir()
    if not (cached / "dlm_git_base.json").is_file():
        shutil.copytree(repo / "bases" / "tiny", cached, dirs_exist_ok=True)
    check_tiny_dir(cached)


@pytest.fixture(scope="module")
def retrained(trained: Trained, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """A copy of `trained` whose .dlm was edited and retrained (`dvc repro`), not staged."""
    repo = tmp_path_factory.mktemp("hooks-retrained") / "repo"
    shutil.copytree(trained.repo, repo, symlinks=True)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    _repro(repo)
    old = json.loads(git(repo, "show", f"HEAD:{MANIFEST}"))["adapter"]["tensor_root"]
    new = json.loads(read(repo, MANIFEST))["adapter"]["tensor_root"]
    assert old != new, "the edit did not change the adapter; make EDIT reach training"
    return Trained(repo, trained.head)


@pytest.fixture
def repo(trained: Trained, tmp_path: Path) -> Path:
    """A private copy of the trained, committed repository (HEAD = the first commit)."""
    dest = tmp_path / "repo"
    shutil.copytree(trained.repo, dest, symlinks=True)
    assert head(dest) == trained.head
    assert git(dest, "status", "--porcelain") == ""
    return dest


@pytest.fixture
def retrained_repo(retrained: Trained, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(retrained.repo, dest, symlinks=True)
    return dest


# --------------------------------------------------------------------------- silence


def test_nothing_concerning_a_document_is_silent(repo: Path) -> None:
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""
    assert proc.stdout == ""


# --------------------------------------------------------------------------- stale record


def test_edited_dlm_committed_without_retraining_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    err = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR {DOC}: {DLM} changed since it was trained (manifest.json is stale) "
        "(run `dvc repro` (or `dlm-git train`) and stage the results)"
    ) in err
    assert "dlm-git: 1 error(s), 0 warning(s) in 1 document(s): commit refused" in err
    # The refused commit left the index as it was: the edit is still staged.
    assert git(repo, "diff", "--cached", "--name-only").split() == [DLM]


def test_retrained_and_committed_passes(retrained_repo: Path) -> None:
    repo = retrained_repo
    before = head(repo)
    # Only the .dlm staged, the retrained outputs left out: still the stale record.
    git(repo, "add", DLM)
    err = refused(commit(repo), repo, before)
    assert "manifest.json is stale" in err
    # Everything `dvc repro` wrote staged: the commit goes through, silently.
    git(repo, "add", "-A")
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert {DLM, LOCK, MANIFEST, "dvc.lock"} <= set(staged)
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""


def test_source_file_edit_without_retraining_is_refused(repo: Path) -> None:
    before = head(repo)
    with open(repo / SOURCE, "a", encoding="utf-8") as fh:
        fh.write("A new fact the adapter never saw.\n")
    err = refused(commit(repo, SOURCE), repo, before)  # `git commit <path>`
    assert (
        f"dlm-git: ERROR {DOC}: staged sources differ from those manifest.json was trained on"
    ) in err


def test_new_source_file_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, f"{DOC}/notes/extra.txt", "matched by the include pattern\n")
    err = refused(commit(repo), repo, before)
    assert "staged sources differ" in err


def test_unmatched_file_in_a_source_dir_passes(repo: Path) -> None:
    before = head(repo)
    write(repo, f"{DOC}/notes/image.bin", "not *.md or *.txt: not a source\n")
    passed(commit(repo), repo, before)


# --------------------------------------------------------------------------- lock drift


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("base_model_sha256", "0" * 64, "base_model_sha256 changed"),
        ("pinned_versions.torch", "3.0.0", "pinned_versions.torch changed"),
        ("dlm_id", "01M800GRBP0GEV3WAMXAHDD42B", "dlm_id changed"),
    ],
)
def test_lock_drift_error_is_refused(repo: Path, field: str, value: str, shown: str) -> None:
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    key, _, sub = field.partition(".")
    if sub:
        lock[key][sub] = value
    else:
        lock[key] = value
    rebind(repo, lock)
    err = refused(commit(repo), repo, before)
    lines = [line for line in err.splitlines() if line.startswith("dlm-git: ERROR")]
    assert len(lines) == 1, err  # re-bound: the drift is the only finding
    assert lines[0].startswith(f"dlm-git: ERROR {DOC}: lock drift: {shown}: ")
    assert "--update-lock" in lines[0] and "supersedes" in lines[0]


def test_lock_edit_without_rebinding_is_refused_twice(repo: Path) -> None:
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    lock["base_model_sha256"] = "1" * 64
    write(repo, LOCK, canonical(lock))
    err = refused(commit(repo), repo, before)
    assert "lock drift: base_model_sha256 changed" in err
    assert "manifest.json does not bind the staged dlm.lock (lock_sha256)" in err


def test_supersedes_accepts_an_error_drift(repo: Path) -> None:
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    lock["pinned_versions"]["torch"] = "3.0.0"
    lock["supersedes"] = sha256_bytes(git(repo, "show", f"HEAD:{LOCK}").encode("utf-8"))
    rebind(repo, lock)
    proc = commit(repo)
    passed(proc, repo, before)
    assert "dlm-git: ERROR" not in proc.stderr


def test_supersedes_of_another_lock_does_not_accept(repo: Path) -> None:
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    lock["pinned_versions"]["torch"] = "3.0.0"
    lock["supersedes"] = sha256_bytes(b"some other lock")
    rebind(repo, lock)
    err = refused(commit(repo), repo, before)
    assert "lock drift: pinned_versions.torch changed" in err


def _numpy_drift(repo: Path) -> None:
    lock = json.loads(read(repo, LOCK))
    assert "numpy" in lock["pinned_versions"]
    lock["pinned_versions"]["numpy"] = "0.0.1"
    rebind(repo, lock)


def test_warn_drift_commits_and_prints(repo: Path) -> None:
    before = head(repo)
    _numpy_drift(repo)
    err = passed(commit(repo), repo, before)
    assert f"dlm-git: WARN {DOC}: lock drift: pinned_versions.numpy changed: " in err
    assert "-> '0.0.1' (allowed; set DLM_GIT_STRICT=1 to refuse)" in err
    assert "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok" in err


@pytest.mark.parametrize("how", ["env", "git-config"])
def test_strict_mode_refuses_warn_drift(repo: Path, how: str) -> None:
    before = head(repo)
    _numpy_drift(repo)
    if how == "git-config":
        git(repo, "config", "dlm-git.strict", "true")
        proc = commit(repo)
    else:
        proc = commit(repo, DLM_GIT_STRICT="1")
    err = refused(proc, repo, before)
    assert f"dlm-git: ERROR {DOC}: lock drift: pinned_versions.numpy changed" in err
    assert "dlm-git: 1 error(s), 0 warning(s)" in err


# --------------------------------------------------------------------------- adapter binding


def test_manifest_adapter_sha_edit_is_refused(repo: Path) -> None:
    before = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical(manifest))
    err = refused(commit(repo), repo, before)
    assert re.search(
        rf"dlm-git: ERROR {DOC}: adapter_model\.safetensors sha256 [0-9a-f]{{16}} is not "
        r"manifest\.json's abababababababab \(run `dvc repro`",
        err,
    ), err


def test_dvc_lock_naming_another_object_is_refused(repo: Path) -> None:
    """dvc.lock's adapter md5 pointed at another real directory in the DVC cache."""
    before = head(repo)
    data = read(repo, "dvc.lock")
    adapter = adapter_md5(data)
    tokens = next(
        str(out["md5"])
        for body in yaml.safe_load(data)["stages"].values()
        for out in body.get("outs") or []
        if out["path"] == f"{DOC}/tokens"
    )
    assert cache_path(repo, tokens).is_file()
    write(repo, "dvc.lock", data.replace(adapter.encode(), tokens.encode()))
    err = refused(commit(repo), repo, before)
    assert f"dlm-git: ERROR {DOC}: adapter files [" in err
    assert "differ from manifest.json's ['adapter_config.json', 'adapter_model.safetensors']" in err


def test_dvc_lock_naming_an_uncached_adapter_is_refused(repo: Path) -> None:
    before = head(repo)
    data = read(repo, "dvc.lock")
    adapter = adapter_md5(data)
    write(repo, "dvc.lock", data.replace(adapter.encode(), b"0123456789abcdef0123456789abcdef.dir"))
    err = refused(commit(repo), repo, before)
    assert (
        "adapter 0123456789abcdef0123456789abcdef.dir named by dvc.lock is not in the DVC cache"
        in err
    )


def test_manifest_lock_sha_mismatch_is_refused(repo: Path) -> None:
    before = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["lock_sha256"] = "cd" * 32
    write(repo, MANIFEST, canonical(manifest))
    err = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR {DOC}: manifest.json does not bind the staged dlm.lock (lock_sha256)"
    ) in err


# --------------------------------------------------------------------------- determinism


def test_same_inputs_different_adapter_is_refused_under_strong(retrained_repo: Path) -> None:
    """What a nondeterministic run looks like: HEAD's inputs, HEAD's lock, but another real
    adapter (the retrained one, in the DVC cache) recorded consistently in manifest.json and
    dvc.lock. Every hash binding holds; only the determinism check can object."""
    repo = retrained_repo
    before = head(repo)
    other_manifest = json.loads(read(repo, MANIFEST))
    other_dvc = yaml.safe_load(read(repo, "dvc.lock"))
    manifest = json.loads(git(repo, "show", f"HEAD:{MANIFEST}"))
    assert json.loads(git(repo, "show", f"HEAD:{LOCK}"))["determinism_class"] == "strong"
    manifest["adapter"] = other_manifest["adapter"]
    dvc = yaml.safe_load(git(repo, "show", "HEAD:dvc.lock"))
    new_out = next(
        o for o in other_dvc["stages"][f"train@{DOC}"]["outs"] if o["path"] == ADAPTER_OUT
    )
    for out in dvc["stages"][f"train@{DOC}"]["outs"]:
        if out["path"] == ADAPTER_OUT:
            out.update(new_out)
    # Stage exactly the crafted pair; the .dlm and lock in the index stay HEAD's.
    write(repo, MANIFEST, canonical(manifest))
    write(repo, "dvc.lock", yaml.safe_dump(dvc, sort_keys=False))
    assert set(git(repo, "diff", "--cached", "--name-only").split()) == {MANIFEST, "dvc.lock"}
    err = refused(commit(repo), repo, before)
    old_root = json.loads(git(repo, "show", f"HEAD:{MANIFEST}"))["adapter"]["tensor_root"]
    new_root = other_manifest["adapter"]["tensor_root"]
    lines = [line for line in err.splitlines() if line.startswith("dlm-git: ERROR")]
    assert lines == [
        f"dlm-git: ERROR {DOC}: same inputs as HEAD but a different adapter "
        f"({old_root[:16]} -> {new_root[:16]}) under the same numerics setup (profile "
        "x86-64-v3, class strong): the training was not reproducible (investigate "
        "nondeterminism: compare `dlm-git doctor` with the lock; see docs/hooks.md)"
    ], err


# --------------------------------------------------------------------------- what is checked


def test_commit_all_checks_the_worktree_changes(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    err = refused(commit(repo, "-a"), repo, before)
    assert "manifest.json is stale" in err
    assert git(repo, "diff", "--cached", "--name-only") == ""  # the real index is untouched


def test_commit_path_of_the_dlm_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    err = refused(commit(repo, DLM), repo, before)
    assert "manifest.json is stale" in err


def test_commit_path_of_an_unrelated_file_passes(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    write(repo, "README.md", "# Changed\n", stage=False)
    proc = commit(repo, "README.md")
    passed(proc, repo, before)
    assert proc.stderr == ""
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["README.md"]
    assert git(repo, "status", "--porcelain").split() == ["M", DLM]


def test_partial_staging_checks_the_index_not_the_worktree(repo: Path) -> None:
    before = head(repo)
    trained_text = read(repo, DLM)
    write(repo, DLM, edit_dlm(trained_text.decode("utf-8")))  # stale edit staged
    write(repo, DLM, trained_text, stage=False)  # worktree back to the trained bytes
    assert git(repo, "diff", "--name-only").split() == [DLM]
    err = refused(commit(repo), repo, before)
    assert "manifest.json is stale" in err


def test_worktree_edits_with_nothing_staged_for_the_doc_pass(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    with open(repo / SOURCE, "a", encoding="utf-8") as fh:
        fh.write("unstaged\n")
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""


# --------------------------------------------------------------------------- installation


FOREIGN = """#!/bin/sh
echo "$0 ran" >> "{marker}"
exit {code}
"""


def _hook_files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.endswith(".sample")
    }


def _write_hook(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_existing_hook_is_chained_and_restored(repo: Path, tmp_path: Path) -> None:
    hooks = repo / ".git" / "hooks"
    out = dlm_git(repo, "hooks", "install", "--uninstall").stdout
    removed = ["pre-commit: removed", "pre-merge-commit: removed", "pre-push: removed"]
    assert out.splitlines() == removed
    marker = tmp_path / "marker"
    foreign = FOREIGN.format(marker=marker, code=0)
    _write_hook(hooks / "pre-commit", foreign)

    out = dlm_git(repo, "hooks", "install").stdout
    assert "pre-commit: installed" in out and "runs first as pre-commit.dlm-git-chained" in out
    assert (hooks / "pre-commit.dlm-git-chained").read_text("utf-8") == foreign
    installed = _hook_files(hooks)

    # Idempotent: a second install says so and changes nothing.
    out = dlm_git(repo, "hooks", "install").stdout
    assert out.splitlines() == [
        "pre-commit: already installed",
        "pre-merge-commit: already installed",
        "pre-push: already installed",
    ]
    assert _hook_files(hooks) == installed

    # Both run: the foreign hook first (marker), then ours (refuses the stale edit).
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    passed(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 1
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 2

    out = dlm_git(repo, "hooks", "install", "--uninstall").stdout
    assert out.splitlines() == [
        "pre-commit: removed (restored the previous hook)",
        "pre-merge-commit: removed",
        "pre-push: removed",
    ]
    assert (hooks / "pre-commit").read_text("utf-8") == foreign
    assert not (hooks / "pre-commit.dlm-git-chained").exists()
    restored = _hook_files(hooks)
    out = dlm_git(repo, "hooks", "install", "--uninstall").stdout
    assert out.splitlines() == [
        "pre-commit: not installed",
        "pre-merge-commit: not installed",
        "pre-push: not installed",
    ]
    assert _hook_files(hooks) == restored
    # Our hook is gone: the stale edit now goes through (only the foreign hook runs).
    passed(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 3


def test_failing_chained_hook_refuses_the_commit(repo: Path, tmp_path: Path) -> None:
    hooks = repo / ".git" / "hooks"
    dlm_git(repo, "hooks", "install", "--uninstall")
    marker = tmp_path / "marker"
    _write_hook(hooks / "pre-commit", FOREIGN.format(marker=marker, code=1))
    dlm_git(repo, "hooks", "install")
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    assert proc.returncode == 1
    assert head(repo) == before
    assert marker.read_text().count("ran") == 1
    assert "dlm-git" not in proc.stderr  # refused by the chained hook, before ours ran


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_core_hooks_path_is_honoured(repo: Path, tmp_path: Path, absolute: bool) -> None:
    dlm_git(repo, "hooks", "install", "--uninstall")
    custom = (tmp_path / "shared-hooks") if absolute else (repo / "custom-hooks")
    git(repo, "config", "core.hooksPath", str(custom) if absolute else "custom-hooks")
    out = dlm_git(repo, "hooks", "install").stdout
    assert f"pre-commit: installed in {custom}" in out
    assert {"pre-commit", "pre-merge-commit", "pre-push"} <= set(_hook_files(custom))
    assert "pre-commit" not in _hook_files(repo / ".git" / "hooks")
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)


def test_dvc_install_refuses_after_ours(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    installed = _hook_files(hooks)
    proc = sh(repo, str(VENV_BIN / "dvc"), "install", check=False)
    assert proc.returncode != 0
    assert "already exists" in proc.stdout + proc.stderr
    assert _hook_files(hooks) == installed


def test_ours_after_dvc_install_chains_dvcs_hook(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    dlm_git(repo, "hooks", "install", "--uninstall")
    sh(repo, str(VENV_BIN / "dvc"), "install")
    dvc_pre_commit = (hooks / "pre-commit").read_text("utf-8")
    assert "dvc git-hook pre-commit" in dvc_pre_commit
    out = dlm_git(repo, "hooks", "install").stdout
    assert "runs first as pre-commit.dlm-git-chained" in out
    assert "runs first as pre-push.dlm-git-chained" in out
    assert (hooks / "pre-commit.dlm-git-chained").read_text("utf-8") == dvc_pre_commit
    assert (hooks / "post-checkout").is_file()  # DVC's other hook is left alone
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    passed(commit(repo), repo, before)
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)


# --------------------------------------------------------------------------- merges


def _branch(repo: Path) -> str:
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()


def _diverge(repo: Path, base: str) -> str:
    """Back on `base`, an unrelated commit (through the hook), so the merge is a real one."""
    git(repo, "checkout", "-q", base)
    before = head(repo)
    write(repo, "README.md", "# The base branch moved on\n")
    passed(commit(repo), repo, before)
    return head(repo)


def merge(repo: Path, branch: str, *args: str) -> subprocess.CompletedProcess[str]:
    return sh(repo, "git", "merge", "-q", "--no-edit", *args, branch, check=False)


def test_honest_merge_passes(retrained_repo: Path) -> None:
    """A branch that retrained its edited .dlm (committed through the hook), merged into
    a base branch that moved on: pre-merge-commit runs the pre-commit checks on the merge
    result and lets it through, silently."""
    repo = retrained_repo
    base = _branch(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "add", "-A")
    before = head(repo)
    passed(commit(repo), repo, before)
    feature = head(repo)
    moved = _diverge(repo, base)
    proc = merge(repo, "feature")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    assert git(repo, "rev-parse", "HEAD^1", "HEAD^2").split() == [moved, feature]


def test_stale_merge_is_refused(repo: Path) -> None:
    """A branch whose .dlm was edited without retraining (past its own pre-commit hook,
    e.g. by a collaborator without hooks) merges without conflicts: git runs no
    pre-commit hook for that merge, only pre-merge-commit, which refuses it."""
    base = _branch(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    assert commit(repo, "--no-verify").returncode == 0
    moved = _diverge(repo, base)
    proc = merge(repo, "feature")
    assert proc.returncode != 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlm-git:")]
    assert lines == [
        f"dlm-git: ERROR {DOC}: {DLM} changed since it was trained (manifest.json is stale)"
        " (run `dvc repro` (or `dlm-git train`) and stage the results)",
        "dlm-git: 1 error(s), 0 warning(s) in 1 document(s): merge refused",
    ], proc.stderr
    assert head(repo) == moved
    # the refused merge is left uncommitted; retraining and `git commit` would finish it
    git(repo, "merge", "--abort")
    # without our pre-merge-commit hook (only pre-commit), the same merge went through
    (repo / ".git" / "hooks" / "pre-merge-commit").unlink()
    proc = merge(repo, "feature")
    assert proc.returncode == 0 and "dlm-git" not in proc.stderr, proc.stderr
    assert head(repo) != moved


# --------------------------------------------------------------------------- pre-push


def test_pre_push_verifies_pushed_commits(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    good = head(repo)
    proc = sh(repo, "git", "push", "-q", "origin", "HEAD:main", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "dlm-git: ERROR" not in proc.stderr
    # the one thing said: the adapter is on no DVC remote, so no one else can fetch it
    assert "dlm-git: WARN no default DVC remote" in proc.stderr, proc.stderr
    assert git(remote, "rev-parse", "main").strip() == good

    # A record edited past the pre-commit hook (--no-verify) is caught on push.
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical(manifest))
    assert commit(repo, "--no-verify").returncode == 0
    bad = head(repo)
    proc = sh(repo, "git", "push", "-q", "origin", "HEAD:main", check=False)
    assert proc.returncode != 0
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr, proc.stderr
    assert "push refused" in proc.stderr
    assert git(remote, "rev-parse", "main").strip() == good


def test_pre_push_refuses_an_adapter_tampered_in_the_dvc_cache(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    listing = json.loads(cache_path(repo, adapter_md5(read(repo, "dvc.lock"))).read_text())
    weights = next(e["md5"] for e in listing if e["relpath"] == "adapter_model.safetensors")
    obj = cache_path(repo, weights)
    obj.chmod(0o644)
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last tensor's bytes
    obj.write_bytes(bytes(data))
    before = head(repo)
    proc = sh(repo, "git", "push", "-q", "origin", "HEAD:main", check=False)
    assert proc.returncode != 0
    assert f"dlm-git: ERROR {DOC}@{before[:12]}: FAILED" in proc.stderr, proc.stderr
    assert git(remote, "rev-parse", "--verify", "--quiet", "main", check=False) == ""


def test_pre_push_under_the_pre_commit_framework(repo: Path) -> None:
    """The framework reads git's stdin itself and passes the pushed sha in
    PRE_COMMIT_TO_REF; the hook must verify that commit, not see "nothing pushed"."""
    good = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical(manifest))
    assert commit(repo, "--no-verify").returncode == 0
    bad = head(repo)
    argv = [sys.executable, "-m", "dlm_git.hooks.pre_push"]
    for sha, code in ((good, 0), (bad, 1)):
        proc = subprocess.run(
            argv,
            cwd=repo,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=hook_env(PRE_COMMIT_FROM_REF="0" * 40, PRE_COMMIT_TO_REF=sha),
        )
        assert proc.returncode == code, proc.stderr
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr
    # A push carrying the root commit: the framework sets only the local ref.
    proc = subprocess.run(
        argv,
        cwd=repo,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=hook_env(PRE_COMMIT_LOCAL_BRANCH="HEAD", PRE_COMMIT_REMOTE_NAME="origin"),
    )
    assert proc.returncode == 1, proc.stderr
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr


# --------------------------------------------------------------------------- light imports


@pytest.mark.parametrize("module", ["pre_commit", "pre_merge_commit"])
@pytest.mark.parametrize("change", ["dlm", "source", "retrained"])
def test_pre_commit_never_imports_heavy_modules(
    retrained_repo: Path, change: str, module: str
) -> None:
    repo = retrained_repo
    if change == "dlm":  # refused early (stale .dlm)
        git(repo, "add", DLM)
    elif change == "source":  # refused after re-expanding the staged sources
        with open(repo / SOURCE, "a", encoding="utf-8") as fh:
            fh.write("more\n")
        git(repo, "add", SOURCE)
    else:  # the retrained outputs: passes, after running every check
        git(repo, "add", "-A")
    argv = [sys.executable, "-X", "importtime", "-m", f"dlm_git.hooks.{module}"]
    proc = sh(repo, *argv, check=False)
    assert proc.returncode == (0 if change == "retrained" else 1), proc.stderr
    modules = imported_modules(proc.stderr)
    assert "dlm_git" in modules and "yaml" in modules  # the import log was read
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_pre_push_never_imports_heavy_modules(repo: Path) -> None:
    sha = head(repo)
    line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dlm_git.hooks.pre_push", "origin", "x"],
        cwd=repo,
        input=line,
        capture_output=True,
        text=True,
        env=hook_env(),
    )
    assert proc.returncode == 0, proc.stderr
    modules = imported_modules(proc.stderr)
    assert "dlm_git" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_pre_push_with_a_cold_base_cache_never_imports_heavy_modules(
    repo: Path, tmp_path: Path
) -> None:
    sha = head(repo)
    line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"

    def pre_push() -> tuple[subprocess.CompletedProcess[str], set[str]]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "dlm_git.hooks.pre_push", "origin", "x"],
            cwd=repo,
            input=line,
            capture_output=True,
            text=True,
            env=hook_env(DLM_GIT_BASE_CACHE=str(tmp_path / "cold-base-cache")),
        )
        return proc, imported_modules(proc.stderr)

    proc, modules = pre_push()
    assert "dlm_git" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    # the pipeline's own build (bases/tiny) serves as the base: the push verifies
    assert proc.returncode == 0, proc.stderr

    # no built base anywhere: never built inside the hook; the push warns (CANNOT_VERIFY)
    shutil.rmtree(repo / "bases" / "tiny")
    proc, modules = pre_push()
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlm-git:")]
    assert any("WARN" in ln and "CANNOT_VERIFY" in ln for ln in said), said
