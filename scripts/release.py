"""`make release [SIGNING_KEY=KEY.pem]`: dlm-git's wheel and sdist, built reproducibly from
the commit HEAD, into dist/, each with its sha256 (and, with a key, its signature).

Invariants:
- What is built is a commit, never the work tree: the revision's (HEAD's) tree written
  from git's raw objects with their tree modes (`export`: no `git archive`, so no git
  config, autocrlf or filter changes a byte; a symlink or submodule in it is refused),
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
- `--key` is checked before anything is built: model_signing imports and the file is an
  EC private key PEM (`create.check_signing_key`), else one line naming it, exit 2.
  Everything is made in a temporary directory beside the output directory and moved
  into it only when all of it was made: a failed build or signature leaves `--out` as
  it was.
- Prints `SHA256  NAME` per artifact; a failed step is one line on stderr and exit 1
  (exit 2 for a wrong command line).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dlm_git import gitio, paths
from dlm_git.errors import DlmGitError, EnvironmentFailure
from dlm_git.fsutil import digest_regular, fsync_dir
from dlm_git.output import printable
from dlm_git.sign.artifact import SIGNATURE_SUFFIX, signature_path
from dlm_git.sign.create import check_signing_key, model_signing_bundle


def git(*args: str, cwd: Path) -> str:
    """`git <args>`'s stdout, stripped, through dlm-git's one git door (`gitio.git`: replace
    refs and grafts off, as for the tree `export` reads; a failure is one `GitError` line)."""
    return gitio.git(args, cwd).decode("utf-8", "surrogateescape").strip()


def export(root: Path, commit: str, into: Path) -> None:
    """The commit's tree written into `into` from git's own objects: each blob's raw bytes
    with its tree mode (0644, or 0755 when executable). No `git archive` or checkout, so no
    git config (core.autocrlf, eol and filter attributes, export-ignore) changes a byte."""
    entries = gitio.tree_entries([], root, commit, recursive=True, check=True)
    for mode, _, _, path in entries:
        why = paths.problem(path)
        if why is not None or mode not in ("100644", "100755"):
            what = why.value if why is not None else f"has mode {mode} (not a regular file)"
            where = f"{commit[:12]}:{printable(path)}"
            raise EnvironmentFailure(where, what, "a release holds regular files only")
    blobs = gitio.read_blobs([oid for _, _, oid, _ in entries], root)
    for mode, _, oid, path in entries:
        data = blobs.get(oid)
        if data is None:
            raise EnvironmentFailure(f"{commit[:12]}:{printable(path)}", "cannot be read")
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if mode == "100755" else 0o644)


def build(root: Path, rev: str, into: Path) -> list[Path]:
    """The wheel and sdist of `rev`, built into the empty directory `into`."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}", cwd=root)
    epoch = git("log", "-1", "--format=%ct", commit, cwd=root)
    if git("status", "--porcelain", "--untracked-files=no", cwd=root):
        note = f"release: building {commit[:12]}; uncommitted changes are not in it"
        print(note, file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="dlm-git-release.") as tmp:
        source = Path(tmp) / "src"
        export(root, commit, source)
        env = {**os.environ, "SOURCE_DATE_EPOCH": epoch, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(into), "."]
        proc = subprocess.run(argv, cwd=source, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
            raise EnvironmentFailure("python -m build", tail[0][:200])
    return sorted(into.iterdir())


def stage(root: Path, rev: str, key: Path | None, staging: Path) -> list[str]:
    """Everything the release writes, made in `staging`: the artifacts, their signatures
    (with `key`) and SHA256SUMS; the `SHA256  NAME` lines."""
    artifacts = build(root, rev, staging)
    lines = [f"{digest_regular(a, 'sha256')}  {a.name}" for a in artifacts]
    if key is not None:
        for artifact in artifacts:
            signature_path(artifact).write_bytes(model_signing_bundle(artifact, key, []))
    (staging / "SHA256SUMS").write_bytes("".join(f"{line}\n" for line in lines).encode())
    return lines


def install(staging: Path, out: Path, names: list[str], signed: bool) -> None:
    """Move the staged release into `out`: a signature an earlier build left beside an
    artifact of the same name goes first (unsigned) or is replaced (signed)."""
    out.mkdir(exist_ok=True)
    for name in names:
        if signed:
            os.replace(signature_path(staging / name), signature_path(out / name))
        else:
            signature_path(out / name).unlink(missing_ok=True)
        os.replace(staging / name, out / name)
    os.replace(staging / "SHA256SUMS", out / "SHA256SUMS")
    fsync_dir(out)


def release(rev: str, out: Path, key: Path | None) -> list[str]:
    """Build, sign and install the release into `out`; nothing lands there unless all of
    it was made."""
    root = Path(git("rev-parse", "--show-toplevel", cwd=Path.cwd()))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".dlm-git-release.", dir=out.parent))
    try:
        lines = stage(root, rev, key, staging)
        install(staging, out, [line.split("  ", 1)[1] for line in lines], key is not None)
        return lines
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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
            check_signing_key(args.key)
        lines = release(args.rev, args.out.resolve(), args.key)
        print("\n".join(lines), flush=True)
        if args.key is not None:
            names = [line.split("  ", 1)[1] + SIGNATURE_SUFFIX for line in lines]
            print(f"signed: {', '.join(names)}")
    except OSError as exc:
        print(f"release: {EnvironmentFailure.from_os_error(exc).one_line()}", file=sys.stderr)
        return 1
    except DlmGitError as exc:
        print(f"release: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
