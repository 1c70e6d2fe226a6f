"""No third-party plugin runs inside a dlm-git process (`dlm_git.plugins`).

A distribution declaring a `pydantic` entry point is installed for the run (a directory
on PYTHONPATH holding its module and its `.dist-info`, as pip leaves them); its module
appends to a marker file when it is imported. `dlm-git show` builds the document model
(pydantic), which is where pydantic loads every plugin it finds. The plugin is also
broken (it lacks `new_schema_validator`), as a careless or hostile one may be: loaded, it
would end the run in a traceback. The caller's environment does not switch plugins off
(`PYDANTIC_DISABLE_PLUGINS` empty: pydantic then loads them all).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlm_git.hooks.entry import run_hook
from dlm_git.plugins import ALL, SWITCH
from tests.support.cli import dlm_git
from tests.support.docs import write_doc

PLUGIN = """
import os
with open(os.environ["PLUGIN_MARKER"], "a", encoding="utf-8") as marker:
    marker.write("imported\\n")
plugin = object()
"""


def plugin_site(site: Path) -> Path:
    """`site` holding an installed distribution with one `pydantic` entry point."""
    info = site / "probe_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nprobe = probe_plugin:plugin\n")
    (site / "probe_plugin.py").write_text(PLUGIN)
    return site


def test_a_pydantic_plugin_installed_beside_dlm_git_is_never_loaded(tmp_path: Path) -> None:
    site = plugin_site(tmp_path / "site")
    marker = tmp_path / "marker"
    doc = write_doc(tmp_path / "doc", "A line to show.\n")
    env = {"PYTHONPATH": str(site), "PLUGIN_MARKER": str(marker), SWITCH: ""}
    shown = dlm_git(doc.parent, "show", doc.name, **env)
    assert shown.code == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert "dlm_id" in shown.stdout
    assert not marker.exists(), "dlm-git imported a pydantic plugin it did not choose"


def test_every_hook_switches_plugins_off_before_its_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    seen: list[str | None] = []
    assert run_hook(lambda: seen.append(os.environ.get(SWITCH)) or 0) == 0
    assert seen == [ALL]
