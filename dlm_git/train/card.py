"""The adapter's model card: `adapter/README.md`, written beside the weights it describes.

Invariants:
- The card is a pure function of what makes the adapter: the base as peft names it (Hub
  repo id and revision, or a base that is not on the Hub, by its kind and tensor root),
  the effective training config, the inputs' digests (token stream root, sources Merkle
  root), the lock's versions and numerics, and the weights' sha256. So it is
  byte-identical across runs and machines, holds no time, host or absolute path, and is
  the same for every spelling of one base (`hf:org/name@rev` and the registry key).
- It names no digest of `dlm.lock` or `manifest.json`: the manifest records the card's
  own sha256 (a cycle), and both records hold the document's bytes, so they differ
  between spellings of one base. The card says so, and where they are.
- Its metadata block is what the Hub reads (`huggingface_hub.ModelCard`): `base_model`
  (Hub bases only), `library_name: peft`, `pipeline_tag`, `tags`. Every value is written
  as a JSON string, which YAML reads as the same string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json, canonical_json_sha256, sha256_file
from dlm_git.layout import ADAPTER_CARD, ADAPTER_WEIGHTS
from dlm_git.train.adapter import HubBase

if TYPE_CHECKING:
    from dlm_git.base.resolve import ResolvedBase
    from dlm_git.lock.schema import Lock

CARD_TAGS = ("dlm-git", "lora", "peft")
UNVERSIONED = ("dlm_git",)
"""Versions the card leaves out: dlm-git's own changes the card's bytes, not the weights."""


@dataclass(frozen=True)
class CardFacts:
    """What the card says besides the config and the weights' digest (known before fit)."""

    hub: HubBase
    base_kind: str
    base_tensor_root: str
    tokenizer_sha256: str
    tokens_root: str
    sources_root: str
    versions: dict[str, str]
    numerics: str
    hardware_tier: str
    determinism_class: str


def card_facts(
    resolved: ResolvedBase, lock: Lock, tokens_root: str, sources_root: str
) -> CardFacts:
    identity = resolved.identity
    return CardFacts(
        hub=hub_base(resolved),
        base_kind=resolved.spec.kind,
        base_tensor_root=identity.tensor_root,
        tokenizer_sha256=identity.tokenizer_sha256,
        tokens_root=tokens_root,
        sources_root=sources_root,
        versions={k: v for k, v in sorted(lock.pinned_versions.items()) if k not in UNVERSIONED},
        numerics=str(lock.determinism_flags.get("numerics", "native")),
        hardware_tier=lock.hardware_tier,
        determinism_class=lock.determinism_class,
    )


def hub_base(resolved: ResolvedBase) -> HubBase:
    """A Hub base (`hf:` or a registry key) as its repo id at the resolved revision; any
    other base as neither."""
    if resolved.spec.kind != "hf":
        return HubBase()
    return HubBase(resolved.spec.name, resolved.revision)


def write_card(staging: Path, facts: CardFacts, config: dict[str, Any]) -> None:
    """Write `README.md` into `staging`, where the weights already are."""
    weights = sha256_file(staging / ADAPTER_WEIGHTS)
    atomic_write_bytes(staging / ADAPTER_CARD, render_card(facts, config, weights).encode())


def render_card(facts: CardFacts, config: dict[str, Any], weights_sha256: str) -> str:
    parts = [
        _metadata(facts.hub),
        f"# LoRA adapter for {_base_title(facts)}\n",
        "Trained by dlm-git from a `.dlm` document, reproducibly: the commit that holds "
        "this adapter records what made it (`dlm.lock`, `manifest.json`), and "
        "`dlm-git verify` checks it.\n",
        _base_section(facts),
        _loading(facts),
        _settings(config),
        _digests(facts, config, weights_sha256),
        _verifying(),
    ]
    return "\n".join(parts)


