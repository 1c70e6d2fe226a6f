"""Per-document packs: the last run's entries of one document in a single file.

A warm run of a document reads its pack (one open, one read) instead of one entry file
per row. The pack is only an accelerator: it holds the same self-checking entries as the
entry files (each verified by its own checksum on use), is rewritten atomically when a
run's rows differ from it, and is accounted for and evicted like an entry (index key
`pack-<dlm_id>`).

    magic  8 bytes  b"DLMPACK1"
    count  u32le
    index  count x (32-byte key, u64le offset, u64le length)   offsets from file start
    data   the entries (dlm_git.cache.entry format), back to back
"""

from __future__ import annotations

import struct

MAGIC = b"DLMPACK1"
_ROW = struct.Struct("<32sQQ")


def encode_pack(entries: list[tuple[str, bytes]]) -> bytes:
    head = len(MAGIC) + 4 + _ROW.size * len(entries)
    index, offset = [], head
    for key, data in entries:
        index.append(_ROW.pack(key.encode("ascii"), offset, len(data)))
        offset += len(data)
    return b"".join([MAGIC, struct.pack("<I", len(entries)), *index, *(d for _, d in entries)])


def read_index(data: bytes) -> dict[str, tuple[int, int]]:
    """key -> (offset, length); empty for anything that is not a well-formed pack."""
    if len(data) < len(MAGIC) + 4 or not data.startswith(MAGIC):
        return {}
    (count,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    if start + count * _ROW.size > len(data):
        return {}
    out: dict[str, tuple[int, int]] = {}
    for i in range(count):
        raw, offset, length = _ROW.unpack_from(data, start + i * _ROW.size)
        if offset + length > len(data):
            return {}
        out[raw.decode("ascii", "replace")] = (offset, length)
    return out
