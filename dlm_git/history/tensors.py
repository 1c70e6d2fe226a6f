"""How two adapters' tensors differ: per tensor, per module kind, per layer.

Invariants:
- Weights are read through dlm-git's strict safetensors header parser (a malformed file is
  a reason, not a crash) and numpy; no torch, no safetensors library. bf16 is widened to
  fp32 exactly; every comparison is computed in float64.
- numpy is imported when the first weights are read, with OpenBLAS's idle threads set to
  sleep at once (`BLAS_IDLE`, unless the environment sets it): what a thread does while
  idle changes no number, and a short diff no longer pays for spinning threads.
- Per tensor: relative L2 = ||b - a|| / ||a|| (||b|| / 0 is inf unless both are zero) and
  the largest absolute element difference. A tensor present on one side only, or with
  another shape or dtype, is named as such and not compared.
- The summaries by module kind (`q_proj`) and by layer (the first numbered name part)
  are of the effective weight change ΔW = (α/r)·B·A (`history.effective`), never of the
  factors: the per-tensor lines are the factors' own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, open_regular, read_regular
from dlm_git.history.effective import GroupDelta as GroupDelta
from dlm_git.history.effective import NotComparable, effective, lora_scale, ratio
from dlm_git.history.effective import layer_of as layer_of
from dlm_git.history.effective import module_of as module_of
from dlm_git.layout import ADAPTER_CONFIG
from dlm_git.safeparse import load_json
from dlm_git.safetensors_header import SafetensorsFormatError, open_header

NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
BLAS_IDLE = ("OPENBLAS_THREAD_TIMEOUT", "4")
"""How long numpy's OpenBLAS threads spin idle before they sleep (2^4 cycles; its default,
2^28, about 0.1 s per thread: more CPU than a small adapter's whole diff)."""


class TensorDelta(NamedTuple):
    name: str
    rel_l2: float
    max_abs: float


class AdapterDelta(NamedTuple):
    tensors: list[TensorDelta]
    """Compared tensors, the largest relative change first."""
    added: list[str]
    removed: list[str]
    reshaped: list[str]
    modules: list[GroupDelta]
    """ΔW by module kind (`history.effective`), the largest change first."""
    layers: list[GroupDelta]
    """ΔW by layer."""
    not_comparable: list[NotComparable]
    """Modules whose ΔW cannot be compared, each with why."""


def read_tensors(path: Path) -> dict[str, Any] | str:
    """name -> float64 array, or why the file cannot be read."""
    _import_numpy()
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


def _import_numpy() -> None:
    """numpy, its OpenBLAS threads made to sleep as soon as they are idle (`BLAS_IDLE`;
    read once, when the library loads): only how an idle thread waits changes, never how
    a product is split among threads, so every number is the same. A value already set is
    kept, and the environment is restored (no child process inherits it)."""
    if "numpy" in sys.modules:
        return
    name, value = BLAS_IDLE
    set_here = name not in os.environ
    if set_here:
        os.environ[name] = value
    try:
        import numpy  # noqa: F401
    finally:
        if set_here:
            os.environ.pop(name, None)


def read_scale(weights: Path) -> float | str:
    """The LoRA scale s of ΔW = s·B·A from the `adapter_config.json` beside `weights`, or
    why it cannot be known (`effective.lora_scale`)."""
    path = weights.parent / ADAPTER_CONFIG
    try:
        config = load_json(read_regular(path, MAX_RECORD_BYTES), finite=True, unique_keys=True)
    except NotRegularFile as exc:
        return exc.one_line()
    except OSError as exc:
        return f"{ADAPTER_CONFIG}: {exc.strerror or exc}"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{ADAPTER_CONFIG} is not valid JSON ({str(exc)[:80]})"
    return lora_scale(config)


def compare(
    a: dict[str, Any], b: dict[str, Any], scales: tuple[float | str, float | str]
) -> AdapterDelta:
    """Per tensor, and ΔW per module with each side's LoRA scale (`effective.lora_scale`,
    or why it is unknown)."""
    import numpy as np

    deltas: list[TensorDelta] = []
    reshaped: list[str] = []
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
        deltas.append(TensorDelta(name, ratio(d2, a2), max_abs))
    deltas.sort(key=lambda d: (-d.rel_l2, -d.max_abs, d.name))
    summary = effective(a, b, scales)
    return AdapterDelta(
        tensors=deltas,
        added=sorted(set(b) - set(a)),
        removed=sorted(set(a) - set(b)),
        reshaped=reshaped,
        modules=summary.modules,
        layers=summary.layers,
        not_comparable=summary.not_comparable,
    )