def _metadata(hub: HubBase) -> str:
    lines = ["---"]
    if hub.repo_id is not None:
        lines.append(f"base_model: {json.dumps(hub.repo_id)}")
    lines += ['library_name: "peft"', 'pipeline_tag: "text-generation"', "tags:"]
    lines += [f"- {json.dumps(tag)}" for tag in CARD_TAGS]
    return "\n".join([*lines, "---", ""])


def _base_title(facts: CardFacts) -> str:
    if facts.hub.repo_id is not None:
        return facts.hub.repo_id
    return "dlm-git's built-in tiny base" if facts.base_kind == "builtin" else "a local base"


def _base_section(facts: CardFacts) -> str:
    rows = []
    if facts.hub.repo_id is not None:
        rows += [("Hub repo", facts.hub.repo_id), ("revision", facts.hub.revision or "-")]
    else:
        where = "builtin:tiny" if facts.base_kind == "builtin" else "a local directory"
        rows.append(("base", f"{where} (not on the Hub)"))
    rows += [("tensor root", facts.base_tensor_root), ("tokenizer sha256", facts.tokenizer_sha256)]
    return "## Base model\n\n" + _table(rows)


def _loading(facts: CardFacts) -> str:
    if facts.hub.repo_id is not None:
        code = (
            "from peft import AutoPeftModelForCausalLM\n\n"
            'model = AutoPeftModelForCausalLM.from_pretrained("path/to/this/adapter")\n'
        )
        note = (
            "`adapter_config.json` names the base by its Hub repo id and revision. "
            "Offline, set `HF_HUB_OFFLINE=1` and `HF_HUB_CACHE` to a cache holding that "
            "snapshot.\n"
        )
    else:
        code = (
            "from peft import PeftModel\n"
            "from transformers import AutoModelForCausalLM\n\n"
            'base = AutoModelForCausalLM.from_pretrained("path/to/the/base")\n'
            'model = PeftModel.from_pretrained(base, "path/to/this/adapter")\n'
        )
        first = (
            "build it with `dlm-git base build --out DIR` (builtin:tiny)"
            if facts.base_kind == "builtin"
            else "it is the directory the document names"
        )
        note = (
            "The base is not on the Hub, so `adapter_config.json` names none "
            f"(`base_model_name_or_path` is null): load the base first; {first}.\n"
        )
    return f"## Loading\n\n{note}\n```python\n{code}```\n"


def _settings(config: dict[str, Any]) -> str:
    text = canonical_json(config).decode("utf-8")
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    intro = "## Training settings\n\nThe effective config `manifest.json` records:\n\n"
    return f"{intro}{fence}json\n{text}{fence}\n"


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _digests(facts: CardFacts, config: dict[str, Any], weights_sha256: str) -> str:
    rows = [
        (ADAPTER_WEIGHTS + " sha256", weights_sha256),
        ("training config sha256 (`config_sha256`)", canonical_json_sha256(config)),
        ("token stream root (`tokens.root`)", facts.tokens_root),
        ("sources Merkle root (`sources.merkle_root`)", facts.sources_root),
    ]
    trained = ", ".join(f"{name} {version}" for name, version in facts.versions.items())
    return (
        "## Digests\n\n"
        + _table(rows)
        + f"\nTrained with {trained}; numerics profile `{facts.numerics}`, hardware tier "
        f"`{facts.hardware_tier}`, determinism class `{facts.determinism_class}`.\n"
    )


def _verifying() -> str:
    return (
        "## Verifying\n\n"
        "This card names no digest of `dlm.lock` or `manifest.json`: the manifest records "
        "this card's own sha256 (with every file of this directory), and both records hold "
        "the document's own bytes. They are in the commit, beside the `.dlm` document this "
        "adapter was trained from. In a clone of that repository:\n\n"
        "```sh\n"
        "dlm-git verify <commit> --doc <the .dlm document>                 # hashes\n"
        "dlm-git verify <commit> --doc <the .dlm document> --level replay  # retrain, compare\n"
        "```\n"
    )


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"| {name} | `{value}` |\n" for name, value in rows)
    return "| | |\n|---|---|\n" + body
