"""Adapter tensor deltas: reading weights without torch, and what the numbers mean."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np

from dlm_git.history.tensors import compare, layer_of, module_of, read_tensors

Q_A = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
Q_B = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
V_A = "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight"


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header: dict[str, object] = {}
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(t[2] for t in tensors.values()))


def test_names_give_module_and_layer() -> None:
    assert (module_of(Q_A), layer_of(Q_A)) == ("q_proj", "0")
    assert (module_of(V_A), layer_of(V_A)) == ("v_proj", "1")
    assert layer_of("lm_head.weight") == "-"


def test_f32_and_bf16_are_read_exactly(tmp_path: Path) -> None:
    values = np.array([1.0, -2.5, 0.15625, 3.0], dtype="<f4")
    bf16 = (values.view("<u4") >> 16).astype("<u2")  # exact: these values fit bf16
    path = tmp_path / "a.safetensors"
    write_safetensors(
        path, {Q_A: ("F32", [2, 2], values.tobytes()), Q_B: ("BF16", [4], bf16.tobytes())}
    )
    got = read_tensors(path)
    assert not isinstance(got, str)
    assert got[Q_A].tolist() == [[1.0, -2.5], [0.15625, 3.0]]
    assert got[Q_B].tolist() == [1.0, -2.5, 0.15625, 3.0]


def test_a_malformed_file_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", 10**6) + b"{}")
    assert isinstance(read_tensors(path), str)
    assert isinstance(read_tensors(tmp_path / "absent.safetensors"), str)


def test_deltas_are_sorted_and_grouped_by_squared_norms() -> None:
    a = {Q_A: np.array([3.0, 4.0]), Q_B: np.zeros(2), V_A: np.array([1.0, 0.0])}
    b = {Q_A: np.array([3.0, 4.0]), Q_B: np.array([0.0, 1e-3]), V_A: np.array([1.0, 0.5])}
    delta = compare(a, b)
    assert [t.name for t in delta.tensors] == [Q_B, V_A, Q_A]
    assert math.isinf(delta.tensors[0].rel_l2)  # moved from all zeros
    assert delta.tensors[1].rel_l2 == 0.5 and delta.tensors[1].max_abs == 0.5
    assert delta.tensors[2].rel_l2 == 0.0
    q = next(g for g in delta.modules if g.group == "q_proj")
    assert q.tensors == 2 and q.rel_l2 == math.sqrt(1e-6 / 25.0)
    assert [g.group for g in delta.layers] == ["1", "0"]


def test_names_on_one_side_or_reshaped_are_not_compared() -> None:
    a = {Q_A: np.zeros((2, 2)), Q_B: np.zeros(2)}
    b = {Q_A: np.zeros(4), V_A: np.zeros(1)}
    delta = compare(a, b)
    assert (delta.added, delta.removed, delta.reshaped) == ([V_A], [Q_B], [Q_A])
    assert delta.tensors == []
