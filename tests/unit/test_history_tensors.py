"""Adapter tensor deltas: reading weights without torch, and what the numbers mean."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from dlm_git.history.effective import lora_scale
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


def test_tensor_deltas_are_sorted_by_relative_change() -> None:
    a = {Q_A: np.array([3.0, 4.0]), Q_B: np.zeros(2), V_A: np.array([1.0, 0.0])}
    b = {Q_A: np.array([3.0, 4.0]), Q_B: np.array([0.0, 1e-3]), V_A: np.array([1.0, 0.5])}
    delta = compare(a, b, (2.0, 2.0))
    assert [t.name for t in delta.tensors] == [Q_B, V_A, Q_A]
    assert math.isinf(delta.tensors[0].rel_l2)  # moved from all zeros
    assert delta.tensors[1].rel_l2 == 0.5 and delta.tensors[1].max_abs == 0.5
    assert delta.tensors[2].rel_l2 == 0.0


def test_names_on_one_side_or_reshaped_are_not_compared() -> None:
    a = {Q_A: np.zeros((2, 2)), Q_B: np.zeros(2)}
    b = {Q_A: np.zeros(4), V_A: np.zeros(1)}
    delta = compare(a, b, (2.0, 2.0))
    assert (delta.added, delta.removed, delta.reshaped) == ([V_A], [Q_B], [Q_A])
    assert delta.tensors == []


# --------------------------------------------------------------------------- ΔW summaries

RNG = np.random.default_rng(7)
MODULES = [
    f"base_model.model.model.layers.{layer}.{kind}"
    for layer in (0, 1)
    for kind in ("self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj")
]


def lora(r: int = 8, out: int = 24, inp: int = 16, b_scale: float = 0.01) -> dict[str, object]:
    """A trained-looking adapter: lora_A of init size, lora_B small (it starts at zero)."""
    tensors: dict[str, object] = {}
    for m in MODULES:
        tensors[f"{m}.lora_A.weight"] = RNG.normal(0, 1 / math.sqrt(inp), (r, inp))
        tensors[f"{m}.lora_B.weight"] = RNG.normal(0, b_scale, (out, r))
    return tensors


def scaled_b(tensors: dict[str, object], factor: float) -> dict[str, object]:
    return {n: v * factor if ".lora_B." in n else v for n, v in tensors.items()}


def test_summaries_are_of_the_effective_weight_not_the_factors() -> None:
    """Every lora_B 0.6 larger, every lora_A as it was: each module's ΔW = (α/r)·B·A moved by
    0.6 relative, and the summaries say so; the factors' norms (lora_A dominates) would say
    far less (issue 25). The per-tensor lines stay the factors' own."""
    a = lora()
    delta = compare(a, scaled_b(a, 1.6), (2.0, 2.0))
    assert {g.group for g in delta.modules} == {"q_proj", "v_proj", "down_proj"}
    for group in delta.modules + delta.layers:
        assert group.rel_l2 == pytest.approx(0.6, rel=1e-12) and group.not_comparable == 0
    assert {g.group: g.modules for g in delta.layers} == {"0": 3, "1": 3}
    b_lines = [t for t in delta.tensors if ".lora_B." in t.name]
    assert len(delta.tensors) == 12 and all(t.rel_l2 == pytest.approx(0.6) for t in b_lines)


def test_the_scale_is_each_sides_own() -> None:
    a = lora()
    same = compare(a, a, (2.0, 4.0))  # the same factors under twice the alpha
    assert all(g.rel_l2 == pytest.approx(1.0) for g in same.modules)


def test_another_rank_with_the_same_effective_weight_is_no_change() -> None:
    a = lora(r=4)
    b = {  # r=8: the same B·A, padded with zero rank components, alpha/r kept equal
        n: np.concatenate([v, np.zeros_like(v)], axis=0 if ".lora_A." in n else 1)
        for n, v in a.items()
    }
    delta = compare(a, b, (16 / 4, 32 / 8))
    assert delta.reshaped and all(g.rel_l2 == 0.0 for g in delta.modules)


def test_what_cannot_be_compared_is_named_never_a_number() -> None:
    a, b = lora(out=24), lora(out=32)  # another base shape
    delta = compare(a, b, (2.0, 2.0))
    assert all(g.rel_l2 is None and g.modules == 0 for g in delta.modules + delta.layers)
    assert len(delta.not_comparable) == 6
    assert delta.not_comparable[0].reason == "dW is 24x16 in adapter a, 32x16 in b"
    unknown = compare(a, a, (2.0, "adapter_config.json has no positive integer r (None)"))
    assert all(g.rel_l2 is None for g in unknown.modules)
    assert unknown.not_comparable[0].reason.startswith("adapter b: adapter_config.json has no")
    one_sided = dict(a)
    del one_sided[f"{MODULES[0]}.lora_B.weight"]
    partial = compare(a, one_sided, (2.0, 2.0))
    q = next(g for g in partial.modules if g.group == "q_proj")
    assert (q.modules, q.not_comparable, q.rel_l2) == (1, 1, 0.0)


@pytest.mark.parametrize(
    ("config", "scale"),
    [
        ({"r": 8, "lora_alpha": 16}, 2.0),
        ({"r": 16, "lora_alpha": 16, "use_rslora": True}, 4.0),
        ({"r": 8, "lora_alpha": 16, "rank_pattern": {"q_proj": 4}}, "sets rank_pattern"),
        ({"r": 8, "lora_alpha": 16, "alpha_pattern": {"q_proj": 4}}, "sets alpha_pattern"),
        ({"r": 8, "lora_alpha": 16, "use_dora": True}, "DoRA"),
        ({"r": True, "lora_alpha": 16}, "no positive integer r"),
        ({"r": 8, "lora_alpha": "16"}, "no positive lora_alpha"),
        ([8, 16], "not a JSON object"),
    ],
)
def test_lora_scale_from_the_config(config: object, scale: float | str) -> None:
    got = lora_scale(config)
    if isinstance(scale, float):
        assert got == scale
    else:
        assert isinstance(got, str) and scale in got
