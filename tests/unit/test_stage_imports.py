"""The pipeline's light stages start no training stack (issue 28: each `dvc repro` stage
is a fresh interpreter, and torch, transformers and peft are most of its cost).

`inputs`, `base resolve` and `verify --worktree --level hash` read records and hash files:
they import none of `tests/support/cli.HEAVY`, on a trained repository as `dvc repro`
runs them. `base resolve --tiny-dir bases/tiny` in a fresh repository takes the tiny base
from the base cache's build (`dlm_git/base/tiny.install_tiny_dir`), byte for byte, without
starting torch; a cache that holds anything but exactly a build's files is not copied,
and `base build --out` builds, never copies (it is how a user checks the cache).
`eval` refuses an untrained document before it starts the stack; `train` and `eval`
itself need the stack and are not here (nor `tokenize` without its token cache, which
needs no torch for a base `dlm_git.train.fasttok` takes: tests/unit/test_tokenize_fast_path.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlm_git.base.tiny import TINY_FILES, ensure_tiny_base
from tests.support.cli import imports_of
from tests.support.env import run
from tests.support.gitrepo import init_repo
from tests.support.verified import DOC, copy_repo

TINY = "bases/tiny"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture
def fresh_repo(tmp_path: Path) -> Path:
    """`dlm-git init --doc demo`: the pipeline's first `dvc repro` has not run."""
    repo = init_repo(tmp_path / "repo")
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    return repo


@pytest.mark.parametrize(
    "args",
    [
        ("inputs",),
        ("base", "resolve", DOC, "--tiny-dir", TINY),
        ("verify", "--worktree", "--doc", DOC, "--level", "hash", "--tiny-dir", TINY),
    ],
    ids=["inputs", "base-resolve", "verify-hash"],
)
def test_a_light_stage_of_a_trained_repo_starts_no_training_stack(
    tmp_path: Path, verified_repo: Path, args: tuple[str, ...]
) -> None:
    repo = copy_repo(verified_repo, tmp_path / "repo")
    report = ("--report", f"{DOC}/verify.json") if args[0] == "verify" else ()
    got = imports_of(repo, *args, *report)
    assert got.code == 0, got.stdout
    assert got.heavy == [], f"dlm-git {' '.join(args)} imported {got.heavy}"


def test_eval_of_an_untrained_document_refuses_before_starting_the_stack(
    fresh_repo: Path,
) -> None:
    got = imports_of(fresh_repo, "eval", DOC, "--tiny-dir", TINY)
    assert got.code == 1
    assert got.heavy == [], f"dlm-git eval imported {got.heavy} to refuse"


def test_the_first_base_stage_copies_the_cached_tiny_base_without_torch(
    fresh_repo: Path,
) -> None:
    cached = ensure_tiny_base()
    got = imports_of(fresh_repo, "base", "resolve", DOC, "--tiny-dir", TINY)
    assert got.code == 0, got.stdout
    assert not {"torch", "transformers", "peft", "tokenizers"} & got.modules, got.heavy
    assert "bases/tiny: built tiny base" in got.stdout
    assert _files(fresh_repo / TINY) == _files(cached)
    assert {p.name for p in cached.iterdir()} == TINY_FILES


@pytest.mark.parametrize("planted", ["extra-file", "other-spec"])
def test_a_cache_holding_more_than_a_build_is_not_copied_but_built_anew(
    fresh_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """A cached directory with a file no build writes (a pickle beside the weights), or
    another spec's spec file, is never copied: the stage builds the base itself, and
    what it builds is exactly a build's files, the bytes of the honest cached build."""
    honest = ensure_tiny_base()
    cache = tmp_path / "cache"
    shutil.copytree(honest, cache / honest.name)
    if planted == "extra-file":
        (cache / honest.name / "pytorch_model.bin").write_bytes(b"not a build's file")
    else:
        spec = cache / honest.name / "dlm_git_base.json"
        spec.write_bytes(spec.read_bytes().replace(b'"init_seed"', b'"init_seed" '))
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    got = imports_of(fresh_repo, "base", "resolve", DOC, "--tiny-dir", TINY)
    assert got.code == 0, got.stdout
    assert "torch" in got.modules  # built, not copied
    assert _files(fresh_repo / TINY) == _files(honest)


def test_base_build_builds_the_tiny_base_whatever_the_cache_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dlm-git base build --out DIR` is the independent build a user makes to check a
    base cache against: a cached directory with exactly a build's files and this spec's
    spec file, one weight byte changed, is not what it writes (only the pipeline's
    `--tiny-dir` copies the cache)."""
    honest = ensure_tiny_base()
    cache = tmp_path / "cache"
    shutil.copytree(honest, cache / honest.name)
    weights = cache / honest.name / "model.safetensors"
    changed = bytearray(weights.read_bytes())
    changed[-1] ^= 0x40
    weights.write_bytes(bytes(changed))
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    got = imports_of(tmp_path, "base", "build", "--out", "built")
    assert got.code == 0, got.stdout
    assert _files(tmp_path / "built") == _files(honest)
