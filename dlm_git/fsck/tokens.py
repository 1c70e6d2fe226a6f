"""`dlm-git fsck` over the token cache (`dlm_git.cache`): the cache walks itself and judges
its own files; fsck reads them and reports.

Invariants:
- Every entry file and pack of the cache's own walk (`CacheLayout.files`) is read once and
  judged by `dlm_git.cache.check.check_file` (the formats' decoders and the checksum they
  embed). One that fails is `corrupted`, a failure: the cache itself would only count it
  as a miss, but a file that fails its checksum is a disk or a bug worth knowing about.
  Files of another format version are counted, not judged; tmp files are not checked.
- A file the stat record vouches for (`blake3:<its checksum>`) is not re-read.
- Without the training stack (numpy) the files are counted, not checked, and a note says
  what to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git.cache.layout import CacheFile, CacheLayout, Kind
from dlm_git.errors import missing_stack_module
from dlm_git.fsck.report import Area, Finding, State, TokenCounts
from dlm_git.fsck.scan import Pass, Unreadable, read_bytes, regular_stamp

if TYPE_CHECKING:
    from dlm_git.cache.check import FileState


def check_tokens(run: Pass, tokens: Path) -> TokenCounts:
    """Check every entry file and pack of the token cache at `tokens`; findings go to
    `run`."""
    found = [f for f in CacheLayout(tokens).files() if f.kind in (Kind.ENTRY, Kind.PACK)]
    display = run.display(tokens)
    try:
        from dlm_git.cache.check import FileState  # needs numpy
    except ImportError as exc:
        module = missing_stack_module(exc)
        if module is None:
            raise
        if found:
            run.notes.append(
                f"token cache: {len(found)} files not checked: decoding them needs {module}"
                " (pip install 'dlm-git[train]')"
            )
        return TokenCounts(display, len(found), 0, 0, 0, checked=False)
    counts = {state: 0 for state in FileState}
    for file in found:
        counts[_check_one(run, file)] += 1
    return TokenCounts(
        display,
        len(found),
        counts[FileState.OK],
        counts[FileState.CORRUPT],
        counts[FileState.OTHER_VERSION],
        checked=True,
    )


def _check_one(run: Pass, file: CacheFile) -> FileState:
    """The state of one file (a finding made when it is corrupt)."""
    from dlm_git.cache.check import FileState, check_file

    key, lstamp = str(file.path), regular_stamp(file.entry)
    recorded = run.record.verified(key, lstamp) if lstamp is not None else None
    if lstamp is not None and recorded is not None and recorded.startswith("blake3:"):
        run.unchanged += 1
        run.record.carry(key, lstamp)
        return FileState.OK
    try:
        stamped, data = read_bytes(file.path)
    except Unreadable as exc:
        _corrupted(run, file, str(exc))
        return FileState.CORRUPT
    run.hashed += 1
    verdict = check_file(file, data)
    if verdict.state is FileState.CORRUPT:
        _corrupted(run, file, verdict.detail)
    elif verdict.state is FileState.OK and stamped.stamp is not None:
        run.record.keep(key, stamped.stamp, f"blake3:{verdict.checksum}", stamped.seen_ns)
    return verdict.state


def _corrupted(run: Pass, file: CacheFile, detail: str) -> None:
    path = file.path
    run.findings.append(
        Finding(Area.TOKENS, State.CORRUPTED, run.display(path), None, detail, None, path)
    )
