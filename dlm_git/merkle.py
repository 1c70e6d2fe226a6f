"""The Merkle tree of RFC 6962 (leaf ``0x00``, node ``0x01``, split at the largest power of
two below n, odd nodes never duplicated), with inclusion proofs; `merkle_root` also binds
the leaf count under its own domain tag (``dlm-git/merkle/v1``).

Invariant: standard library only (the git hooks import it); changing an encoding here
means bumping the tag.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

_MERKLE_TAG = b"dlm-git/merkle/v1\x00"
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_DIGEST_SIZE = 32


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def _leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(_LEAF_PREFIX + leaf).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def merkle_leaf_hash(*parts: bytes | memoryview) -> bytes:
    """RFC 6962 leaf hash sha256(0x00 || leaf) of the leaf given as consecutive parts."""
    h = hashlib.sha256(_LEAF_PREFIX)
    for part in parts:
        h.update(part)
    return h.digest()


def _levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    return _levels_from_hashes([_leaf_hash(leaf) for leaf in leaves])


def _levels_from_hashes(level: list[bytes]) -> list[list[bytes]]:
    """All levels of the RFC 6962 tree, leaf hashes first, root level last.

    Pairing adjacent nodes and carrying a last odd node up unchanged builds exactly the
    tree RFC 6962 defines by splitting at the largest power of two below n.
    """
    levels = [level]
    while len(level) > 1:
        nxt = [_node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        levels.append(nxt)
        level = nxt
    return levels


def merkle_tree_hash(leaves: Sequence[bytes]) -> bytes:
    """Plain RFC 6962 Merkle Tree Hash (raw 32 bytes); the empty tree is SHA-256 of b""."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    return _levels(leaves)[-1][0]


def _bind(count: int, mth: bytes) -> str:
    return hashlib.sha256(_MERKLE_TAG + _u64(count) + mth).hexdigest()


def merkle_root(leaves: Sequence[bytes]) -> str:
    """Hex root that binds the leaf count: sha256(tag || u64le(n) || MTH(leaves))."""
    return _bind(len(leaves), merkle_tree_hash(leaves))


def merkle_root_from_leaf_hashes(leaf_hashes: Sequence[bytes]) -> str:
    """`merkle_root` for leaves whose RFC 6962 leaf hashes are already known."""
    if not leaf_hashes:
        return _bind(0, hashlib.sha256(b"").digest())
    return _bind(len(leaf_hashes), _levels_from_hashes(list(leaf_hashes))[-1][0])


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[str]:
    """RFC 6962 audit path (hex, leaf level first) for leaf `index`."""
    if not 0 <= index < len(leaves):
        raise ValueError(f"leaf index {index} out of range for {len(leaves)} leaves")
    proof: list[str] = []
    m = index
    for level in _levels(leaves)[:-1]:
        sibling = m ^ 1
        if sibling < len(level):
            proof.append(level[sibling].hex())
        m //= 2
    return proof


def verify_inclusion(leaf: bytes, index: int, count: int, proof: Sequence[str], root: str) -> bool:
    """Whether `proof` shows `leaf` at `index` in a tree of `count` leaves with bound `root`.

    Recomputes the RFC 6962 tree hash from the path (RFC 9162 section 2.1.3.2), then binds
    `count` as `merkle_root` does. Malformed input gives False, never an exception.
    """
    if not (0 <= index < count < 1 << 64):
        return False
    try:
        path = [bytes.fromhex(p) for p in proof]
        expected = bytes.fromhex(root)
    except (ValueError, TypeError):
        return False
    if any(len(p) != _DIGEST_SIZE for p in path) or len(expected) != _DIGEST_SIZE:
        return False
    fn, sn = index, count - 1
    r = _leaf_hash(leaf)
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        return False
    return bytes.fromhex(_bind(count, r)) == expected
