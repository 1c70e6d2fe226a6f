"""Committed records of any shape reach `log` and `verify --level segments` as what they
are: a value of the wrong kind, or JSON nested past the parser's bound, is read through
`dlm_git.safeparse` (`load_json`, `dig`) and described, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dlm_git.train.segments import parse_meta
from tests.support.cli import dlm_git
from tests.support.verified import SEGMENTS_OUT

pytestmark = pytest.mark.slow

DEEP = 100_000
"""Far past Python's recursion limit: `json.loads` raises RecursionError on it."""

WRONG_KINDS: dict[str, object] = {
    "list": [],
    "string": "adapter",
    "number": 5,
    "null": None,
    "files as a list": {"files": []},
    "files of strings": {"files": {"adapter_model.safetensors": "0" * 64}},
    "sha256 as a list": {"files": {"adapter_model.safetensors": {"sha256": ["x"]}}},
}
"""Manifest `adapter` values a commit may hold instead of an object of file records."""


def test_log_reads_a_signed_manifest_of_any_shape(forge: Any, tmp_path: Path) -> None:
    """A signature makes `log` read the adapter's file records the manifest holds (to
    judge what was signed): each wrong kind is no recorded adapter, and log still exits
    0 with every entry, in JSON and in text."""
    pytest.importorskip("model_signing")
    keys = tmp_path / "keys"
    assert forge._call_main(["keygen", "--out", str(keys)]).code == 0
    signed = forge._call_main(["sign", "--doc", "demo", "--key", str(keys / "dlm-signing-key.pem")])
    assert signed.code == 0, signed.stderr
    forge.commit("sign")
    manifest = forge.manifest()
    for kind, value in WRONG_KINDS.items():
        forge.write_canonical("demo/manifest.json", {**manifest, "adapter": value})
        forge.commit(f"adapter: {kind}")
    result = dlm_git(forge.root, "log", "--json")
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    (doc,) = json.loads(result.stdout)["documents"]
    entries = doc["entries"][: len(WRONG_KINDS)]
    assert [e["subject"] for e in entries] == [f"adapter: {k}" for k in reversed(WRONG_KINDS)]
    for entry in entries:
        assert entry["adapter_sha256"] is None, entry
        assert entry["signature"]["state"] in ("invalid", "untrusted"), entry
    text = dlm_git(forge.root, "log")
    assert text.code == 0 and "Traceback" not in text.stderr, text.stderr


def test_a_boundary_nested_past_the_parser_is_not_a_boundary() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_meta(b"[" * DEEP + b"]" * DEEP)
    with pytest.raises(ValueError):
        parse_meta(b"\xff")  # not UTF-8: also a ValueError


def test_verify_segments_names_the_boundary_nested_past_the_parser(forge: Any) -> None:
    files = forge.dir_files(SEGMENTS_OUT)
    first = min(n for n in files if n.endswith(".json"))
    files[first] = b"[" * DEEP + b"]" * DEEP
    forge.store_out(SEGMENTS_OUT, files)
    forge.commit("a boundary nested past the parser")
    result = forge.verify_cli("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 1 and result.verdict == "FAILED", result.explain()
    assert "Traceback" not in result.stderr, result.stderr
    step = int(first.removesuffix(".json").split("-")[1])
    detail = result.check("segments.chain")["detail"]
    assert detail == f"boundary {step}: JSON does not parse", result.explain()
