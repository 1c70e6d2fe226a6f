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
  hashed them, or from a base that had none): ABSENT, with why, never a pass, and only
  once every other comparison passed (a changed config.json is still FAILED). A replay
  or segment replay that reproduces the recorded bits keeps that CANNOT_VERIFY (the
  model card differs only in that digest), never MISMATCH.
- A template name that is not UTF-8, or named templates with no default, is one line.

The builds, tokenizations and replays are the CLI in this process
(tests/support/verdicts.py); a refusal's one line is the real executable's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from dlm_git.base.resolve import CHAT_TEMPLATE_DIR, base_identity, tokenizer_digest
from dlm_git.base.tiny import ensure_tiny_base
from dlm_git.contract.adapter import base_check
from dlm_git.contract.outcome import Check, Checks, Outcome
from tests.support.cli import cli, one_line_error
from tests.support.corpus import make_corpus_doc
from tests.support.docs import set_training
from tests.support.env import run
from tests.support.gitrepo import git, init_repo
from tests.support.verdicts import CallMain, call_main_in

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


def tokenize(repo: Path, capfd: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`dlm-git tokenize doc --json` in this process: its summary."""
    result = call_main_in(repo, capfd)(["tokenize", "doc", "--json"])
    assert result.code == 0, result.stderr
    return result.payload


def test_an_edited_default_template_misses_the_cache_and_tokenizes_anew(
    git_repo: Path,
    base_cache: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = git_repo / "mybase"
    shutil.copytree(ensure_tiny_base(), base)
    default = base / CHAT_TEMPLATE_DIR / "default.jinja"
    default.parent.mkdir()
    default.write_text(TEMPLATE.replace("{sep}", "\\n"), "utf-8")
    make_corpus_doc(git_repo, n_files=2, body=BODY, seq_len=64, base="../mybase")
    first = tokenize(git_repo, capfd)
    assert first["cache"] == {**first["cache"], "misses": 4}  # type: ignore[dict-item]
    default.write_text(TEMPLATE.replace("{sep}", ": "), "utf-8")
    second = tokenize(git_repo, capfd)
    # the cache is keyed by the tokenizer's digest: another tokenizer, every row again
    assert second["cache"]["misses"] == 4, second  # type: ignore[index]
    assert second["stream_root"] != first["stream_root"]
    # and what the cache now holds is what a cold tokenize of the edited base writes
    monkeypatch.setenv("DLM_GIT_CACHE_DIR", str(git_repo.parent / "fresh-cache"))
    cold = tokenize(git_repo, capfd)
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


def identity_check(base: Path, tokenizer_sha256: str, config_sha256: str | None = None) -> Check:
    """`base.identity` of a manifest recording this base with `tokenizer_sha256` (and
    `config_sha256`, where given)."""
    ident = base_identity(base, None)
    recorded = {"spec": "../b", "revision": None, "tensor_root": ident.tensor_root}
    config = {"config_sha256": config_sha256} if config_sha256 is not None else {}
    manifest = {"tokenizer_sha256": tokenizer_sha256, "base": {**recorded, **config}}
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


def test_a_changed_config_is_never_hidden_behind_an_untemplated_record(
    tmp_path: Path, base_cache: Path
) -> None:
    base = tmp_path / "b"
    shutil.copytree(ensure_tiny_base(), base)
    plain = tokenizer_digest(base).sha256
    recorded_config = base_identity(base, None).config_sha256
    (base / CHAT_TEMPLATE_DIR).mkdir()
    (base / CHAT_TEMPLATE_DIR / "default.jinja").write_text("{{ messages }}", "utf-8")
    config = json.loads((base / "config.json").read_text("utf-8"))
    (base / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 0.5}), "utf-8")
    found = identity_check(base, plain, recorded_config)
    assert found.state is Outcome.FAILED, found
    assert "config.json" in found.detail


def test_template_names_the_loader_reads_but_dlm_git_cannot_are_one_line(
    git_repo: Path, base_cache: Path
) -> None:
    base = git_repo / "mybase"
    shutil.copytree(ensure_tiny_base(), base)
    folder = base / CHAT_TEMPLATE_DIR
    folder.mkdir()
    # named templates and none the default: transformers cannot pick one to render
    (folder / "tool_use.jinja").write_text("{{ messages }}", "utf-8")
    make_corpus_doc(git_repo, n_files=1, body=BODY, seq_len=64, base="../mybase")
    line = one_line_error(cli("tokenize", "doc", cwd=git_repo), 1, "default")
    assert CHAT_TEMPLATE_DIR in line
    # a name that is not UTF-8: refused in one line, never a traceback
    (folder / "tool_use.jinja").unlink()
    with open(os.fsencode(folder) + b"/\xff.jinja", "w", encoding="utf-8") as fh:
        fh.write("{{ messages }}")
    line = one_line_error(cli("tokenize", "doc", cwd=git_repo), 1, "not valid UTF-8")


def test_a_replay_of_an_untemplated_record_with_the_same_bits_is_cannot_verify(
    tmp_path: Path, base_cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Trained on a base with no templates folder; the auditor's base has one whose
    default renders as the config's template: the replayed weights and segments are the
    recorded bits, and the verdict is the hash level's CANNOT_VERIFY, never MISMATCH."""
    base = tmp_path / "base"  # a build of dlm-git's own: no license to accept
    build = ["base", "build", "smollm2-135m", "--layers", "1", "--out", str(base)]
    assert call_main_in(tmp_path, capfd)(build).code == 0
    repo = init_repo(tmp_path / "repo")
    assert cli("init", "--doc", "demo", "--no-hooks", cwd=repo).returncode == 0
    doc = repo / "demo" / "demo.dlm"
    text = set_training(doc.read_text("utf-8"), max_steps=3, sequence_len=64)
    text, n = re.subn(r"(?m)^base_model: .*$", f"base_model: {base}", text)
    doc.write_text(text, "utf-8")
    assert n == 1 and cli("init", "--no-hooks", cwd=repo).returncode == 0
    run(["dvc", "repro", "-q"], repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "trained on a base without templates")
    config = json.loads((base / "tokenizer_config.json").read_text("utf-8"))
    (base / CHAT_TEMPLATE_DIR).mkdir()
    (base / CHAT_TEMPLATE_DIR / "default.jinja").write_text(config["chat_template"], "utf-8")
    here = call_main_in(repo, capfd)
    for level, check in (("replay", "replay"), ("segments", "segments.replay")):
        assert replayed(here, level, check) == "ok"
    # a default that renders otherwise: other tokens, other weights, and still no
    # accusation, since the record cannot say which templates the trainer's base had
    (base / CHAT_TEMPLATE_DIR / "default.jinja").write_text(
        TEMPLATE.replace("{sep}", ": "), "utf-8"
    )
    assert replayed(here, "replay", "replay") == "absent"


def replayed(here: CallMain, level: str, check: str) -> str:
    """`check`'s state in `verify HEAD --level LEVEL` (in this process), whose verdict is
    CANNOT_VERIFY as the hash level's is (`base.identity` ABSENT)."""
    report = here(["verify", "HEAD", "--level", level, "--json"]).doc
    assert report["verdict"] == "CANNOT_VERIFY", report
    states = {c["name"]: c["state"] for c in report["checks"]}
    assert states["base.identity"] == "absent", report
    return str(states[check])
