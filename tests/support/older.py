"""Records as an older dlm-git wrote them, rebuilt consistently from a current one (the
forger's builders, `tests/support/forger.py`): what an honest old commit holds."""

from __future__ import annotations

import json

from tests.support.forger import Forge


def older_form(forge: Forge, config: bytes | None = None) -> None:
    """Make the commit's adapter what dlm-git wrote before the model card, consistently:
    the document's spec in adapter_config.json, revision null, no README.md, the manifest
    re-recording the adapter, as an older training did (`config`: other config bytes)."""
    from dlm_git.train.adapter import legacy_adapter_config

    files = forge.adapter_files()
    assert "README.md" in files
    del files["README.md"]
    current = json.loads(files["adapter_config.json"])
    assert current["base_model_name_or_path"] is None  # builtin:tiny: not on the Hub
    files["adapter_config.json"] = config or legacy_adapter_config(current, "builtin:tiny")
    forge.store_adapter(files, rebind="all")
    forge.commit("an adapter trained before the card")
