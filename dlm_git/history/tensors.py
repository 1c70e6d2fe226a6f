"""How two adapters' tensors differ: per tensor, per module kind, per layer.

Invariants:
- Weights are read through dlm-git's strict safetensors header parser (a malformed file is
  a reason, not a crash) and numpy; no torch, no safetensors library. bf16 is widened to
  fp32 exactly; every comparison is computed in float64.
- Per tensor: relative L2 = ||b - a|| / ||a|| (||b|| / 0 is inf unless both are zero) and
  the largest absolute element difference. A tensor present on one side only, or with
  another shape or dtype, is named as such and not compared.
- Summaries aggregate squared norms, so a group's relative L2 is the whole group's
  (sqrt(sum ||d||^2) / sqrt(sum ||a||^2)), not an average of ratios. A group is the
  module a LoRA tensor belongs to (the name part before `lora_A` / `lora_B`, e.g.
  `q_proj`) or its layer (the first numbered name part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.fsutil import NotRegularFile, open_regular
from dlm_git.safetensors_header import SafetensorsFormatError, open_header

NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


@dataclass(frozen=True)
class TensorDelta:
    name: str
    rel_l2: float
    max_abs: float


@dataclass(frozen=True)
class GroupDelta:
    group: str
    rel_l2: float
    tensors: int


@dataclass(frozen=True)
class AdapterDelta:
    tensors: list[TensorDelta]
    """Compared tensors, the largest relative change first."""
    added: list[str]
    removed: list[str]
    reshaped: list[str]
    modules: list[GroupDelta]
    layers: list[GroupDelta]


def read_tensors(path: Path) -> dict[str, Any] | str:
    """name -> float64 array, or why the file cannot be read."""
    import numpy as np

    try:
        with open_regular(path) as fh:
            _, _, _, _, specs = open_header(fh, str(path))
            data = fh.read() or b""
    except (SafetensorsFormatError, NotRegularFile) as exc:
        return exc.one_line()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    out: dict[str, Any] = {}
    for spec in specs:
        kind = NUMPY_DTYPES.get(spec.dtype)
        if kind is None:
            return f"{path}: tensor {spec.name} has dtype {spec.dtype}, not a float"
        raw = np.frombuffer(data[spec.begin : spec.end], dtype=kind)
        if spec.dtype == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[spec.name] = raw.astype(np.float64).reshape(spec.shape)
    return out


def compare(a: dict[str, Any], b: dict[str, Any]) -> AdapterDelta:
    import numpy as np

    deltas: list[TensorDelta] = []
    reshaped: list[str] = []
    groups: dict[str, dict[str, list[float]]] = {"module": {}, "layer": {}}
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x.shape != y.shape:
            reshaped.append(name)
            continue
        if np.array_equal(x, y, equal_nan=True):  # the same values, non-finite ones too
            d2, a2, max_abs = 0.0, float(np.sum(x * x)), 0.0
        else:
            diff = y - x
            d2, a2 = float(np.sum(diff * diff)), float(np.sum(x * x))
            max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
        deltas.append(TensorDelta(name, _ratio(d2, a2), max_abs))
        for kind, key in (("module", module_of(name)), ("layer", layer_of(name))):
            sums = groups[kind].setdefault(key, [0.0, 0.0, 0.0])
            sums[0], sums[1], sums[2] = sums[0] + d2, sums[1] + a2, sums[2] + 1
    deltas.sort(key=lambda d: (-d.rel_l2, -d.max_abs, d.name))
    return AdapterDelta(
        tensors=deltas,
        added=sorted(set(b) - set(a)),
        removed=sorted(set(a) - set(b)),
        reshaped=reshaped,
        modules=_groups(groups["module"]),
        layers=_groups(groups["layer"]),
    )


def _ratio(d2: float, a2: float) -> float:
    if d2 == 0:
        return 0.0
    if a2 > 0:
        return math.sqrt(d2 / a2)
    return 0.0 if d2 == 0 else math.inf


def _groups(sums: dict[str, list[float]]) -> list[GroupDelta]:
    out = [GroupDelta(k, _ratio(v[0], v[1]), int(v[2])) for k, v in sums.items()]
    return sorted(out, key=lambda g: (-g.rel_l2, g.group))


def module_of(name: str) -> str:
    parts = name.split(".")
    for marker in ("lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B"):
        if marker in parts:
            index = parts.index(marker)
            return parts[index - 1] if index > 0 else marker
    return parts[-2] if len(parts) > 1 else name


def layer_of(name: str) -> str:
    return next((p for p in name.split(".") if p.isdigit()), "-")
