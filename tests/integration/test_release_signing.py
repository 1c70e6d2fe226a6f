"""`make release` signs dlm-git's own artifacts, and `dlm-git self-verify` checks one
against a key the auditor trusts (issue 29).

A repository holding this checkout's files, committed; `scripts/release.py --key` (what
`make release SIGNING_KEY=...` runs) builds its wheel and sdist into dist/ with SHA256SUMS
and a model_signing bundle per artifact, made by `dlm-git sign`'s own signing function
with a key pair from the real `dlm-git keygen`. Verified: each artifact under its key,
by `dlm-git self-verify` and by the stock `model_signing verify key`. Failed (exit 1,
one line saying why): a byte changed, another key, a signature for another artifact, a
signature that is not a bundle. Misuse (exit 2): a private key given as the trusted key,
a missing artifact. A second release of the same commit gives the same bytes.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from dlm_git.sign.trust import key_hint
from tests.support.cli import Run, dlm_git, run_cmd
from tests.support.env import VENV_BIN
from tests.support.gitrepo import commit_all, init_repo
from tests.support.release import RELEASE_SCRIPT, copy_checkout
from tests.support.signing import keygen

pytestmark = pytest.mark.slow

WHEEL = "dlm_git-0.1.0-py3-none-any.whl"
SDIST = "dlm_git-0.1.0.tar.gz"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the repository, its dist/, the directory of the keys alice and mallory)."""
    base = tmp_path_factory.mktemp("release")
    repo = copy_checkout(init_repo(base / "repo"))
    commit_all(repo, "a release")
    keys = base / "keys"
    for who in ("alice", "mallory"):
        (keys / who).mkdir(parents=True)
        keygen(keys / who)
    key = keys / "alice" / "dlm-signing-key.pem"
    out = run_cmd([sys.executable, str(RELEASE_SCRIPT), "--key", str(key)], repo, check=True)
    lines = out.stdout.splitlines()
    assert lines[-1] == f"signed: {WHEEL}.sig, {SDIST}.sig", out.stdout
    dist = repo / "dist"
    assert (dist / "SHA256SUMS").read_text("utf-8").splitlines() == lines[:2]
    return repo, dist, keys


def pub(keys: Path, who: str) -> str:
    return str(keys / who / "dlm-signing-key.pub.pem")


@pytest.mark.parametrize("name", [WHEEL, SDIST])
def test_each_artifact_verifies_under_its_key(released: tuple[Path, Path, Path], name: str) -> None:
    repo, dist, keys = released
    result = dlm_git(repo, "self-verify", str(dist / name), "--key", pub(keys, "alice"))
    assert result.code == 0, result.stdout + result.stderr
    sums = dict(line.split("  ")[::-1] for line in (dist / "SHA256SUMS").read_text().splitlines())
    hint = key_hint(Path(pub(keys, "alice")).read_bytes())[:16]
    assert result.stdout == (
        f"{dist / name}: VERIFIED sha256 {sums[name]}: signed by {pub(keys, 'alice')} ({hint}…)\n"
    )
    stock = run_cmd(
        [
            str(VENV_BIN / "model_signing"),
            "verify",
            "key",
            str(dist / name),
            "--signature",
            str(dist / f"{name}.sig"),
            "--public_key",
            pub(keys, "alice"),
        ],
        repo,
    )
    assert stock.code == 0 and "Verification succeeded" in stock.stdout + stock.stderr


