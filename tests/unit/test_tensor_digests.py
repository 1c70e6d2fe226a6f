"""Tensor digests (`dlm_git.hashing.digest_safetensors`): each tensor hashed with its name,
dtype and shape, the order-independent tensor root, the collisions that binding prevents
(rename, reshape, dtype relabel, bytes moved between tensors), and the streaming digest
against a naive whole-file reference."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from dlm_git.hashing import (
    DEFAULT_CHUNK_SIZE,
    SafetensorsDigest,
    TensorDigest,
    digest_safetensors,
    digest_tensor_bytes,
    sha256_file,
    tensor_root,
)
from dlm_git.safetensors_header import read_safetensors_header
from tests.support.tensorfiles import build_safetensors, write


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


def test_a_file_of_one_chunk_is_hashed_without_a_thread(tmp_path: Path) -> None:
    """The worker thread overlaps hashing chunk i with reading chunk i+1: one chunk has
    nothing to overlap (a hash-level verify of a small adapter starts no thread pool)."""
    path = write(tmp_path / "t.safetensors", tiny_file_bytes())
    code = (
        "import sys; from pathlib import Path; from dlm_git.hashing import digest_safetensors;"
        f"d = digest_safetensors(Path({str(path)!r})); print(d.file_sha256);"
        "print('concurrent.futures' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [hashlib.sha256(path.read_bytes()).hexdigest(), "False"]
