"""`make release [SIGNING_KEY=KEY.pem]`: dlm-git's wheel and sdist, built reproducibly from
the commit HEAD, into dist/, each with its sha256 (and, with a key, its signature).

Invariants:
- What is built is a commit, never the work tree: a `git archive` of the revision (HEAD),
  dated by the commit (SOURCE_DATE_EPOCH = its committer time) and built by this venv's
  locked `build` and setuptools without network (`python -m build --no-isolation`)
  through dlm-git's reproducible backend (build_backend/dlm_git_build.py): the same
  commit gives the same bytes on every machine with the same lock.
- The output directory receives the two artifacts, `SHA256SUMS` (as `sha256sum` writes
  it) and, with `--key`, each artifact's `NAME.sig`, made by the one signing function
  (`dlm_git.sign.create.model_signing_bundle`), which `dlm-git self-verify NAME --key
  PUB.pem` and the stock `model_signing verify key` check. A signature left there by an
  earlier build of the same name is removed before the new bytes land, never left
  beside them.
- Prints `SHA256  NAME` per artifact; a failed step is one line on stderr and exit 1
  (exit 2 for a wrong command line).
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from dlm_git.errors import DlmGitError, EnvironmentFailure, UsageError
from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, digest_regular, read_regular
from dlm_git.sign.artifact import signature_path
from dlm_git.sign.create import KEY_HINT, model_signing_bundle
from dlm_git.sign.trust import MAX_KEY_BYTES


def git(*args: str, cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvironmentFailure(f"git {args[0]}", proc.stderr.strip()[:200] or "failed")
    return proc.stdout.strip()


def export(root: Path, commit: str, into: Path) -> None:
    """The commit's tree (`git archive`), unpacked into `into`."""
    proc = subprocess.run(["git", "archive", "--format=tar", commit], cwd=root, capture_output=True)
    if proc.returncode != 0:
        raise EnvironmentFailure("git archive", proc.stderr.decode(errors="replace")[:200])
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(into, filter="data")


def build(root: Path, rev: str, out: Path) -> list[Path]:
    """The wheel and sdist of `rev` in `out` (replacing same-named ones and their .sig)."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}", cwd=root)
    epoch = git("log", "-1", "--format=%ct", commit, cwd=root)
    if git("status", "--porcelain", "--untracked-files=no", cwd=root):
        note = f"release: building {commit[:12]}; uncommitted changes are not in it"
        print(note, file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="dlm-git-release.") as tmp:
        source, built = Path(tmp) / "src", Path(tmp) / "dist"
        export(root, commit, source)
        env = {**os.environ, "SOURCE_DATE_EPOCH": epoch, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(built), "."]
        proc = subprocess.run(argv, cwd=source, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
            raise EnvironmentFailure("python -m build", tail[0][:200])
        out.mkdir(parents=True, exist_ok=True)
        artifacts = []
        for made in sorted(built.iterdir()):
            signature_path(out / made.name).unlink(missing_ok=True)
            os.replace(made, out / made.name)
            artifacts.append(out / made.name)
    return artifacts


def check_key(key: Path) -> None:
    """Before the build: a key path that is missing or not a regular file fails at once."""
    try:
        read_regular(key, MAX_KEY_BYTES, hint=KEY_HINT)
    except NotRegularFile as exc:
        raise UsageError(exc.subject, exc.message, KEY_HINT) from None
    except OSError as exc:
        raise UsageError(str(key), exc.strerror or "cannot be read", KEY_HINT) from None


def sign(artifacts: list[Path], key: Path) -> None:
    for artifact in artifacts:
        atomic_write_bytes(signature_path(artifact), model_signing_bundle(artifact, key, []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dist"), help="default: dist/")
    parser.add_argument(
        "--key",
        type=lambda text: Path(os.path.expanduser(text)),
        help="EC private key PEM: sign each artifact",
    )
    parser.add_argument("--rev", default="HEAD", help="the commit to build (default: HEAD)")
    args = parser.parse_args(argv)
    try:
        if args.key is not None:
            check_key(args.key)
        root = Path(git("rev-parse", "--show-toplevel", cwd=Path.cwd()))
        artifacts = build(root, args.rev, args.out.resolve())
        lines = [f"{digest_regular(a, 'sha256')}  {a.name}" for a in artifacts]
        sums = "".join(f"{line}\n" for line in lines).encode()
        atomic_write_bytes(args.out / "SHA256SUMS", sums)
        print("\n".join(lines), flush=True)
        if args.key is not None:
            sign(artifacts, args.key)
            print(f"signed: {', '.join(signature_path(a).name for a in artifacts)}")
    except OSError as exc:
        print(f"release: {EnvironmentFailure.from_os_error(exc).one_line()}", file=sys.stderr)
        return 1
    except DlmGitError as exc:
        print(f"release: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
