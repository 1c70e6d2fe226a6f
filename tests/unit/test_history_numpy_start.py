"""`diff` imports numpy (for the tensor deltas) with OpenBLAS's idle threads told to sleep
at once (`history.tensors.BLAS_IDLE`): by default each spins about 0.1 s after it starts,
more CPU than a small adapter's whole diff (issue 28). The environment is as it was
afterwards, and a value the user set is the one OpenBLAS reads."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlm_git.history.tensors import BLAS_IDLE

_SEEN_AT_IMPORT = """
import json, os, sys
from pathlib import Path

class Watch:
    seen = "numpy not imported"

    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            Watch.seen = os.environ.get("OPENBLAS_THREAD_TIMEOUT")
        return None

sys.meta_path.insert(0, Watch())
from dlm_git.history.tensors import read_tensors

tensors = read_tensors(Path(sys.argv[1]))
print(json.dumps({
    "at_import": Watch.seen,
    "after": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
    "read": sorted(tensors) if isinstance(tensors, dict) else tensors,
}))
"""


def _weights(path: Path) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<2f", 1.0, 2.0))
    return path


def _seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str | None) -> dict[str, Any]:
    name = BLAS_IDLE[0]
    if user is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, user)
    weights = _weights(tmp_path / "adapter_model.safetensors")
    proc = subprocess.run(
        [sys.executable, "-c", _SEEN_AT_IMPORT, str(weights)],
        capture_output=True,
        text=True,
        check=True,
    )
    seen: dict[str, Any] = json.loads(proc.stdout)
    assert seen["read"] == ["w"]
    return seen


def test_numpy_loads_with_idle_blas_threads_sleeping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _seen(tmp_path, monkeypatch, None)
    assert seen["at_import"] == BLAS_IDLE[1]
    assert seen["after"] is None  # no child process inherits it


def test_a_value_the_user_set_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _seen(tmp_path, monkeypatch, "20")
    assert (seen["at_import"], seen["after"]) == ("20", "20")
