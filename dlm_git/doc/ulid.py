"""ULIDs (26 Crockford base32 characters) used as `dlm_id`."""

from __future__ import annotations

import os
import re
import time

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_RE = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")


def is_ulid(value: str) -> bool:
    return bool(ULID_RE.match(value.upper()))


def new_ulid(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A fresh ULID: 48-bit millisecond timestamp + 80 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = os.urandom(10) if randomness is None else randomness
    if len(rand) != 10 or not 0 <= ms < 2**48:
        raise ValueError("ULID needs a 48-bit timestamp and 10 random bytes")
    value = (ms << 80) | int.from_bytes(rand, "big")
    chars = []
    for _ in range(26):
        chars.append(CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))
