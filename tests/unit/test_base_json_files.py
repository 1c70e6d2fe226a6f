"""A base's own JSON files are read as transformers reads them: a lone UTF-16 surrogate in
some token's text (legal JSON, refused in every record dlm-git judges) is the base's
business, hashed as bytes, never a reason to refuse the base."""

from __future__ import annotations

from pathlib import Path

from dlm_git.base.resolve import check_native_tokenizer
from dlm_git.train.tokenize import config_chat_template


def _base(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text('{"model_type": "llama"}', "utf-8")
    (base / "tokenizer_config.json").write_text(
        '{"added_tokens_decoder": {"7": {"content": "\\ud800"}}, "chat_template": "{{ x }}"}',
        "utf-8",
    )
    return base


def test_a_tokenizer_config_with_a_lone_surrogate_is_no_reason_to_refuse_a_base(
    tmp_path: Path,
) -> None:
    base = _base(tmp_path)
    check_native_tokenizer(base)  # refused after a50e0e9: "not valid JSON (... surrogate)"
    assert config_chat_template(base)
