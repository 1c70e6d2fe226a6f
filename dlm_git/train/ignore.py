"""Keep a training's outputs out of git from the moment they are written.

Invariants:
- Before a training writes anything, every output git must never stage (`adapter/`,
  `segments/`, `tokens/`: DVC's; `run.json` and a killed run's staging directories:
  machine-local) that git does not already ignore gets a line in the document
  directory's `.gitignore`. So `git add -A` after `dlm-git train` stages the records and
  that `.gitignore`, never a weight file, in a DVC project or not.
- The lines are DVC's own form (`/adapter`, one per out, anchored to the directory), in
  the file DVC writes for a stage's outs: `dvc repro` finds them ignored and adds none,
  `dvc remove` takes them away as its own. The file is committed, so the rule holds on a
  clone; `.git/info/exclude` would not, and DVC would then write no rule of its own.
- Whether a path is ignored is git's answer (`git check-ignore --no-index`: `.gitignore`
  files, `info/exclude`, `core.excludesFile`), never a reading of patterns here. Outside
  a git work tree nothing is written.
- The `.gitignore` is read only as a regular file, never through a link (a clone's
  `.gitignore -> /elsewhere` would copy that file into the work tree): anything else is
  one line and the training stops before writing anything.
- What was added is said once, on the user's stderr (`dlm_git.train.progress.notice`:
  a training in a child says it through its parent).
"""

from __future__ import annotations

import os
from pathlib import Path

from dlm_git.fsutil import atomic_write_bytes, read_regular
from dlm_git.gitio.process import run_git
from dlm_git.layout import ADAPTER_DIR, RUN_RECORD_NAME, SEGMENTS_DIR, TOKENS_DIR, DocLayout
from dlm_git.train.progress import notice

GITIGNORE = ".gitignore"
MAX_GITIGNORE_BYTES = 1 << 20

OUTPUT_RULES: tuple[tuple[str, str], ...] = (
    (f"/{ADAPTER_DIR}", f"{ADAPTER_DIR}/"),
    (f"/{SEGMENTS_DIR}", f"{SEGMENTS_DIR}/"),
    (f"/{TOKENS_DIR}", f"{TOKENS_DIR}/"),
    (f"/{RUN_RECORD_NAME}", RUN_RECORD_NAME),
    (f"/.{ADAPTER_DIR}.*", f".{ADAPTER_DIR}.new.1.x/"),
    (f"/.{SEGMENTS_DIR}.*", f".{SEGMENTS_DIR}.new.1.x/"),
)
"""Each output's line and a path it must cover (relative to the document directory; a
trailing slash: a directory), the staging directories by one of their names
(`dlm_git.train.adapter.staging_dir`)."""


def ignore_outputs(layout: DocLayout) -> list[str]:
    """Add the lines git lacks for `layout`'s outputs to its directory's `.gitignore`
    (said in one line on stderr); the lines added."""
    directory = layout.directory
    missing = _not_ignored(directory, [probe for _, probe in OUTPUT_RULES])
    if missing is None:
        return []
    lines = [line for line, probe in OUTPUT_RULES if probe in missing]
    if not lines:
        return []
    path = directory / GITIGNORE
    # never through a link: a committed `.gitignore -> /elsewhere` would copy that file in
    exists = os.path.lexists(path)
    text = read_regular(path, MAX_GITIGNORE_BYTES, follow_symlinks=False) if exists else b""
    sep = b"" if not text or text.endswith(b"\n") else b"\n"
    atomic_write_bytes(path, text + sep + "".join(f"{line}\n" for line in lines).encode())
    notice(f"{path}: added {', '.join(lines)} (train's outputs stay out of git; commit it)")
    return lines


def _not_ignored(directory: Path, probes: list[str]) -> set[str] | None:
    """The probes git does not ignore in `directory` (None: not in a git work tree)."""
    inside = run_git(["rev-parse", "--is-inside-work-tree"], directory)
    if inside.returncode != 0 or inside.stdout.strip() != b"true":
        return None
    payload = b"".join(p.encode() + b"\0" for p in probes)
    proc = run_git(["check-ignore", "--no-index", "--stdin", "-z"], directory, payload)
    if proc.returncode not in (0, 1):  # 1: none of them is ignored
        return None
    ignored = {name.decode() for name in proc.stdout.split(b"\0") if name}
    return {p for p in probes if p not in ignored}
