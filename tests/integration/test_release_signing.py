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

import importlib.util
import marshal
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from dlm_git.sign.create import model_signing_bundle
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


SHADOW = b"\nimport sys as _sys\n_sys.stderr.write('shadowed\\n')\n"
"""What an attacker appends to dlm_git/errors.py's source: it runs on every dlm-git start."""


def _swapped_pyc(source: Path, payload: bytes, tag_opt: str = "") -> bytes:
    """A timestamp `.pyc` of `payload` whose header carries `source`'s date and size: import
    runs it instead of `source`."""
    code = compile(payload, str(source), "exec", dont_inherit=True)
    st = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    return header + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code)


def test_installed_refuses_links_special_files_and_foreign_bytecode(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`--installed` judges everything import may run: pip's own compiled caches pass; a
    `.pyc` swapped in with the source's date and size (import runs it), a symbolic link
    to a directory that shadows a module, a FIFO in a released file's place and bytecode
    of another interpreter or of no released source each fail, named."""
    _, dist, keys = released
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    run_cmd([*pip, str(dist / WHEEL)], tmp_path, check=True)
    package, tag = target / "dlm_git", sys.implementation.cache_tag
    cache = package / "__pycache__" / f"errors.{tag}.pyc"
    assert cache.is_file()  # pip compiled the package at install
    argv = [sys.executable, "-m", "dlm_git", "self-verify", "--installed", str(dist / WHEEL)]
    argv += ["--key", pub(keys, "alice")]

    def fails_with(problem: str) -> None:
        result = run_cmd(argv, tmp_path, PYTHONPATH=str(target))
        assert result.code == 1 and ": FAILED sha256 " in result.stdout, (
            result.stdout + result.stderr
        )
        assert result.stdout.rstrip().endswith(f"is not this release: {problem}"), result.stdout

    ok = run_cmd(argv, tmp_path, PYTHONPATH=str(target))
    assert ok.code == 0 and ": VERIFIED sha256 " in ok.stdout, ok.stdout + ok.stderr

    source = (package / "errors.py").read_bytes()
    honest = cache.read_bytes()
    cache.write_bytes(_swapped_pyc(package / "errors.py", source + SHADOW))
    ran = run_cmd([sys.executable, "-c", "import dlm_git.errors"], tmp_path, PYTHONPATH=str(target))
    assert ran.stderr == "shadowed\n"  # the hole is real: import ran the swapped bytecode
    fails_with(
        f"dlm_git/__pycache__/errors.{tag}.pyc is not the compiled source (its code differs)"
    )
    cache.write_bytes(honest)

    shadow = tmp_path / "shadow" / "errors"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_bytes(source + SHADOW)
    os.symlink(shadow, package / "errors")
    ran = run_cmd([sys.executable, "-c", "import dlm_git.errors"], tmp_path, PYTHONPATH=str(target))
    assert ran.stderr == "shadowed\n"  # a package directory comes before errors.py
    fails_with("dlm_git/errors is a symbolic link")
    os.unlink(package / "errors")

    (package / "py.typed").unlink()
    os.mkfifo(package / "py.typed")
    fails_with("dlm_git/py.typed is not a regular file")
    os.unlink(package / "py.typed")
    (package / "py.typed").write_bytes(b"")

    (package / "__pycache__" / "errors.cpython-99.pyc").write_bytes(honest)
    fails_with(
        "dlm_git/__pycache__/errors.cpython-99.pyc is bytecode of another interpreter "
        "(cpython-99): it cannot be checked here"
    )
    (package / "__pycache__" / "errors.cpython-99.pyc").unlink()
    (package / "__pycache__" / f"gone.{tag}.pyc").write_bytes(honest)
    fails_with(f"dlm_git/__pycache__/gone.{tag}.pyc is bytecode of no source in the release")


def test_a_signed_wheel_with_a_malformed_record_fails(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A RECORD csv cannot read (a field over its 128 KiB limit), in a wheel signed by the
    trusted key: `--installed` is FAILED, one line, never a traceback."""
    _, dist, keys = released
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(dist / WHEEL) as src, zipfile.ZipFile(wheel, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data += b'"' + b"x" * (200 << 10) + b'",,\n'
            dst.writestr(info, data)
    (tmp_path / f"{WHEEL}.sig").write_bytes(
        model_signing_bundle(wheel, keys / "alice" / "dlm-signing-key.pem", [])
    )
    argv = [sys.executable, "-m", "dlm_git", "self-verify", "--installed", str(wheel)]
    result = run_cmd([*argv, "--key", pub(keys, "alice")], tmp_path)
    assert result.code == 1 and result.stderr == "", result.stdout + result.stderr
    assert (
        result.stdout.startswith(f"{wheel}: FAILED sha256 ")
        and len(result.stdout.splitlines()) == 1
    )
    assert "the signed wheel's RECORD is malformed" in result.stdout


def test_the_release_does_not_depend_on_the_releasers_git_config(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """core.autocrlf=true in the releaser's global config (git archive would write CRLF
    sources): the same SHA256SUMS, since the tree is written from git's raw objects."""
    repo, dist, _ = released
    config = tmp_path / "gitconfig"
    config.write_text("[core]\n\tautocrlf = true\n", "utf-8")
    again = tmp_path / "again"
    argv = [sys.executable, str(RELEASE_SCRIPT), "--out", str(again)]
    out = run_cmd(argv, repo, check=True, GIT_CONFIG_GLOBAL=str(config))
    assert out.stdout.splitlines() == (dist / "SHA256SUMS").read_text("utf-8").splitlines()


def test_a_key_that_is_not_a_private_key_is_refused_before_anything_is_built(
    released: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The public key given as the signing key: one line naming it, exit 2, and the output
    directory exactly as it was (an earlier signature kept, nothing written unsigned)."""
    repo, _, keys = released
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{WHEEL}.sig").write_bytes(b"an earlier signature")
    public = pub(keys, "alice")
    argv = [sys.executable, str(RELEASE_SCRIPT), "--out", str(out), "--key", public]
    run_cmd(argv, repo).one_line_error(2, public, "is not an unencrypted EC private key PEM")
    assert sorted(p.name for p in out.iterdir()) == [f"{WHEEL}.sig"]
    assert (out / f"{WHEEL}.sig").read_bytes() == b"an earlier signature"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dlm-git-release.")]


def test_a_symbolic_link_in_the_tree_is_refused_naming_it(tmp_path: Path) -> None:
    """A release holds regular files only: a committed symbolic link is one line naming
    it, exit 1, before anything is built, and the output directory is not made."""
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("x\n", "utf-8")
    os.symlink("README.md", repo / "link\tname")
    commit_all(repo, "a link")
    out = tmp_path / "out"
    argv = [sys.executable, str(RELEASE_SCRIPT), "--out", str(out)]
    result = run_cmd(argv, repo)
    result.one_line_error(1, "link\\tname", "has mode 120000 (not a regular file)")
    assert not out.exists()
