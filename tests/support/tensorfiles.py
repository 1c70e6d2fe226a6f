"""safetensors files made and edited byte by byte, independently of the library: the
hand-written files of the hashing tests and the forger's edits of a trained adapter.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name
-> dtype, shape, data_offsets into the buffer; an optional `__metadata__`), and the data
buffer. `build_safetensors` writes any header bytes (malformed ones too) as given;
`st_split`/`st_join` read and re-serialize a real file's header, keeping its order and
padding it to 8 bytes as the format's writers do; every edit below keeps the file
readable and changes exactly the one thing its name says.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


# --------------------------------------------------------------------------- real files


def st_split(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(header in file order, data buffer) of a safetensors file."""
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    return header, blob[8 + n :]


def st_join(header: dict[str, Any], data: bytes) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + data


def tensor_names(blob: bytes) -> list[str]:
    header, _ = st_split(blob)
    return [k for k in header if k != "__metadata__"]


def pick_tensor(blob: bytes, needle: str = "q_proj.lora_A") -> str:
    return next(n for n in tensor_names(blob) if needle in n)


def patch_tensor(blob: bytes, name: str, fn: Callable[[Any], None]) -> bytes:
    """Apply `fn` to a float32 copy of tensor `name` and write its bytes back in place."""
    import numpy as np

    header, data = st_split(blob)
    info = header[name]
    assert info["dtype"] == "F32"
    begin, end = info["data_offsets"]
    arr = np.frombuffer(data[begin:end], dtype="<f4").copy().reshape(info["shape"])
    fn(arr)
    new = arr.astype("<f4").tobytes()
    assert len(new) == end - begin
    return blob[: len(blob) - len(data)] + data[:begin] + new + data[end:]


def nudge(a: Any) -> None:
    """A post-training edit of an array: add 0.25 to its first element."""
    a.flat[0] += 0.25


def edit_weight(blob: bytes) -> bytes:
    """A post-training edit: add 0.25 to one element of one tensor."""
    return patch_tensor(blob, pick_tensor(blob), nudge)


def flip_ulp(blob: bytes) -> bytes:
    """The smallest possible edit: one element moved by one ulp (numpy nextafter)."""
    import numpy as np

    def fn(a: Any) -> None:
        a.flat[0] = np.nextafter(a.flat[0], np.float32(np.inf), dtype=np.float32)

    out = patch_tensor(blob, pick_tensor(blob), fn)
    assert out != blob and len(out) == len(blob)
    return out


def rename_tensor(blob: bytes) -> bytes:
    """Same bytes, one key renamed (layer 0's q_proj A becomes a layer-9 tensor)."""
    header, data = st_split(blob)
    old = pick_tensor(blob)
    new = old.replace("layers.0.", "layers.9.")
    assert new != old and new not in header
    renamed = {(new if k == old else k): v for k, v in header.items()}
    return st_join(renamed, data)


def reshape_tensor(blob: bytes) -> bytes:
    """Same bytes, one tensor's shape transposed ([r, in] -> [in, r])."""
    header, data = st_split(blob)
    name = pick_tensor(blob)
    shape = header[name]["shape"]
    assert len(shape) == 2 and shape[0] != shape[1]
    header[name] = {**header[name], "shape": [shape[1], shape[0]]}
    return st_join(header, data)


def relabel_dtype(blob: bytes) -> bytes:
    """Same bytes, one F32 tensor relabelled I32."""
    header, data = st_split(blob)
    name = pick_tensor(blob)
    header[name] = {**header[name], "dtype": "I32"}
    return st_join(header, data)


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "weight_edit": edit_weight,
    "ulp_flip": flip_ulp,
    "renamed_tensor": rename_tensor,
    "reshaped_tensor": reshape_tensor,
    "dtype_relabel": relabel_dtype,
}
"""Edits of an adapter's weights file, each of which verify must catch."""
