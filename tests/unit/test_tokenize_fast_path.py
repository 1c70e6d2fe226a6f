"""A base whose tokenizer files are all on `fasttok`'s whitelist is encoded with its Rust
tokenizer directly, and gives AutoTokenizer's ids for every input (issue 28).

Specification:
- For every base the project builds (builtin:tiny, the `dlm-git base build` families), the
  Rust tokenizer transformers leaves after loading it serializes exactly as
  `FastTokenizer.load`'s, the eos id and special tokens are the same, and ids agree with
  and without special tokens on a varied corpus; `RowTokenizer.tokenize` gives the same
  sequences (text rows, chat rows through the template, with and without a system prompt)
  as a RowTokenizer that encodes and renders through AutoTokenizer.
- A config with anything off the whitelist (a key, another class, tokens not registered,
  a special_tokens_map.json, truncation in tokenizer.json) takes the AutoTokenizer path.
- A cold `dlm-git tokenize` of a prose-only tiny document imports neither torch nor
  transformers; with an instruction section (rendered through the template) no torch.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlm_git.base.build import Shape, build_base
from dlm_git.base.families import FAMILIES
from dlm_git.base.tiny import corpus_text, ensure_tiny_base
from dlm_git.doc.sections import Section
from dlm_git.train.fasttok import GENERIC_MODEL_TYPES, FastTokenizer
from dlm_git.train.rows import Row, chat_row_id
from dlm_git.train.tokenize import RowTokenizer
from tests.support.cli import imports_of
from tests.support.env import run
from tests.support.gitrepo import init_repo
from tests.support.verified import DOC

FAST_FAMILIES = ("smollm2-135m", "pythia-70m")
SLOW_FAMILIES = ("qwen2.5-0.5b",)
"""AutoTokenizer loads `Qwen2Tokenizer` for model_type qwen2 whatever tokenizer_config.json
names (qwen2.5-coder-1.5b shares qwen2.5-0.5b's files): the AutoTokenizer path."""
FAMILY_NAMES = FAST_FAMILIES + SLOW_FAMILIES


def _corpus() -> list[str]:
    rng = random.Random(28)
    noise = [bytes(rng.randrange(256) for _ in range(200)).decode("latin-1") for _ in range(5)]
    lines = [line for line in corpus_text().split("\n") if line.strip()][:60]
    return [
        "",
        " ",
        "hello world",
        "  leading and trailing spaces  ",
        "tabs\tand\t\ttabs",
        "CRLF line\r\nnext\r\n\r\n",
        "unicode: naïve café Ωμέγα 日本語 한국어 العربية",
        "combining: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Z\u0351\u0352",
        "emoji: 👩‍👩‍👧 🏳️‍🌈 👍🏽 ✨",
        "specials inline: <|endoftext|> x <|im_start|>user\nhi<|im_end|> <|pad|> <|padding|>",
        "<|endoftext|>",
        "<|im_start|><|im_end|>",
        "near-specials: <|endoftext| <|im_start <|IM_END|> <<|im_end|>>",
        "long " * 3000,
        "x" * 10000,
        "\x00\x01\x7f control \u200b zero-width \ufeff bom",
        *lines,
        *noise,
    ]


@pytest.fixture(scope="module")
def family_bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {
        name: build_base(FAMILIES[name], Shape(layers=1, vocab=2048), out=root / name).out
        or root / name
        for name in FAMILY_NAMES
    }


@pytest.fixture(params=("builtin:tiny", *FAST_FAMILIES))
def base(request: pytest.FixtureRequest, family_bases: dict[str, Path]) -> Path:
    name = str(request.param)
    return ensure_tiny_base() if name == "builtin:tiny" else family_bases[name]


def _auto(base: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(base), trust_remote_code=False)


def test_a_built_base_takes_the_fast_path_and_encodes_as_autotokenizer(base: Path) -> None:
    fast = FastTokenizer.load(base)
    assert fast is not None, f"{base.name}: expected on the fast path"
    auto = _auto(base)
    assert type(auto).__name__ == "TokenizersBackend"
    assert auto._tokenizer.to_str() == fast.backend.to_str()
    assert fast.token_id("eos_token") == auto.eos_token_id is not None
    assert fast.special_tokens == auto.special_tokens_map
    for text in _corpus():
        for special in (True, False):
            want = list(auto(text, add_special_tokens=special)["input_ids"])
            assert fast.encode(text, special) == want, (text[:60], special)


@pytest.mark.parametrize("name", SLOW_FAMILIES)
def test_a_family_whose_model_type_picks_its_own_class_takes_the_autotokenizer_path(
    family_bases: dict[str, Path], name: str
) -> None:
    assert FastTokenizer.load(family_bases[name]) is None
    assert type(_auto(family_bases[name])).__name__ != "TokenizersBackend"


def test_every_generic_model_type_is_trusted_with_the_generic_class() -> None:
    """The reason `GENERIC_MODEL_TYPES` may hold a type: transformers' own table."""
    from transformers.models.auto import tokenization_auto as auto

    for model_type in GENERIC_MODEL_TYPES:
        assert model_type not in auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
        registered = auto.TOKENIZER_MAPPING_NAMES.get(model_type) or ""
        assert registered.removesuffix("Fast") != "MistralCommonBackend"


def test_an_added_token_dict_names_the_same_token(tmp_path: Path) -> None:
    """`eos_token` as transformers saves an AddedToken: the fast path reads its content."""
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    added = {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": False}
    _edit_config(base, eos_token={**added, "rstrip": False, "normalized": False})
    fast = FastTokenizer.load(base)
    assert fast is not None
    auto = _auto(base)
    assert auto._tokenizer.to_str() == fast.backend.to_str()
    assert fast.token_id("eos_token") == auto.eos_token_id == 0
    assert fast.special_tokens == auto.special_tokens_map


def _outside_whitelist(base: Path, dest: Path) -> Path:
    """A copy of `base` whose config carries a key off the whitelist that changes nothing
    here (the padding side: nothing is padded), so it takes the AutoTokenizer path."""
    shutil.copytree(base, dest)
    _edit_config(dest, padding_side="right")
    assert FastTokenizer.load(dest) is None
    return dest


def _edit_config(base: Path, **changes: Any) -> None:
    path = base / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text("utf-8")), **changes}), "utf-8")


