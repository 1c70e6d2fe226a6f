"""Registry of base keys used by documents written for the original `dlm` tool.

Each key maps to a Hugging Face repo id. Where a revision is pinned here it is used as is;
where it is `None` the revision is taken from the local Hugging Face cache snapshot that
`refs/main` points to at resolution time, and that resolved 40-hex revision is what
`dlm.lock` records and later enforces (changing it is an ERROR). No revision below was
invented: none could be confirmed offline, so none is pinned in code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegistryEntry:
    repo_id: str
    revision: str | None
    license: str


REGISTRY: dict[str, RegistryEntry] = {
    "smollm2-135m": RegistryEntry("HuggingFaceTB/SmolLM2-135M-Instruct", None, "apache-2.0"),
    "smollm2-360m": RegistryEntry("HuggingFaceTB/SmolLM2-360M-Instruct", None, "apache-2.0"),
    "smollm2-1.7b": RegistryEntry("HuggingFaceTB/SmolLM2-1.7B-Instruct", None, "apache-2.0"),
    "qwen2.5-0.5b": RegistryEntry("Qwen/Qwen2.5-0.5B-Instruct", None, "apache-2.0"),
    "qwen2.5-1.5b": RegistryEntry("Qwen/Qwen2.5-1.5B-Instruct", None, "apache-2.0"),
    "qwen2.5-3b": RegistryEntry("Qwen/Qwen2.5-3B-Instruct", None, "qwen-research"),
    "qwen2.5-coder-1.5b": RegistryEntry("Qwen/Qwen2.5-Coder-1.5B-Instruct", None, "apache-2.0"),
}
