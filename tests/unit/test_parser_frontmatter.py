"""Parsing a `.dlm`'s frontmatter: the fences, YAML errors named by line and column, unknown
or invalid keys named by their line, `dlm_id` and `dlm_version`, the defaults, and the
original format's documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.errors import FrontmatterError
from dlm_git.doc.schema import MAX_DLM_VERSION, Frontmatter
from tests.support.docs import DLM_ID
from tests.support.parsing import HEAD, error, parse

# --- frontmatter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param("", id="empty"),
        pytest.param("--- \ndlm_id: x\n---\n", id="trailing-space"),
        pytest.param(" ---\n---\n", id="leading-space"),
        pytest.param("----\n---\n", id="four-dashes"),
        pytest.param("# title\n---\n", id="no-frontmatter"),
    ],
)
def test_line_one_must_be_exactly_dashes(tmp_path: Path, data: str) -> None:
    text = error(tmp_path, data, FrontmatterError, 1, 1)
    assert "line 1 must be exactly '---'" in text


def test_unclosed_frontmatter(tmp_path: Path) -> None:
    text = error(tmp_path, f"---\ndlm_id: {DLM_ID}\n--- \nbody\n", FrontmatterError, 1, 1)
    assert "not closed" in text


def test_invalid_yaml_names_line_and_col(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\nbase_model: a: b\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3, 14)
    assert "not valid YAML" in text


def test_yaml_tab_indent_names_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\ntraining:\n\tlora_r: 4\n---\n"
    error(tmp_path, data, FrontmatterError, 4, 1)


@pytest.mark.parametrize(
    "yaml_text", ["- a\n- b\n", "just a string\n", "42\n"], ids=["list", "string", "int"]
)
def test_frontmatter_must_be_mapping(tmp_path: Path, yaml_text: str) -> None:
    text = error(tmp_path, "---\n" + yaml_text + "---\n", FrontmatterError, 2, 1)
    assert "must be a YAML mapping" in text


def test_unknown_top_level_key_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\nbase_model: builtin:tiny\nlearning_rate: 0.1\n---\n"
    text = error(tmp_path, data, FrontmatterError, 4)
    assert "unknown key 'learning_rate'" in text


def test_unknown_nested_key_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\ntraining:\n  lora_r: 4\n  foo: 1\n  seed: 3\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "unknown key 'training.foo'" in text


def test_invalid_nested_value_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\ntraining:\n  lora_r: 4\n  lr_scheduler: exponential\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "invalid value for 'training.lr_scheduler'" in text


def test_missing_dlm_id(tmp_path: Path) -> None:
    text = error(tmp_path, "---\nbase_model: builtin:tiny\n---\n", FrontmatterError, 1)
    assert "missing required key 'dlm_id'" in text


def test_empty_frontmatter_is_missing_dlm_id(tmp_path: Path) -> None:
    text = error(tmp_path, "---\n---\n", FrontmatterError, 1)
    assert "missing required key 'dlm_id'" in text


def test_missing_nested_required_key_points_at_its_parent(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\ntraining:\n  sources:\n    - include: ['*.md']\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "missing required key 'training.sources.0.path'" in text


@pytest.mark.parametrize(
    "bad",
    [
        "nope",
        "01M800GRBP0GEV3WAMXAHDD42",  # 25 chars
        "01M800GRBP0GEV3WAMXAHDD42BX",  # 27 chars
        "81M800GRBP0GEV3WAMXAHDD42B",  # first char > 7 overflows 128 bits
        "01M800GRBP0GEV3WAMXAHDD42U",  # U is not Crockford base32
    ],
)
def test_bad_ulid(tmp_path: Path, bad: str) -> None:
    data = f"---\nbase_model: builtin:tiny\ndlm_id: {bad}\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3)
    assert "invalid value for 'dlm_id'" in text and "ULID" in text


def test_lowercase_ulid_is_uppercased(tmp_path: Path) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {DLM_ID.lower()}\n---\n")
    assert doc.frontmatter.dlm_id == DLM_ID


@pytest.mark.parametrize("version", [0, 16, -1])
def test_dlm_version_out_of_range(tmp_path: Path, version: int) -> None:
    data = f"---\ndlm_id: {DLM_ID}\ndlm_version: {version}\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3)
    assert "invalid value for 'dlm_version'" in text


@pytest.mark.parametrize("version", [1, 7, 15])
def test_dlm_version_in_range(tmp_path: Path, version: int) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {DLM_ID}\ndlm_version: {version}\n---\n")
    assert doc.frontmatter.dlm_version == version
    assert MAX_DLM_VERSION == 15


def test_defaults(tmp_path: Path) -> None:
    fm = parse(tmp_path, HEAD).frontmatter
    assert fm == Frontmatter(dlm_id=DLM_ID)
    assert fm.dlm_version == 1
    assert fm.base_model == "builtin:tiny"
    assert fm.system_prompt is None
    assert fm.export is None
    t = fm.training
    assert (t.adapter, t.lora_r, t.lora_alpha, t.lora_dropout) == ("lora", 8, 16, 0.05)
    assert (t.target_modules, t.sequence_len, t.micro_batch_size, t.grad_accum) == (
        "auto",
        256,
        4,
        1,
    )
    assert (t.learning_rate, t.num_epochs, t.max_steps, t.seed) == (2e-4, 1, None, 42)
    assert (t.lr_scheduler, t.warmup_ratio, t.precision) == ("linear", 0.1, "auto")
    assert (t.sources, t.sources_policy) == ((), "strict")
    assert (t.cache.enabled, t.cache.max_bytes, t.cache.prune_older_than_days) == (
        True,
        10 * 1024**3,
        90,
    )


ORIGINAL_DLM = """\
---
dlm_id: 01JD3Z8X9Q4W5E6R7T8Y9V0A1K
dlm_version: 3
base_model: {base}
system_prompt: You are a terse assistant.
training:
  lora_r: 16
  lora_alpha: 32
  lora_dropout: 0.05
  sequence_len: 2048
  micro_batch_size: 2
  grad_accum: 4
  learning_rate: 0.0002
  num_epochs: 3
  seed: 1234
  sources_policy: permissive
  sources:
    - path: ../shared/notes
      include: ["**/*.md"]