def _rows(system_prompt: str | None, template_kind: str) -> list[Row]:
    rows = []
    for text in _corpus()[:20]:
        prose = Section("prose", text or "x")
        rows.append(Row(prose.section_id, prose.section_id, "text", prose))
    pairs = [("What is it?", "A test."), ("", ""), ("tabs\tq <|im_end|>", "é\r\n👍 " * 40)]
    for question, answer in pairs:
        pair = Section("instruction", question + answer, question=question, answer=answer)
        rid = chat_row_id(pair.section_id, system_prompt, template_kind)
        rows.append(Row(rid, pair.section_id, "chat", pair))
    return rows


def _sequences(
    tokenizer: RowTokenizer, rows: list[Row]
) -> Iterator[tuple[str, list[int], list[int]]]:
    for row in rows:
        for seq in tokenizer.tokenize(row):
            yield seq.row_id, seq.input_ids.tolist(), seq.labels.tolist()


@pytest.mark.parametrize("system_prompt", [None, "Answer briefly."])
def test_row_tokenizer_output_is_the_same_both_ways(
    base: Path, tmp_path: Path, system_prompt: str | None
) -> None:
    slow_base = _outside_whitelist(base, tmp_path / "slow")
    fast = RowTokenizer(base, system_prompt, 64)
    slow = RowTokenizer(slow_base, system_prompt, 64)
    assert fast.fast is not None and slow.fast is None
    assert fast.has_chat_template() == slow.has_chat_template()
    kind = "chat_template" if fast.has_chat_template() else "plain"
    rows = _rows(system_prompt, kind)
    assert fast.eos_id() == slow.eos_id()
    assert list(_sequences(fast, rows)) == list(_sequences(slow, rows))
    assert fast._tok is None, "the fast path loaded AutoTokenizer"


@pytest.mark.parametrize(
    "change",
    [
        {"add_bos_token": True},
        {"add_eos_token": False},
        {"add_prefix_space": True},
        {"tokenizer_class": "LlamaTokenizerFast"},
        {"tokenizer_class": None},
        {"eos_token": "<|not-a-token|>"},
        {"eos_token": {"content": "<|endoftext|>"}},
        {"split_special_tokens": True},
        {"added_tokens_decoder": {}},
        {"auto_map": {"AutoTokenizer": ["x.Tok", None]}},
        {"model_type": "qwen2"},
        {"model_name": "phi3"},
    ],
    ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items()),
)
def test_a_config_off_the_whitelist_takes_the_autotokenizer_path(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    assert FastTokenizer.load(base) is not None
    if set(change) <= {"model_type", "model_name"}:  # the model's config.json
        path = base / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text("utf-8")), **change}), "utf-8")
    else:
        _edit_config(base, **change)
    assert FastTokenizer.load(base) is None


