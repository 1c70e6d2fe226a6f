"""A base's `additional_chat_templates/` is part of its tokenizer (issue 28's review).

Specification:
- transformers' tokenizer loader reads every `*.jinja` in a local base's
  `additional_chat_templates/` (`default.jinja` replaces tokenizer_config.json's
  template), so an edit there changes what a chat row tokenizes to. The tokenizer
  digest (the token cache's key, the manifest's `tokenizer_sha256`) covers those files:
  the next `tokenize` misses the cache and writes the new tokens,
  never the old ones from the cache.
- A base without that folder keeps the digest it always had (no record or cache moves).
- `verify`'s `base.identity` compares the templates. A record equal to the digest of the
  base's files without the folder compares nothing about them (recorded before dlm-git
  hashed them, or from a base that had none): ABSENT, with why, never a pass.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from dlm_git.base.resolve import CHAT_TEMPLATE_DIR, base_identity, tokenizer_digest
from dlm_git.base.tiny import ensure_tiny_base
from dlm_git.contract.adapter import base_check
from dlm_git.contract.outcome import Check, Checks, Outcome
from tests.support.cli import cli
from tests.support.corpus import make_corpus_doc

BODY = """
# Notes

Prose the tokenizer windows.

::instruction::
### Q
Which template renders this?

### A
The base's default one.
"""
TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '"
    "{sep}' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant{sep}' }}{% endif %}"
)


def tokenize(repo: Path, **env: str) -> dict[str, object]:
    proc = cli("tokenize", "doc", "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    summary: dict[str, object] = json.loads(proc.stdout)
    return summary


def test_an_edited_default_template_misses_the_cache_and_tokenizes_anew(
    git_repo: Path, base_cache: Path
) -> None:
    base = git_repo / "mybase"
    shutil.copytree(ensure_tiny_base(), base)
    default = base / CHAT_TEMPLATE_DIR / "default.jinja"
    default.parent.mkdir()
    default.write_text(TEMPLATE.replace("{sep}", "\\n"), "utf-8")
    make_corpus_doc(git_repo, n_files=2, body=BODY, seq_len=64, base="../mybase")
    first = tokenize(git_repo)
    assert first["cache"] == {**first["cache"], "misses": 4}  # type: ignore[dict-item]
    default.write_text(TEMPLATE.replace("{sep}", ": "), "utf-8")
    second = tokenize(git_repo)
    # the cache is keyed by the tokenizer's digest: another tokenizer, every row again
    assert second["cache"]["misses"] == 4, second  # type: ignore[index]
    assert second["stream_root"] != first["stream_root"]
    # and what the cache now holds is what a cold tokenize of the edited base writes
    cold = tokenize(git_repo, DLM_GIT_CACHE_DIR=str(git_repo.parent / "fresh-cache"))
    assert cold["stream_root"] == second["stream_root"]


def test_only_jinja_files_of_the_folder_count_and_none_changes_an_old_digest(
    tmp_path: Path, base_cache: Path
) -> None:
    base = tmp_path / "b"
    shutil.copytree(ensure_tiny_base(), base)
    before = tokenizer_digest(base)
    assert before.untemplated is None
    folder = base / CHAT_TEMPLATE_DIR
    folder.mkdir()
    (folder / "README.md").write_text("not read by the loader", "utf-8")
    (folder / "sub.jinja").mkdir()  # not a file: the loader cannot read it either
    assert tokenizer_digest(base) == before
    (folder / "tool_use.jinja").write_text("{{ messages }}", "utf-8")
    with_one = tokenizer_digest(base)
    assert with_one.sha256 != before.sha256 and with_one.untemplated == before.sha256
    (folder / "tool_use.jinja").write_text("{{ messages | tojson }}", "utf-8")
    assert tokenizer_digest(base).sha256 not in (before.sha256, with_one.sha256)


def identity_check(base: Path, tokenizer_sha256: str) -> Check:
    """`base.identity` of a manifest recording this base with `tokenizer_sha256`."""
    ident = base_identity(base, None)
    manifest = {
        "tokenizer_sha256": tokenizer_sha256,
        "base": {"spec": "../b", "revision": None, "tensor_root": ident.tensor_root},
    }
    checks = Checks()
    base_check(checks, manifest, base)
    found = checks.get("base.identity")
    assert found is not None
    return found


def test_verify_compares_the_templates_and_says_when_a_record_cannot(
    tmp_path: Path, base_cache: Path
) -> None:
    base = tmp_path / "b"
    shutil.copytree(ensure_tiny_base(), base)
    plain = tokenizer_digest(base).sha256
    folder = base / CHAT_TEMPLATE_DIR
    folder.mkdir()
    (folder / "default.jinja").write_text("{{ messages }}", "utf-8")
    templated = tokenizer_digest(base).sha256
    assert identity_check(base, templated).state is Outcome.OK
    # recorded with another template: a comparison that failed
    (folder / "default.jinja").write_text("{{ messages | tojson }}", "utf-8")
    assert identity_check(base, templated).state is Outcome.FAILED
    # the digest of the files without the folder: a record from before dlm-git hashed
    # it, or one from a base that had none; the record cannot say which
    absent = identity_check(base, plain)
    assert absent.state is Outcome.ABSENT and CHAT_TEMPLATE_DIR in absent.detail
    # a base without the folder is judged by its files alone, as before
    shutil.rmtree(folder)
    assert identity_check(base, plain).state is Outcome.OK
    assert identity_check(base, templated).state is Outcome.FAILED
