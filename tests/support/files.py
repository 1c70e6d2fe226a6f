"""A directory's files as a value, so a test can say "nothing here changed" (or exactly
what did) by comparing two of them."""

from __future__ import annotations

from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes]:
    """Bytes of every file under `root` (relative POSIX path -> bytes)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def tree_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under `root`: (size, mtime_ns, bytes), so a rewrite of the same bytes
    shows too."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns, p.read_bytes())
    return out