def test_a_changed_byte_fails(released: tuple[Path, Path, Path], tmp_path: Path) -> None:
    repo, dist, keys = released
    wheel = tmp_path / WHEEL
    data = bytearray((dist / WHEEL).read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    shutil.copy(dist / f"{WHEEL}.sig", tmp_path / f"{WHEEL}.sig")
    result = dlm_git(repo, "self-verify", str(wheel), "--key", pub(keys, "alice"))
    assert result.code == 1 and result.stderr == "", result.stdout + result.stderr
    assert result.stdout.startswith(f"{wheel}: FAILED sha256 ")
    assert "signs other bytes" in result.stdout and len(result.stdout.splitlines()) == 1


def test_another_key_fails(released: tuple[Path, Path, Path]) -> None:
    repo, dist, keys = released
    result = dlm_git(repo, "self-verify", str(dist / SDIST), "--key", pub(keys, "mallory"))
    assert result.code == 1, result.stdout + result.stderr
    assert "FAILED sha256 " in result.stdout and "not by " + pub(keys, "mallory") in result.stdout


def test_another_artifacts_signature_fails(released: tuple[Path, Path, Path]) -> None:
    repo, dist, keys = released
    result = dlm_git(
        repo,
        "self-verify",
        str(dist / SDIST),
        "--key",
        pub(keys, "alice"),
        "--signature",
        str(dist / f"{WHEEL}.sig"),
    )
    assert result.code == 1 and "signs other bytes" in result.stdout, result.stdout


def test_a_signature_that_is_not_a_bundle_fails(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, dist, keys = released
    sig = tmp_path / "forged.sig"
    sig.write_bytes((dist / f"{WHEEL}.sig").read_bytes()[:200])
    result = dlm_git(
        repo, "self-verify", str(dist / WHEEL), "--key", pub(keys, "alice"), "--signature", str(sig)
    )
    assert result.code == 1 and "is not JSON" in result.stdout, result.stdout + result.stderr
    sig.write_bytes(b" " * (2 << 20))  # past the bundle's cap: judged, not refused as misuse
    result = dlm_git(
        repo, "self-verify", str(dist / WHEEL), "--key", pub(keys, "alice"), "--signature", str(sig)
    )
    assert result.code == 1 and "larger than" in result.stdout, result.stdout + result.stderr


def test_misuse_is_one_line_exit_2(released: tuple[Path, Path, Path], tmp_path: Path) -> None:
    repo, dist, keys = released
    private = str(keys / "alice" / "dlm-signing-key.pem")
    result = dlm_git(repo, "self-verify", str(dist / WHEEL), "--key", private)
    result.one_line_error(2, private, "is not an EC public key PEM")
    missing = str(dist / "dlm_git-9.9.9.tar.gz")
    dlm_git(repo, "self-verify", missing, "--key", pub(keys, "alice")).one_line_error(2, missing)
    fifo = tmp_path / "fifo.sig"
    os.mkfifo(fifo)
    args = ["self-verify", str(dist / WHEEL), "--key", pub(keys, "alice"), "--signature"]
    dlm_git(repo, *args, str(fifo)).one_line_error(2, str(fifo), "is a FIFO")


def test_a_second_release_of_the_commit_is_the_same_bytes(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, dist, _ = released
    again = tmp_path / "again"
    out = run_cmd([sys.executable, str(RELEASE_SCRIPT), "--out", str(again)], repo, check=True)
    assert out.stdout.splitlines() == (dist / "SHA256SUMS").read_text("utf-8").splitlines()
    assert sorted(p.name for p in again.iterdir()) == ["SHA256SUMS", WHEEL, SDIST]


def test_a_missing_signing_key_is_refused_before_anything_is_built(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, _, keys = released
    missing, out = keys / "nobody.pem", tmp_path / "out"
    argv = [sys.executable, str(RELEASE_SCRIPT), "--out", str(out), "--key", str(missing)]
    run_cmd(argv, repo).one_line_error(2, str(missing), "dlm-git keygen")
    assert not out.exists()


def test_installed_checks_the_running_dlm_git_against_the_wheel(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`--installed`: the dlm-git that runs the check (here the wheel installed into a
    directory first on the import path) is exactly the verified wheel's files; a changed
    file and an added one fail, each named; an sdist cannot be compared (exit 2)."""
    _, dist, keys = released
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    run_cmd([*pip, str(dist / WHEEL)], tmp_path, check=True)
    argv = [sys.executable, "-m", "dlm_git", "self-verify", "--installed"]
    argv += ["--key", pub(keys, "alice")]

    def self_verify(artifact: str) -> Run:
        return run_cmd([*argv, str(dist / artifact)], tmp_path, PYTHONPATH=str(target))

    ok = self_verify(WHEEL)
    assert ok.code == 0, ok.stdout + ok.stderr
    with zipfile.ZipFile(dist / WHEEL) as wheel:
        files = sum(1 for name in wheel.namelist() if name.startswith("dlm_git/"))
    assert files > 100
    assert ok.stdout.endswith(f"the running dlm-git ({target / 'dlm_git'}) is its {files} files\n")
    with (target / "dlm_git" / "cli.py").open("a") as fh:
        fh.write("# one line more\n")
    (target / "dlm_git" / "extra.py").write_text("", "utf-8")
    bad = self_verify(WHEEL)
    assert bad.code == 1 and ": FAILED sha256 " in bad.stdout, bad.stdout + bad.stderr
    assert bad.stdout.rstrip().endswith(
        "is not this release: dlm_git/cli.py differs; dlm_git/extra.py is not in the release"
    )
    self_verify(SDIST).one_line_error(2, SDIST, "is not a wheel")
