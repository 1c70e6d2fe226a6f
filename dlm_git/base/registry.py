"""Registry of the base keys the original `dlm` tool knows: each maps to its Hugging Face
repo id and the 40-hex revision the original tool pins.

Invariants:
- A key names one snapshot: `repo_id` at `revision`. Resolution looks for exactly that
  snapshot in the local Hugging Face cache (never `refs/main`), and `dlm.lock` records it.
- Every revision below is copied from the original tool's own registry
  (`ORIGINAL_SOURCE`), where each entry pins "an exact HuggingFace commit SHA" that its
  `scripts/refresh-registry.py` checks against the Hub weekly; none was invented. Where
  a second public source states the same revision, it is named beside the entry.
- The original tool's vision- and audio-language keys are known here too
  (`NOT_TEXT`), so a document naming one is refused in one line saying why, not as an
  unknown key: dlm-git trains text-only causal language models.
- `revision=None` (no entry today) would mean "unconfirmed": the key then resolves to the
  cache's `refs/main`, and the lock records and enforces the revision found.
"""

from __future__ import annotations

from typing import NamedTuple


class RegistryEntry(NamedTuple):
    repo_id: str
    revision: str | None
    license: str


ORIGINAL_SOURCE = (
    "github.com/tenseleyFlow/DocumentLanguageModel src/dlm/base_models/registry.py "
    "at 1c83a65efd2acb2facfdc332754b5399768e3059"
)
"""Where every revision below is stated (the original `dlm` tool's registry)."""


def _entry(repo_id: str, revision: str, license: str) -> RegistryEntry:
    return RegistryEntry(repo_id, revision, license)


REGISTRY: dict[str, RegistryEntry] = {
    # the original tool's launch registry (commit b9db74a, 2026-04-18), never changed since
    "smollm2-135m": _entry(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        # also pinned by nebulai's test_real_smollm2_matches_reference (a public test that
        # downloads this revision and checks its 30 layers, 9/3 heads, hidden 576)
        "12fd25f77366fa6b3b4b768ec3050bf629380bac",
        "apache-2.0",
    ),
    "smollm2-360m": _entry(
        "HuggingFaceTB/SmolLM2-360M-Instruct",
        "a10cc1512eabd3dde888204e902eca88bddb4951",
        "apache-2.0",
    ),
    "smollm2-1.7b": _entry(
        "HuggingFaceTB/SmolLM2-1.7B-Instruct",
        "31b70e2e869a7173562077fd711b654946d38674",
        "apache-2.0",
    ),
    "qwen2.5-0.5b": _entry(
        "Qwen/Qwen2.5-0.5B-Instruct", "7ae557604adf67be50417f59c2c2f167def9a775", "apache-2.0"
    ),
    "qwen2.5-1.5b": _entry(
        "Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", "apache-2.0"
    ),
    "qwen2.5-3b": _entry(
        "Qwen/Qwen2.5-3B-Instruct", "aa8e72537993ba99e69dfaafa59ed015b17504d1", "qwen-research"
    ),
    "qwen2.5-coder-1.5b": _entry(
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "2e1fd397ee46e1388853d2af2c993145b0f1098a",
        "apache-2.0",
    ),
    "llama-3.2-1b": _entry(
        "meta-llama/Llama-3.2-1B-Instruct", "9213176726f574b556790deb65791e0c5aa438b6", "llama3.2"
    ),
    "llama-3.2-3b": _entry(
        "meta-llama/Llama-3.2-3B-Instruct", "0cb88a4f764b7a12671c53f0838cd831a0843b95", "llama3.2"
    ),
    "phi-3.5-mini": _entry(
        "microsoft/Phi-3.5-mini-instruct", "2fe192450127e6a83f7441aef6e3ca586c338b77", "mit"
    ),
    # added to the original registry 2026-04-22/23 (revisions as of its commit 29a900f,
    # "Refresh Sprint 40 closeout proofs", and e405098 for Llama 3.3)
    "qwen3-1.7b": _entry(
        "Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e", "apache-2.0"
    ),
    "qwen3-1.7b-thinking": _entry(
        "Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e", "apache-2.0"
    ),
    "qwen3-4b": _entry("Qwen/Qwen3-4B", "1cfa9a7208912126459214e8b04321603b3df60c", "apache-2.0"),
    "qwen3-8b": _entry("Qwen/Qwen3-8B", "b968826d9c46dd6066d109eabc6255188de91218", "apache-2.0"),
    "llama-3.3-8b-instruct": _entry(
        "allura-forge/Llama-3.3-8B-Instruct", "df95224cf87c32d9f4958dd284a07ded620aa4fc", "llama3.3"
    ),
    "smollm3-3b": _entry(
        "HuggingFaceTB/SmolLM3-3B", "a07cc9a04f16550a088caea529712d1d335b0ac1", "apache-2.0"
    ),
    "olmo-2-7b-instruct": _entry(
        "allenai/OLMo-2-1124-7B-Instruct", "470b1fba1ae01581f270116362ee4aa1b97f4c84", "apache-2.0"
    ),
    "gemma-2-2b-it": _entry(
        "google/gemma-2-2b-it", "299a8560bedf22ed1c72a8a11e7dce4a7f9f51f8", "gemma"
    ),
    "gemma-2-9b-it": _entry(
        "google/gemma-2-9b-it", "11c9b309abf73637e4b6f9a3fa1e92e615547819", "gemma"
    ),
    "phi-4-mini-reasoning": _entry(
        "microsoft/Phi-4-mini-reasoning", "0e3b1e2d02ee478a3743abe3f629e9c0cb722e0a", "mit"
    ),
    "mixtral-8x7b-instruct": _entry(
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "eba92302a2861cdc0098cc54bc9f17cb2c47eb61",
        "apache-2.0",
    ),
}

NOT_TEXT: dict[str, str] = {
    "mistral-small-3.1-24b-instruct": "vision-language",
    "paligemma-3b-mix-224": "vision-language",
    "qwen2-vl-2b-instruct": "vision-language",
    "internvl2-2b": "vision-language, remote-code",
    "internvl3-2b": "vision-language, remote-code",
    "qwen2-audio-7b-instruct": "audio-language",
}
"""The original tool's keys for bases that are not text-only causal language models."""
