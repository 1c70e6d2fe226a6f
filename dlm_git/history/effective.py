"""How much two LoRA adapters change the model: the effective weight change per module.

Invariants:
- A LoRA module adds ΔW = s·B·A to its base weight, with s = α/r (α/√r under
  `use_rslora`) read from each side's own `adapter_config.json`. Two adapters are compared
  by ΔW, not by their factors: A and B are one factorisation among many (the same ΔW has
  any number of them), and `lora_A`, initialised at random and large beside a `lora_B`
  that starts at zero, would otherwise drown what training changed.
- Per module: relative L2 = ||ΔW_b - ΔW_a|| / ||ΔW_a|| (Frobenius, float64, computed in
  row blocks so no more than `BLOCK_ELEMENTS` of a product is held at once). The rank may
  differ between the sides: ΔW has the base weight's shape whatever r is.
- Never an invented number: a module is "not comparable", with the reason, when either
  side's scale is unknown (no or malformed config, `rank_pattern`/`alpha_pattern`, DoRA),
  when it is on one side only, when its A and B do not multiply, or when the two ΔW have
  different shapes. A group of modules whose every member is not comparable has no number.
- A tensor that is not a LoRA factor (a saved module, a bias) is its own effective weight.
- Groups (module kind, layer) aggregate squared norms: sqrt(sum d²) / sqrt(sum a²).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

FACTORS = {"lora_A": "A", "lora_B": "B", "lora_embedding_A": "A", "lora_embedding_B": "B"}
BLOCK_ELEMENTS = 1 << 22
"""Elements of a ΔW held at once (4 Mi float64: 32 MiB)."""
NOT_SUPPORTED = ("rank_pattern", "alpha_pattern")


class GroupDelta(NamedTuple):
    group: str
    rel_l2: float | None
    """None: no module of the group is comparable."""
    modules: int
    """Modules compared."""
    not_comparable: int = 0


class NotComparable(NamedTuple):
    module: str
    reason: str


class Effective(NamedTuple):
    modules: list[GroupDelta]
    layers: list[GroupDelta]
    not_comparable: list[NotComparable]


def lora_scale(config: Any) -> float | str:
    """s of ΔW = s·B·A from a parsed `adapter_config.json`, or why it cannot be known."""
    if not isinstance(config, Mapping):
        return "adapter_config.json is not a JSON object"
    r, alpha = config.get("r"), config.get("lora_alpha")
    if type(r) is not int or r < 1:
        return f"adapter_config.json has no positive integer r ({r!r})"
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha > 0:
        return f"adapter_config.json has no positive lora_alpha ({alpha!r})"
    for key in NOT_SUPPORTED:
        if config.get(key):
            return f"adapter_config.json sets {key} (a scale per module)"
    if config.get("use_dora"):
        return "a DoRA adapter (its dW also depends on the base weight)"
    root = math.sqrt(r) if config.get("use_rslora") else r
    return float(alpha) / root


def effective(
    a: Mapping[str, Any], b: Mapping[str, Any], scales: tuple[float | str, float | str]
) -> Effective:
    """The ΔW change of every module of `a` and `b` (name -> float64 array), grouped."""
    sides = (_modules(a), _modules(b))
    groups: dict[str, dict[str, list[float]]] = {"module": {}, "layer": {}}
    refused: list[NotComparable] = []
    for name in sorted(set(sides[0]) | set(sides[1])):
        got = _module_delta(name, sides[0].get(name), sides[1].get(name), scales)
        for kind, key in (("module", module_of(name)), ("layer", layer_of(name))):
            sums = groups[kind].setdefault(key, [0.0, 0.0, 0.0, 0.0])
            if isinstance(got, str):
                sums[3] += 1
            else:
                sums[0], sums[1], sums[2] = sums[0] + got[0], sums[1] + got[1], sums[2] + 1
        if isinstance(got, str):
            refused.append(NotComparable(name, got))
    return Effective(_groups(groups["module"]), _groups(groups["layer"]), refused)


def _modules(tensors: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """module name -> its factors {"A", "B"}, or {"W": tensor} for any other tensor."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in tensors.items():
        parts = name.split(".")
        marker = next((i for i, p in enumerate(parts) if p in FACTORS), None)
        if marker is None:
            out.setdefault(name, {})["W"] = value
        else:
            out.setdefault(".".join(parts[:marker]), {})[FACTORS[parts[marker]]] = value
    return out


