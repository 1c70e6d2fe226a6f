"""`dvcfiles.dir_md5` names a directory exactly as DVC does (checked against real `dvc add`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from dlm_git.dvcfiles import dir_md5, md5_file


def test_dir_md5_is_dvcs_name_for_the_directory(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run([*dvc, "init", "-q"], cwd=tmp_path, check=True)
    out = tmp_path / "adapter"
    out.mkdir()
    (out / "b.safetensors").write_bytes(b"\x00\x01weights")
    (out / "a_config.json").write_text('{"r": 8}\n', "utf-8")
    subprocess.run([*dvc, "add", "-q", "adapter"], cwd=tmp_path, check=True)
    recorded = yaml.safe_load((tmp_path / "adapter.dvc").read_text("utf-8"))["outs"][0]["md5"]
    listing = {p.name: md5_file(p) for p in out.iterdir()}
    assert dir_md5(listing) == recorded
    assert dir_md5({**listing, "c": "0" * 32}) != recorded
