"""dlm-git's own packaging, as the release tests drive it: a copy of this checkout (the
files git tracks or would track, uncommitted edits included), and `python -m build` of a
source tree under a chosen umask and SOURCE_DATE_EPOCH, offline (`--no-isolation`: the
venv's locked setuptools and build)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.env import run

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCRIPT = REPO_ROOT / "scripts" / "release.py"


def checkout_files() -> list[str]:
    """This checkout's files as `git ls-files` lists them: tracked, and untracked ones git
    does not ignore (what the next commit would hold), that exist in the work tree."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout
    names = sorted({n.decode() for n in out.split(b"\0") if n})
    return [n for n in names if (REPO_ROOT / n).is_file() and not (REPO_ROOT / n).is_symlink()]


def copy_checkout(dest: Path) -> Path:
    """The checkout's files (`checkout_files`) copied into `dest`, with their modes."""
    for name in checkout_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, target)
    return dest


def build(source: Path, out: Path, *, umask: int, epoch: int) -> dict[str, str]:
    """`python -m build --no-isolation` of `source` into `out` under `umask`; the sha256 of
    each artifact by file name."""
    script = f'umask {umask:03o}; exec "$0" -m build --no-isolation --outdir "$1" .'
    run(
        ["sh", "-c", script, sys.executable, str(out)],
        source,
        timeout=300,
        SOURCE_DATE_EPOCH=str(epoch),
        PYTHONDONTWRITEBYTECODE="1",
    )
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}