export:
  default_quant: Q4_K_M
  default_temperature: 0.7
  default_top_p: 0.9
---

# Notes

::instruction::
### Q
What is a DLM?

### A
A document that trains a model.

### Q !probe
What does a DLM train?

### A
A LoRA adapter.
"""


@pytest.mark.parametrize(
    "base",
    [
        "smollm2-135m",
        "smollm2-360m",
        "smollm2-1.7b",
        "qwen2.5-1.5b",
        "qwen2.5-3b",
        "qwen2.5-coder-1.5b",
    ],
)
def test_original_dlm_document_parses(tmp_path: Path, base: str) -> None:
    doc = parse(tmp_path, ORIGINAL_DLM.format(base=base))
    fm = doc.frontmatter
    assert fm.dlm_version == 3
    assert fm.base_model == base
    assert fm.export is not None
    assert fm.export.default_quant == "Q4_K_M"
    assert fm.export.default_temperature == 0.7
    assert fm.export.default_top_p == 0.9
    assert fm.training.sources_policy == "permissive"
    assert fm.training.sources[0].path == "../shared/notes"
    assert fm.training.sources[0].include == ("**/*.md",)
    assert fm.training.lora_r == 16 and fm.training.num_epochs == 3
    assert [(s.type_name, s.line, s.probe) for s in doc.sections] == [
        ("prose", 26, False),
        ("instruction", 29, False),
        ("instruction", 35, True),  # the original's probe marker
    ]
    assert doc.sections[2].question == "What does a DLM train?"


def test_unknown_export_key_is_an_error(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {DLM_ID}\nexport:\n  default_quant: Q8_0\n  gguf: true\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "unknown key 'export.gguf'" in text