def test_a_key_off_the_whitelist_can_change_the_ids(tmp_path: Path) -> None:
    """The whitelist is not a formality: `split_special_tokens` changes transformers' ids,
    which the Rust tokenizer alone would not."""
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    _edit_config(base, split_special_tokens=True)
    assert FastTokenizer.load(base) is None
    tokenizer = RowTokenizer(base, None, 64)
    assert len(tokenizer._encode("<|endoftext|>", True)) > 1  # split into ordinary tokens
    assert tokenizer._tok is not None


@pytest.mark.parametrize(
    "name, content",
    [
        ("special_tokens_map.json", {"eos_token": "<|endoftext|>"}),
        ("added_tokens.json", {}),
    ],
)
def test_a_file_transformers_merges_on_load_takes_the_autotokenizer_path(
    tmp_path: Path, name: str, content: dict[str, Any]
) -> None:
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    (base / name).write_text(json.dumps(content), "utf-8")
    assert FastTokenizer.load(base) is None


@pytest.mark.parametrize("name", ["default.jinja", "tool_use.jinja"])
def test_additional_chat_templates_take_the_autotokenizer_path(tmp_path: Path, name: str) -> None:
    """transformers reads `additional_chat_templates/*.jinja` on load: a `default.jinja`
    replaces tokenizer_config.json's template (other ids for every chat row), any other
    name leaves no default (an error). The rows are whatever AutoTokenizer makes of it."""
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    (base / "additional_chat_templates").mkdir()
    (base / "additional_chat_templates" / name).write_text(
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}", "utf-8"
    )
    assert FastTokenizer.load(base) is None
    tokenizer, auto = RowTokenizer(base, None, 64), RowTokenizer(base, None, 64)
    auto.__dict__["fast"] = None  # what AutoTokenizer alone makes of every row
    rows = _rows(None, "chat_template")
    try:
        expected: Any = list(_sequences(auto, rows))
    except Exception as exc:  # no default template: the same refusal either way
        expected = type(exc)
    try:
        got: Any = list(_sequences(tokenizer, rows))
    except Exception as exc:
        got = type(exc)
    assert got == expected


def test_truncation_in_tokenizer_json_takes_the_autotokenizer_path(tmp_path: Path) -> None:
    base = shutil.copytree(ensure_tiny_base(), tmp_path / "base")
    path = base / "tokenizer.json"
    data = json.loads(path.read_text("utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst"}
    data["truncation"]["stride"] = 0
    path.write_text(json.dumps(data), "utf-8")
    assert FastTokenizer.load(base) is None


PROSE = "\nProse only: the adapter learns this line, tabs\tand unicode naïve 👍.\n"


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    """A fresh repository whose tiny base is in place (`base resolve` copies the cache's)."""
    ensure_tiny_base()
    repo = init_repo(tmp_path / "repo")
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    run(["dlm-git", "base", "resolve", DOC, "--tiny-dir", "bases/tiny"], repo)
    return repo


def test_a_cold_tokenize_of_prose_imports_neither_torch_nor_transformers(
    tiny_repo: Path,
) -> None:
    doc = next((tiny_repo / DOC).glob("*.dlm"))
    _, frontmatter, _ = doc.read_text("utf-8").split("---\n", 2)
    doc.write_text(f"---\n{frontmatter}---\n{PROSE}", "utf-8")
    got = imports_of(tiny_repo, "tokenize", DOC, "--tiny-dir", "bases/tiny")
    assert got.code == 0, got.stdout
    assert "stream root" in got.stdout
    assert not {"torch", "transformers"} & got.modules, got.heavy


def test_a_cold_tokenize_with_a_chat_template_row_starts_no_torch(tiny_repo: Path) -> None:
    doc = next((tiny_repo / DOC).glob("*.dlm"))
    assert "::instruction::" in doc.read_text("utf-8")
    got = imports_of(tiny_repo, "tokenize", DOC, "--tiny-dir", "bases/tiny")
    assert got.code == 0, got.stdout
    assert "torch" not in got.modules, got.heavy
