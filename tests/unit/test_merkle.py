"""`dlm_git.merkle`: RFC 6962 Merkle tree hashes against the certificate-transparency
vectors and an independent recursive reference, inclusion proofs, and the collisions a
bare tree hash would allow (leaf count and second preimages) that the bound root refuses."""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Sequence

import pytest

from dlm_git.merkle import inclusion_proof, merkle_root, merkle_tree_hash, verify_inclusion

# --------------------------------------------------------------------------- helpers

CT_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
]

# Roots of the first 1..8 CT leaves (certificate-transparency merkle tree test vectors).
CT_ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def ref_mth(leaves: Sequence[bytes]) -> bytes:
    """Straightforward recursive RFC 6962 Merkle Tree Hash, independent of the module."""
    n = len(leaves)
    if n == 0:
        return _sha(b"")
    if n == 1:
        return _sha(b"\x00" + leaves[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return _sha(b"\x01" + ref_mth(leaves[:k]) + ref_mth(leaves[k:]))


def ref_path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1 PATH(m, D[n]), written recursively as the RFC states it."""
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return ref_path(m, leaves[:k]) + [ref_mth(leaves[k:])]
    return ref_path(m - k, leaves[k:]) + [ref_mth(leaves[:k])]


def ref_bound_root(leaves: Sequence[bytes]) -> str:
    tag = b"dlm-git/merkle/v1\x00"
    return hashlib.sha256(tag + struct.pack("<Q", len(leaves)) + ref_mth(leaves)).hexdigest()


# --------------------------------------------------------------------------- Merkle: known answers


def test_mth_empty_is_sha256_of_empty() -> None:
    assert merkle_tree_hash([]) == hashlib.sha256(b"").digest()
    assert merkle_tree_hash([]).hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_mth_single_empty_leaf() -> None:
    assert merkle_tree_hash([b""]) == hashlib.sha256(b"\x00").digest()


def test_mth_certificate_transparency_vectors() -> None:
    assert merkle_tree_hash(CT_LEAVES).hex() == (
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    )
    for n in range(1, 9):
        assert merkle_tree_hash(CT_LEAVES[:n]).hex() == CT_ROOTS[n - 1]
        assert ref_mth(CT_LEAVES[:n]).hex() == CT_ROOTS[n - 1]


def test_mth_matches_recursive_reference() -> None:
    rng = random.Random(1234)
    for n in range(0, 70):
        leaves = [rng.randbytes(rng.randrange(0, 40)) for _ in range(n)]
        assert merkle_tree_hash(leaves) == ref_mth(leaves)
        assert merkle_root(leaves) == ref_bound_root(leaves)


def test_merkle_root_pinned() -> None:
    # Computed once; a change here means the bound-root scheme changed (bump its tag).
    assert merkle_root([]) == "5c715a1b015fd4901e220c1637d9e8c44cd7aae7ab320388473fdc6a1cc18789"
    assert merkle_root(CT_LEAVES) == (
        "20b26bb33686fd9c2d465c749596eb693dec599ac7c53fe6a831dc48deefb4ce"
    )


def test_ct_audit_path_vectors() -> None:
    assert inclusion_proof(CT_LEAVES, 0) == [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ]
    assert inclusion_proof(CT_LEAVES, 5) == [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ]
    assert inclusion_proof(CT_LEAVES[:1], 0) == []


# --------------------------------------------------------------------------- inclusion proofs


def _leaves(n: int) -> list[bytes]:
    return [f"leaf-{i}".encode() for i in range(n)]


@pytest.mark.parametrize("n", range(1, 18))
def test_inclusion_proofs_verify_for_every_index(n: int) -> None:
    leaves = _leaves(n)
    root = merkle_root(leaves)
    for i in range(n):
        proof = inclusion_proof(leaves, i)
        assert proof == [h.hex() for h in ref_path(i, leaves)]
        assert verify_inclusion(leaves[i], i, n, proof, root)
        assert verify_inclusion(leaves[i], i, n, proof, root.upper())


@pytest.mark.parametrize("n", range(1, 18))
def test_inclusion_proofs_reject_tampering(n: int) -> None:
    leaves = _leaves(n)
    root = merkle_root(leaves)
    for i in range(n):
        proof = inclusion_proof(leaves, i)
        assert not verify_inclusion(leaves[i] + b"!", i, n, proof, root)
        for j in range(n):
            if j != i:
                assert not verify_inclusion(leaves[i], j, n, proof, root)
        for wrong_count in (n - 1, n + 1, n + 2, 2 * n):
            assert not verify_inclusion(leaves[i], i, wrong_count, proof, root)
        for k in range(len(proof)):
            raw = bytearray(bytes.fromhex(proof[k]))
            raw[0] ^= 1
            altered = [*proof[:k], raw.hex(), *proof[k + 1 :]]
            assert not verify_inclusion(leaves[i], i, n, altered, root)
        if proof:
            assert not verify_inclusion(leaves[i], i, n, proof[:-1], root)
        assert not verify_inclusion(leaves[i], i, n, [*proof, "00" * 32], root)
        # the plain MTH is not the bound root
        assert not verify_inclusion(leaves[i], i, n, proof, merkle_tree_hash(leaves).hex())


def test_inclusion_out_of_range_and_malformed() -> None:
    leaves = _leaves(5)
    root = merkle_root(leaves)
    for bad in (-1, 5, 100):
        with pytest.raises(ValueError):
            inclusion_proof(leaves, bad)
        assert not verify_inclusion(leaves[0], bad, 5, inclusion_proof(leaves, 0), root)
    with pytest.raises(ValueError):
        inclusion_proof([], 0)
    assert not verify_inclusion(b"", 0, 0, [], merkle_root([]))
    proof = inclusion_proof(leaves, 2)
    assert not verify_inclusion(leaves[2], 2, 5, ["zz" * 32, *proof[1:]], root)
    assert not verify_inclusion(leaves[2], 2, 5, [proof[0][:-2], *proof[1:]], root)
    assert not verify_inclusion(leaves[2], 2, 5, proof, "not-hex")
    assert not verify_inclusion(leaves[2], 2, 5, proof, root[:-2])


# --------------------------------------------------------------------------- Merkle collisions


def test_merkle_leaf_count_is_bound() -> None:
    assert merkle_root([b"ab"]) != merkle_root([b"a", b"b"])
    assert merkle_tree_hash([b"ab"]) != merkle_tree_hash([b"a", b"b"])
    assert merkle_root([]) != merkle_root([b""])
    assert merkle_root([b""]) != merkle_root([b"", b""])


def test_merkle_second_preimage_of_inner_node() -> None:
    x, y = b"left", b"right"
    two = [x, y]
    lx, ly = _sha(b"\x00" + x), _sha(b"\x00" + y)
    for forged in ([lx + ly], [b"\x01" + lx + ly]):
        assert merkle_tree_hash(forged) != merkle_tree_hash(two)
        assert merkle_root(forged) != merkle_root(two)
    # a one-leaf tree whose leaf is an inner node's hash is not that inner node either
    inner = merkle_tree_hash(two)
    assert merkle_tree_hash([inner]) != inner