def _module_delta(
    name: str,
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    scales: tuple[float | str, float | str],
) -> tuple[float, float] | str:
    """(||ΔW_b - ΔW_a||², ||ΔW_a||²), or why the module is not comparable."""
    if a is None or b is None:
        return f"only in adapter {'b' if a is None else 'a'}"
    if "W" in a or "W" in b:
        if set(a) != {"W"} or set(b) != {"W"}:
            return "a LoRA module on one side, a plain tensor on the other"
        return _plain(a["W"], b["W"])
    for side, factors in (("a", a), ("b", b)):
        if set(factors) != {"A", "B"}:
            return f"adapter {side} has no lora_{'B' if 'A' in factors else 'A'} for it"
        shape_a, shape_b = factors["A"].shape, factors["B"].shape
        if len(shape_a) != 2 or len(shape_b) != 2 or shape_b[1] != shape_a[0]:
            return f"adapter {side}'s lora_A {shape_a} and lora_B {shape_b} do not multiply"
    for side, scale in zip("ab", scales, strict=True):
        if isinstance(scale, str):
            return f"adapter {side}: {scale}"
    out_a, out_b = (a["B"].shape[0], a["A"].shape[1]), (b["B"].shape[0], b["A"].shape[1])
    if out_a != out_b:
        return f"dW is {out_a[0]}x{out_a[1]} in adapter a, {out_b[0]}x{out_b[1]} in b"
    return _product_delta(a, b, (float(scales[0]), float(scales[1])))


def _same(a: dict[str, Any], b: dict[str, Any], scales: tuple[float, float]) -> bool:
    """The same factors under the same scale (non-finite values too): no change."""
    import numpy as np

    return scales[0] == scales[1] and all(
        a[k].shape == b[k].shape and np.array_equal(a[k], b[k], equal_nan=True) for k in "AB"
    )


def _plain(x: Any, y: Any) -> tuple[float, float] | str:
    import numpy as np

    if x.shape != y.shape:
        return f"shape {x.shape} in adapter a, {y.shape} in b"
    with np.errstate(all="ignore"):
        a2 = float(np.sum(x * x))
        if np.array_equal(x, y, equal_nan=True):
            return 0.0, a2
        d = y - x
        return float(np.sum(d * d)), a2


def _product_delta(
    a: dict[str, Any], b: dict[str, Any], scales: tuple[float, float]
) -> tuple[float, float]:
    import numpy as np

    rows, cols = a["B"].shape[0], a["A"].shape[1]
    step = max(1, BLOCK_ELEMENTS // max(cols, 1))
    same = _same(a, b, scales)
    d2 = a2 = 0.0
    with np.errstate(all="ignore"):  # a hostile adapter's overflow is a value, not a warning
        for start in range(0, rows, step):
            wa = scales[0] * (a["B"][start : start + step] @ a["A"])
            a2 += float(np.sum(wa * wa))
            if not same:
                d = scales[1] * (b["B"][start : start + step] @ b["A"]) - wa
                d2 += float(np.sum(d * d))
    return d2, a2


def ratio(d2: float, a2: float) -> float:
    """sqrt(d2 / a2): 0 when nothing moved, inf when it moved from all zeros."""
    if d2 == 0:
        return 0.0
    return math.sqrt(d2 / a2) if a2 > 0 else math.inf


def _groups(sums: dict[str, list[float]]) -> list[GroupDelta]:
    out = [
        GroupDelta(k, ratio(v[0], v[1]) if v[2] else None, int(v[2]), int(v[3]))
        for k, v in sums.items()
    ]
    return sorted(out, key=lambda g: (g.rel_l2 is None, -(g.rel_l2 or 0.0), g.group))


def module_of(name: str) -> str:
    """The module kind of a module or tensor name (`q_proj`)."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        if part in FACTORS:
            return parts[i - 1] if i > 0 else part
    if parts[-1] in ("weight", "bias") and len(parts) > 1:
        return parts[-2]
    return parts[-1]


def layer_of(name: str) -> str:
    return next((p for p in name.split(".") if p.isdigit()), "-")
