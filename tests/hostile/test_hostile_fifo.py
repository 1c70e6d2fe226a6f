"""A FIFO where dlm-git expects a regular file is one line naming it, never a hang.

A FIFO's `open()` blocks until a writer comes, and none ever does. dlm-git opens what it
reads from a cache (DVC's objects and `.dir` listings, the token cache), from a commit's
checkout or from a configured path (the signing key, `dlm-git.trustedKeys`) without
blocking and checks it is a regular file before reading it (`dlm_git.fsutil`). Each
command runs as a subprocess under a timeout, so a hang fails its test instead of the
suite: `verify`, `fsck` (and `--repair`), the pre-commit hook, `sign`,
`verify --require-signature`, and `tokenize` over a token cache holding a FIFO.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cli import Run, dlm_git, run_cmd
from tests.support.gitrepo import commit_all, git
from tests.support.signing import keygen
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

TIMEOUT = 120
"""Seconds a command may take here; the honest ones take a few."""


@pytest.fixture
def repo(tmp_path: Path, verified_repo: Path) -> Path:
    return Path(copy_repo(verified_repo, tmp_path / "repo"))


def adapter_objects(repo: Path) -> dict[str, Path]:
    """The DVC cache files of the committed adapter: its `.dir` listing ("listing") and
    its weights ("weights")."""
    from dlm_git.dvcfiles import cache_object, dir_listing

    stages = yaml.safe_load((repo / "dvc.lock").read_text("utf-8"))["stages"]
    outs = [o for s in stages.values() for o in s.get("outs") or []]
    md5 = next(o["md5"] for o in outs if o["path"] == f"{DOC}/adapter")
    listing = dir_listing(repo, md5)
    assert listing is not None
    return {
        "listing": cache_object(repo, md5),
        "weights": cache_object(repo, listing["adapter_model.safetensors"]),
    }


def make_fifo(path: Path) -> Path:
    """Replace the file at `path` (if any) by a FIFO no one will ever write."""
    if path.exists():
        path.chmod(0o644)
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def bounded(cwd: Path, *args: str) -> Run:
    try:
        return dlm_git(cwd, *args, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"dlm-git {' '.join(args)} hung on a FIFO (killed after {TIMEOUT} s)")


@pytest.mark.parametrize("what", ["listing", "weights"])
def test_verify_names_a_fifo_in_the_dvc_cache(repo: Path, what: str) -> None:
    fifo = make_fifo(adapter_objects(repo)[what])
    bounded(repo, "verify", "HEAD").one_line_error(1, str(fifo), "FIFO", "dvc fetch")


@pytest.mark.parametrize("what", ["listing", "weights"])
def test_fsck_finds_a_fifo_in_the_dvc_cache_corrupted(repo: Path, what: str) -> None:
    fifo = make_fifo(adapter_objects(repo)[what])
    result = bounded(repo, "fsck", "--json")
    assert result.code == 1, result.stdout + result.stderr
    bad = [o for o in json.loads(result.stdout)["objects"] if o["state"] == "corrupted"]
    assert [o["path"] for o in bad] == [fifo.relative_to(repo).as_posix()], bad
    assert "FIFO" in bad[0]["detail"], bad


def test_fsck_repair_moves_a_fifo_aside(repo: Path) -> None:
    fifo = make_fifo(adapter_objects(repo)["weights"])
    result = bounded(repo, "fsck", "--repair", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    repairs = json.loads(result.stdout)["repairs"]
    assert [r["path"] for r in repairs] == [fifo.relative_to(repo).as_posix()], repairs
    assert not fifo.exists() and (repo / repairs[0]["quarantine"]).is_fifo()


def test_the_pre_commit_hook_names_a_fifo_in_the_dvc_cache(repo: Path) -> None:
    fifo = make_fifo(adapter_objects(repo)["weights"])
    with open(repo / DOC / "notes" / "README.md", "a", encoding="utf-8") as fh:
        fh.write("\nA staged source: the hook checks the document's adapter.\n")
    git(repo, "add", f"{DOC}/notes/README.md")
    try:
        result = run_cmd([sys.executable, "-m", "dlm_git.hooks.pre_commit"], repo, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the pre-commit hook hung on a FIFO (killed after {TIMEOUT} s)")
    result.one_line_error(1, str(fifo), "FIFO")


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A key pair made by `dlm-git keygen`, outside every repository."""
    return keygen(tmp_path_factory.mktemp("keys"), timeout=TIMEOUT)


def test_sign_names_a_fifo_given_as_the_key(repo: Path, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "key.pem")
    bounded(repo, "sign", "--doc", DOC, "--key", str(fifo)).one_line_error(1, str(fifo), "FIFO")
    assert not (repo / DOC / "dlm.sig").exists()


def test_sign_names_a_fifo_configured_as_the_key(repo: Path, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "configured.pem")
    git(repo, "config", "dlm-git.signingKey", str(fifo))
    bounded(repo, "sign", "--doc", DOC).one_line_error(1, str(fifo), "FIFO")


@pytest.mark.parametrize("where", ["absolute", "in-work-tree"])
def test_verify_require_signature_names_a_fifo_trusted_key(
    repo: Path, tmp_path: Path, key_pair: tuple[Path, Path], where: str
) -> None:
    private, public = key_pair
    signed = bounded(repo, "sign", "--doc", DOC, "--key", str(private))
    assert signed.code == 0, signed.stderr
    commit_all(repo, "sign demo")
    git(repo, "config", "--add", "dlm-git.trustedKeys", str(public))
    if where == "absolute":
        fifo = make_fifo(tmp_path / "trusted.pem")
        value = str(fifo)
    else:  # a relative path is taken from the work tree's root
        fifo = make_fifo(repo / "trusted-local.pem")
        value = "trusted-local.pem"
    git(repo, "config", "--add", "dlm-git.trustedKeys", value)
    result = bounded(repo, "verify", "HEAD", "--require-signature")
    result.one_line_error(2, "dlm-git.trustedKeys", value, "FIFO")


def test_a_fifo_in_the_token_cache_is_a_miss(repo: Path) -> None:
    first = bounded(repo, "tokenize", DOC, "--json")
    assert first.code == 0, first.stderr
    cache = Path(json.loads(first.stdout)["cache"]["path"])
    packs = sorted((cache / "packs").iterdir())
    entries = sorted((cache / "entries").rglob("*.tok"))
    assert packs, "tokenize wrote a pack"
    fifos = [make_fifo(packs[0]), *(make_fifo(p) for p in entries[:2])]
    again = bounded(repo, "tokenize", DOC, "--json")
    assert again.code == 0, again.stderr
    assert json.loads(again.stdout)["stream_root"] == json.loads(first.stdout)["stream_root"]
    assert all(p.is_file() and not p.is_fifo() for p in fifos[:1])  # the pack is rewritten
