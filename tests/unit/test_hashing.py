"""Tests for dlm_git.hashing: known answers, pinned constants, collisions, safetensors."""

from __future__ import annotations

import hashlib
import json
import math
import random
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from dlm_git.errors import DlmGitError
from dlm_git.hashing import (
    DEFAULT_CHUNK_SIZE,
    SafetensorsDigest,
    TensorDigest,
    canonical_json,
    canonical_json_sha256,
    digest_safetensors,
    digest_tensor_bytes,
    float_from_hex,
    float_hex,
    sha256_bytes,
    sha256_file,
    sha256_text,
    tensor_root,
)
from dlm_git.merkle import inclusion_proof, merkle_root, merkle_tree_hash, verify_inclusion
from dlm_git.safetensors_header import SafetensorsFormatError, read_safetensors_header

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


def build_safetensors(
    header: dict[str, Any] | bytes, data: bytes = b"", *, length: int | None = None
) -> bytes:
    """Hand-written safetensors bytes; `length` overrides the header length field."""
    raw = header if isinstance(header, bytes) else json.dumps(header, sort_keys=True).encode()
    n = len(raw) if length is None else length
    return struct.pack("<Q", n) + raw + data


def write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def naive_tensor_hex(name: str, dtype: str, shape: Sequence[int], data: bytes) -> str:
    def lp(b: bytes) -> bytes:
        return struct.pack("<Q", len(b)) + b

    pre = b"dlm-git/tensor/v1\x00" + lp(name.encode()) + lp(dtype.encode())
    pre += struct.pack("<Q", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
    return hashlib.sha256(pre + lp(data)).hexdigest()


def naive_digest(path: Path) -> dict[str, Any]:
    """Read the whole file, hash each tensor separately: the reference for digest_safetensors."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        data = raw[base + begin : base + end]
        tensors[name] = (
            entry["dtype"],
            tuple(entry["shape"]),
            len(data),
            naive_tensor_hex(name, entry["dtype"], entry["shape"], data),
        )
    names = sorted(tensors)
    root = hashlib.sha256(
        b"dlm-git/tensor-root/v1\x00"
        + struct.pack("<Q", len(names))
        + b"".join(bytes.fromhex(tensors[k][3]) for k in names)
    ).hexdigest()
    return {
        "file_sha256": hashlib.sha256(raw).hexdigest(),
        "size": len(raw),
        "tensors": [(k, *tensors[k]) for k in names],
        "tensor_root": root,
        "metadata": header.get("__metadata__", {}),
    }


def assert_matches_naive(d: SafetensorsDigest, path: Path) -> None:
    ref = naive_digest(path)
    assert d.file_sha256 == ref["file_sha256"] == sha256_file(path)
    assert d.size == ref["size"]
    assert [(t.name, t.dtype, t.shape, t.nbytes, t.digest) for t in d.tensors] == ref["tensors"]
    assert d.tensor_root == ref["tensor_root"] == tensor_root(d.tensors)
    assert d.metadata == ref["metadata"]


def tiny_file_bytes() -> bytes:
    """A fixed tiny safetensors file whose digests are pinned below."""
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]},
        "c": {"dtype": "I64", "shape": [0, 4], "data_offsets": [11, 11]},
    }
    return build_safetensors(header, struct.pack("<2f", 1.0, -2.5) + b"xyz")


def single_tensor_file(path: Path, name: str, dtype: str, shape: list[int], data: bytes) -> Path:
    header = {name: {"dtype": dtype, "shape": shape, "data_offsets": [0, len(data)]}}
    return write(path, build_safetensors(header, data))


# --------------------------------------------------------------------------- plain digests

ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_sha256_known_answer(tmp_path: Path) -> None:
    assert sha256_bytes(b"abc") == ABC_SHA256
    assert sha256_text("abc") == ABC_SHA256
    assert sha256_file(write(tmp_path / "abc", b"abc")) == ABC_SHA256
    assert sha256_bytes(b"") == hashlib.sha256(b"").hexdigest()


def test_sha256_text_is_utf8() -> None:
    assert sha256_text("größe ✓") == sha256_bytes("größe ✓".encode())


# --------------------------------------------------------------------------- canonical JSON


def test_canonical_json_exact_bytes() -> None:
    assert canonical_json({"b": 1, "a": [1, 2.5]}) == (
        b'{\n  "a": [\n    1,\n    2.5\n  ],\n  "b": 1\n}\n'
    )


def test_canonical_json_key_order_independent() -> None:
    a = {"z": 1, "a": {"y": 2, "b": 3}, "m": [3, 1]}
    b = {"m": [3, 1], "a": {"b": 3, "y": 2}, "z": 1}
    assert canonical_json(a) == canonical_json(b)
    assert canonical_json_sha256(a) == canonical_json_sha256(b)
    assert canonical_json_sha256(a) == hashlib.sha256(canonical_json(a)).hexdigest()


def test_canonical_json_single_trailing_newline() -> None:
    objs: list[object] = [{}, [], "x", {"a": "line\n"}]
    for obj in objs:
        out = canonical_json(obj)
        assert out.endswith(b"\n")
        assert not out.endswith(b"\n\n")


def test_canonical_json_keeps_non_ascii() -> None:
    out = canonical_json({"name": "Größe ✓ 日本"})
    assert "Größe ✓ 日本".encode() in out
    assert b"\\u" not in out
    assert json.loads(out.decode("utf-8")) == {"name": "Größe ✓ 日本"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_json_rejects_nan_and_inf(bad: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": bad})
    with pytest.raises(ValueError):
        canonical_json_sha256([bad])


# --------------------------------------------------------------------------- floats


@pytest.mark.parametrize(
    "x", [0.1, -0.0, 1e-310, 3.141592653589793, 2.0**-1074, 1.7976931348623157e308]
)
def test_float_hex_round_trips_exactly(x: float) -> None:
    s = float_hex(x)
    assert s == float.hex(x)
    back = float_from_hex(s)
    assert back == x
    assert math.copysign(1.0, back) == math.copysign(1.0, x)


def test_float_hex_distinguishes_nearby_floats() -> None:
    assert float_hex(0.1) != float_hex(math.nextafter(0.1, 1.0))
    assert float_hex(0.1) == "0x1.999999999999ap-4"


def test_float_hex_ints_and_bad_input() -> None:
    assert float_hex(3) == float.hex(3.0)
    with pytest.raises(ValueError):
        float_hex(2**53 + 1)
    with pytest.raises(TypeError):
        float_hex(True)
    with pytest.raises(TypeError):
        float_hex("0.1")  # type: ignore[arg-type]


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


# --------------------------------------------------------------------------- tensor digests


def test_tensor_digest_scheme_and_to_json() -> None:
    data = struct.pack("<3f", 1.0, 2.0, 3.0)
    d = digest_tensor_bytes("w", "F32", (3,), data)
    assert d == TensorDigest("w", "F32", (3,), 12, naive_tensor_hex("w", "F32", [3], data))
    assert d.to_json() == {
        "name": "w",
        "dtype": "F32",
        "shape": [3],
        "nbytes": 12,
        "digest": d.digest,
    }
    json.dumps(d.to_json())


def test_tensor_root_duplicates_and_bad_digests() -> None:
    a = digest_tensor_bytes("a", "U8", (1,), b"x")
    with pytest.raises(ValueError, match="duplicate"):
        tensor_root([a, a])
    bad = TensorDigest("b", "U8", (1,), 1, "abcd")
    with pytest.raises(ValueError):
        tensor_root([a, bad])
    assert tensor_root([]) == hashlib.sha256(b"dlm-git/tensor-root/v1\x00" + bytes(8)).hexdigest()


def test_tensor_root_is_order_independent() -> None:
    a = digest_tensor_bytes("a", "U8", (1,), b"x")
    b = digest_tensor_bytes("b", "U8", (1,), b"y")
    assert tensor_root([a, b]) == tensor_root([b, a])


def test_tiny_file_pinned(tmp_path: Path) -> None:
    # Computed once; a change here means the tensor digest scheme changed (bump its tag).
    path = write(tmp_path / "tiny.safetensors", tiny_file_bytes())
    d = digest_safetensors(path)
    assert_matches_naive(d, path)
    assert d.tensor_root == "fcc6e6ba3ed0d96cb01e3123eca0e9cd12acf15f1568f44112ceb69887b62981"
    assert {t.name: t.digest for t in d.tensors} == {
        "a": "35d239defdd18aadb7f69209db0892b133ae7cf53aecb0eb4f7836f8491f06ed",
        "b": "457f91b275c77102a0a95fba905824e540a1b46ba554f5a5955f65615f6a278a",
        "c": "78c5062ac16da0fecff9d6e4f8d497d3c0cf264cea36d7bfba60d80580a48f00",
    }
    assert d.metadata == {"format": "pt"}
    assert d.to_json()["tensor_root"] == d.tensor_root


# --------------------------------------------------------------------------- tensor collisions


def test_rename_with_same_bytes_changes_digest(tmp_path: Path) -> None:
    data = bytes(range(16))
    a = digest_safetensors(single_tensor_file(tmp_path / "a", "w", "U8", [16], data))
    b = digest_safetensors(single_tensor_file(tmp_path / "b", "v", "U8", [16], data))
    assert a.tensors[0].digest != b.tensors[0].digest
    assert a.tensor_root != b.tensor_root


def test_reshape_with_same_bytes_changes_digest(tmp_path: Path) -> None:
    data = struct.pack("<6f", *range(6))
    a = digest_safetensors(single_tensor_file(tmp_path / "a", "w", "F32", [2, 3], data))
    b = digest_safetensors(single_tensor_file(tmp_path / "b", "w", "F32", [3, 2], data))
    c = digest_safetensors(single_tensor_file(tmp_path / "c", "w", "F32", [6], data))
    assert len({a.tensor_root, b.tensor_root, c.tensor_root}) == 3


def test_dtype_reinterpretation_changes_digest(tmp_path: Path) -> None:
    data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    a = digest_safetensors(single_tensor_file(tmp_path / "a", "w", "F32", [4], data))
    b = digest_safetensors(single_tensor_file(tmp_path / "b", "w", "I32", [4], data))
    c = digest_safetensors(single_tensor_file(tmp_path / "c", "w", "U8", [16], data))
    assert len({a.tensor_root, b.tensor_root, c.tensor_root}) == 3


def _two_tensor_file(path: Path, a: bytes, b: bytes) -> Path:
    header = {
        "a": {"dtype": "U8", "shape": [len(a)], "data_offsets": [0, len(a)]},
        "b": {"dtype": "U8", "shape": [len(b)], "data_offsets": [len(a), len(a) + len(b)]},
    }
    return write(path, build_safetensors(header, a + b))


def test_swapping_data_between_tensors_changes_root(tmp_path: Path) -> None:
    x = digest_safetensors(_two_tensor_file(tmp_path / "x", b"1111", b"2222"))
    y = digest_safetensors(_two_tensor_file(tmp_path / "y", b"2222", b"1111"))
    assert x.tensor_root != y.tensor_root
    assert {t.digest for t in x.tensors}.isdisjoint({t.digest for t in y.tensors})


def test_moving_a_byte_between_tensors_changes_root(tmp_path: Path) -> None:
    x = digest_safetensors(_two_tensor_file(tmp_path / "x", b"abc", b"de"))
    y = digest_safetensors(_two_tensor_file(tmp_path / "y", b"ab", b"cde"))
    assert x.tensor_root != y.tensor_root
    # even with the shape left out of the picture, the length prefix separates them
    assert naive_tensor_hex("a", "U8", [], b"abc") != naive_tensor_hex("a", "U8", [], b"ab")
    assert digest_tensor_bytes("a", "U8", (), b"ab").digest != (
        digest_tensor_bytes("a", "U8", (), b"abc").digest
    )


def test_tensor_name_dtype_boundary_is_length_prefixed() -> None:
    # "ab" + "F32..." vs "a" + "bF32..." style ambiguities cannot arise
    one = digest_tensor_bytes("aU8", "U8", (1,), b"x")
    two = digest_tensor_bytes("a", "U8U8", (1,), b"x")
    assert one.digest != two.digest


# --------------------------------------------------------------------------- digest_safetensors


def _several_dtypes_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray[Any, Any]] = {
        "f64": rng.standard_normal((3, 2)).astype(np.float64),
        "f32": rng.standard_normal((4, 5)).astype(np.float32),
        "f16": rng.standard_normal((7,)).astype(np.float16),
        "i64": rng.integers(-(2**40), 2**40, size=(2, 2, 2)).astype(np.int64),
        "i32": rng.integers(-1000, 1000, size=(5,)).astype(np.int32),
        "i16": rng.integers(-1000, 1000, size=(3,)).astype(np.int16),
        "i8": rng.integers(-100, 100, size=(9,)).astype(np.int8),
        "u8": rng.integers(0, 255, size=(11,)).astype(np.uint8),
        "flag": np.array([True, False, True]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "scalar": np.array(2.5, dtype=np.float32),
    }
    save_file(tensors, str(path), metadata={"format": "np", "note": "ünïcode"})
    return path


def test_digest_matches_naive_several_dtypes(tmp_path: Path) -> None:
    path = _several_dtypes_file(tmp_path / "m.safetensors")
    d = digest_safetensors(path)
    assert_matches_naive(d, path)
    loaded = load_file(str(path))
    assert [t.name for t in d.tensors] == sorted(loaded)
    for t in d.tensors:
        assert t.shape == loaded[t.name].shape
        assert t.nbytes == loaded[t.name].nbytes
    by_name = {t.name: t for t in d.tensors}
    assert by_name["empty"].nbytes == 0
    assert by_name["empty"].shape == (0, 3)
    assert by_name["scalar"].shape == ()
    assert by_name["flag"].dtype == "BOOL"
    assert d.metadata == {"format": "np", "note": "ünïcode"}
    for chunk in (1, 2, 3, 5, 64):
        assert digest_safetensors(path, chunk_size=chunk) == d


def test_digest_exotic_dtypes_hand_built(tmp_path: Path) -> None:
    header = {
        "bf16": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]},
        "e4m3": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [8, 11]},
        "e5m2": {"dtype": "F8_E5M2", "shape": [1], "data_offsets": [11, 12]},
        "u16": {"dtype": "U16", "shape": [1], "data_offsets": [12, 14]},
        "u32": {"dtype": "U32", "shape": [1], "data_offsets": [14, 18]},
        "u64": {"dtype": "U64", "shape": [1], "data_offsets": [18, 26]},
        "z1": {"dtype": "F32", "shape": [0], "data_offsets": [26, 26]},
        "z0": {"dtype": "F16", "shape": [4, 0], "data_offsets": [0, 0]},
    }
    path = write(tmp_path / "x.safetensors", build_safetensors(header, bytes(range(26))))
    for chunk in (1, 4, DEFAULT_CHUNK_SIZE):
        assert_matches_naive(digest_safetensors(path, chunk_size=chunk), path)


def test_digest_file_larger_than_chunk(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    tensors = {
        f"layer.{i}.weight": rng.standard_normal((rng.integers(1, 60), 97)).astype(np.float32)
        for i in range(12)
    }
    tensors["bias"] = rng.standard_normal(13).astype(np.float16)
    tensors["nothing"] = np.zeros((5, 0), dtype=np.int64)
    path = tmp_path / "big.safetensors"
    save_file(tensors, str(path))
    size = path.stat().st_size
    assert size > 100_000
    results = {
        chunk: digest_safetensors(path, chunk_size=chunk)
        for chunk in (7, 1000, 4096, 65_536, size, 10 * size, DEFAULT_CHUNK_SIZE)
    }
    first = next(iter(results.values()))
    assert all(r == first for r in results.values())
    assert_matches_naive(first, path)


def test_digest_empty_file_of_no_tensors(tmp_path: Path) -> None:
    path = write(tmp_path / "e.safetensors", build_safetensors(b"{}"))
    d = digest_safetensors(path)
    assert d.tensors == ()
    assert d.metadata == {}
    assert d.tensor_root == tensor_root([])
    assert_matches_naive(d, path)
    padded = write(tmp_path / "p.safetensors", build_safetensors(b'{"__metadata__":null}   '))
    assert digest_safetensors(padded).metadata == {}


def test_chunk_size_must_be_positive(tmp_path: Path) -> None:
    path = write(tmp_path / "t.safetensors", tiny_file_bytes())
    with pytest.raises(ValueError):
        digest_safetensors(path, chunk_size=0)


def test_read_safetensors_header(tmp_path: Path) -> None:
    content = tiny_file_bytes()
    path = write(tmp_path / "t.safetensors", content)
    header, start = read_safetensors_header(path)
    (n,) = struct.unpack("<Q", content[:8])
    assert start == 8 + n
    assert header == json.loads(content[8:start])
    assert header["a"]["data_offsets"] == [0, 8]


def test_module_imports_no_heavy_libraries() -> None:
    code = (
        "import sys, dlm_git.hashing\n"
        "heavy = {'torch', 'numpy', 'transformers', 'safetensors'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# --------------------------------------------------------------------------- malformed files


def _entry(dtype: Any = "U8", shape: Any = None, offsets: Any = None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [4] if shape is None else shape, "data_offsets": offsets}


MALFORMED: list[tuple[str, bytes, str]] = [
    ("empty file", b"", "shorter than the 8-byte"),
    ("seven bytes", b"\x01" * 7, "shorter than the 8-byte"),
    ("header longer than file", build_safetensors(b"{}", length=50), "exceeds the file size"),
    ("header over limit", build_safetensors(b"{}", length=2**63), "exceeds the 100000000-byte"),
    ("header over limit small", build_safetensors(b"{}", length=100_000_001), "100000000-byte"),
    ("not utf-8", build_safetensors(b'{"\xff": 1}'), "not valid UTF-8"),
    ("not json", build_safetensors(b"{not json"), "not valid JSON"),
    ("json list", build_safetensors(b"[1, 2]"), "not an object"),
    ("json string", build_safetensors(b'"x"'), "not an object"),
    (
        "duplicate key",
        build_safetensors(
            b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},'
            b' "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}',
            b"xy",
        ),
        "duplicate key 'a'",
    ),
    ("entry not object", build_safetensors({"a": [1, 2]}), "not an object"),
    (
        "missing dtype",
        build_safetensors({"a": {"shape": [1], "data_offsets": [0, 1]}}, b"x"),
        "missing 'dtype'",
    ),
    (
        "missing shape",
        build_safetensors({"a": {"dtype": "U8", "data_offsets": [0, 1]}}, b"x"),
        "missing 'shape'",
    ),
    (
        "missing data_offsets",
        build_safetensors({"a": {"dtype": "U8", "shape": [1]}}, b"x"),
        "missing 'data_offsets'",
    ),
    ("dtype not str", build_safetensors({"a": _entry(5, None, [0, 4])}, b"abcd"), "dtype must"),
    ("unknown dtype", build_safetensors({"a": _entry("F128", None, [0, 4])}, b"abcd"), "unknown"),
    ("lowercase dtype", build_safetensors({"a": _entry("u8", None, [0, 4])}, b"abcd"), "unknown"),
    ("shape not list", build_safetensors({"a": _entry("U8", "4", [0, 4])}, b"abcd"), "shape must"),
    ("negative dim", build_safetensors({"a": _entry("U8", [-4], [0, 4])}, b"abcd"), "shape must"),
    ("float dim", build_safetensors({"a": _entry("U8", [4.0], [0, 4])}, b"abcd"), "shape must"),
    ("bool dim", build_safetensors({"a": _entry("U8", [True], [0, 1])}, b"a"), "shape must"),
    ("offsets one", build_safetensors({"a": _entry("U8", [4], [4])}, b"abcd"), "data_offsets must"),
    (
        "offsets three",
        build_safetensors({"a": _entry("U8", [4], [0, 4, 4])}, b"abcd"),
        "data_offsets must",
    ),
    (
        "offsets str",
        build_safetensors({"a": _entry("U8", [4], [0, "4"])}, b"abcd"),
        "data_offsets must",
    ),
    (
        "offsets negative",
        build_safetensors({"a": _entry("U8", [4], [-1, 3])}, b"abcd"),
        "data_offsets must",
    ),
    ("end before begin", build_safetensors({"a": _entry("U8", [0], [4, 0])}, b"abcd"), "before"),
    (
        "outside buffer",
        build_safetensors({"a": _entry("U8", [8], [0, 8])}, b"abcd"),
        "not within the data buffer",
    ),
    (
        "length mismatch",
        build_safetensors({"a": _entry("F32", [2], [0, 4])}, b"abcd"),
        "does not match shape",
    ),
    (
        "overlap",
        build_safetensors(
            {"a": _entry("U8", [3], [0, 3]), "b": _entry("U8", [2], [2, 4])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "same range twice",
        build_safetensors(
            {"a": _entry("U8", [4], [0, 4]), "b": _entry("U8", [4], [0, 4])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "empty tensor inside another",
        build_safetensors(
            {"a": _entry("U8", [4], [0, 4]), "b": _entry("U8", [0], [2, 2])}, b"abcd"
        ),
        "overlap",
    ),
    (
        "gap at start",
        build_safetensors({"a": _entry("U8", [3], [1, 4])}, b"abcd"),
        "gap in the data buffer",
    ),
    (
        "gap in middle",
        build_safetensors(
            {"a": _entry("U8", [1], [0, 1]), "b": _entry("U8", [2], [2, 4])}, b"abcd"
        ),
        "gap in the data buffer",
    ),
    (
        "trailing bytes",
        build_safetensors({"a": _entry("U8", [3], [0, 3])}, b"abcd"),
        "trailing bytes",
    ),
    ("bytes but no tensors", build_safetensors(b"{}", b"zz"), "trailing bytes"),
    (
        "dim beyond u64",
        build_safetensors({"a": _entry("U8", [2**64, 0], [0, 0])}),
        "64-bit integers",
    ),
    (
        "lone surrogate name",
        build_safetensors(
            b'{"a\\ud800": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"x"
        ),
        "not valid Unicode",
    ),
    (
        "lone surrogate metadata",
        build_safetensors(b'{"__metadata__": {"k": "\\udfff"}}'),
        "not valid Unicode",
    ),
    (
        "metadata not str",
        build_safetensors({"__metadata__": {"epochs": 3}}),
        "__metadata__ must be",
    ),
    ("metadata list", build_safetensors({"__metadata__": ["a"]}), "__metadata__ must be"),
]


@pytest.mark.parametrize(("case", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_are_rejected(
    tmp_path: Path, case: str, content: bytes, message: str
) -> None:
    path = write(tmp_path / "bad.safetensors", content)
    for call in (read_safetensors_header, digest_safetensors):
        with pytest.raises(SafetensorsFormatError) as info:
            call(path)
        err = info.value
        assert isinstance(err, DlmGitError)
        assert err.exit_code == 1
        assert err.subject == str(path)
        assert message in err.message, (case, err.message)
        assert str(err).startswith(f"{path}: ")


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        digest_safetensors(tmp_path / "nope.safetensors")
