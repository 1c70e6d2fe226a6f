"""Whether a token-cache file is what its name says (`check_file`), for `dlm-git fsck`.

Invariants:
- An entry file passes when it decodes as a whole entry of this format under the key its
  name gives (`entry.check_entry`: magic, lengths, the embedded BLAKE3 checksum; fsck
  has no row id, so the entry's own is used) and sits in its key's shard; a pack when it
  decodes as a whole pack (`pack.decode_pack`). Nothing is judged but by the formats' own
  decoders.
- A file of another format version is `OTHER_VERSION`: not ours to judge (the cache only
  ever misses it). A tmp file or a file of another name is not an entry: not checked.
- Importing this module needs the training stack (numpy); callers without it report the
  cache unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dlm_git.cache.entry import CHECKSUM_LEN, CorruptEntry, check_entry, is_other_entry_version
from dlm_git.cache.layout import CacheFile, Kind
from dlm_git.cache.pack import decode_pack, is_other_pack_version


class FileState(StrEnum):
    OK = "ok"
    CORRUPT = "corrupt"
    OTHER_VERSION = "other-version"


@dataclass(frozen=True)
class FileCheck:
    state: FileState
    detail: str = ""
    checksum: str = ""
    """The BLAKE3 checksum the file embeds (hex), when it is OK."""


def check_file(file: CacheFile, data: bytes) -> FileCheck:
    """Judge `data`, the bytes of the entry or pack `file`."""
    if file.kind not in (Kind.ENTRY, Kind.PACK):
        raise ValueError(f"{file.path}: a {file.kind} file is not checked")
    other = is_other_entry_version if file.kind is Kind.ENTRY else is_other_pack_version
    if other(data):
        return FileCheck(FileState.OTHER_VERSION)
    try:
        if file.kind is Kind.PACK:
            decode_pack(data)
        elif file.misplaced:
            raise CorruptEntry("not in its shard directory")
        else:
            check_entry(data, file.key)
    except CorruptEntry as exc:
        return FileCheck(FileState.CORRUPT, f"fails its {file.kind} check: {exc}")
    return FileCheck(FileState.OK, checksum=data[-CHECKSUM_LEN:].hex())
