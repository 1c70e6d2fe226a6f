"""Messages users met (issue 25): each error names the place to fix and fits the input.

- An error about a document's `base_model` starts with `path:line:col` of the value, as
  every other frontmatter error names its place (docs/format.md, "Errors").
- The pre-push hook's CANNOT_VERIFY for a Hub base missing here says where it looked: the
  snapshot directory and the setting (`HF_HUB_CACHE`) that chose the cache root.
- `verify --level segments` prints its report and nothing else: no loading bars, no
  library's advisory warnings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RunCli, dlm_git, one_line
from tests.support.env import run
from tests.support.gitrepo import git, init_repo
from tests.support.hookrepo import commit

REV = "0123456789abcdef0123456789abcdef01234567"
ULID = "01JD3Z8X9Q4W5E6R7T8Y9V0A1K"


def _doc(repo: Path, base: str) -> Path:
    path = repo / "notes.dlm"
    path.write_text(
        f"---\ndlm_id: {ULID}\ntraining:\n  lora_r: 4\nbase_model:  {base}\n---\nSome prose.\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("base", "says"),
    [
        ("no-such-base", "unknown base model 'no-such-base'"),
        ("hf:org/name", "must pin a 40-hex commit revision"),
        (f"hf:org/name@{REV}", f"base 'hf:org/name@{REV}' is not available"),
        ("smollm2-135m", "base 'smollm2-135m' is not available"),
    ],
)
@pytest.mark.parametrize("command", ["train", "tokenize", "show"])
def test_base_model_error_names_file_line_col(
    tmp_path: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    base: str,
    says: str,
    command: str,
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    repo = init_repo(tmp_path / "repo")
    doc = _doc(repo, base)
    code, out, err = run_cli(command, doc)
    if command == "show" and "not available" in says:
        assert code == 0 and "NOT available" in out  # show reports it, does not fail
        return
    assert code == 1, err
    line = one_line(err)
    assert line.startswith(f"{doc}:5:14: "), line
    assert says in line


@pytest.mark.slow
def test_pre_push_says_where_it_looked_for_a_missing_hub_base(
    tmp_path: Path, run_cli: RunCli
) -> None:
    hub = tmp_path / "hub"
    code, out, err = run_cli("base", "build", "pythia-70m", "--layers", "2", "--hf-cache", hub)
    spec = out.split(": ")[-1].strip()
    assert code == 0 and spec.startswith("hf:dlm-git-random/pythia-70m-L2@"), (out, err)
    repo = init_repo(tmp_path / "repo")
    dlm_git(repo, "init", "--doc", "notes", check=True)
    dlm = repo / "notes" / "notes.dlm"
    text = dlm.read_text("utf-8").replace("base_model: builtin:tiny", f"base_model: {spec}")
    dlm.write_text(text.replace("max_steps: 20", "max_steps: 2"), "utf-8")
    run(["dvc", "repro", "-q"], repo, HF_HUB_CACHE=str(hub))
    git(repo, "add", "-A")
    assert commit(repo, HF_HUB_CACHE=str(hub)).returncode == 0
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    elsewhere = tmp_path / "other-hub"
    proc = run(["git", "push", "-q", "origin", "HEAD:main"], repo, HF_HUB_CACHE=str(elsewhere))
    line = next(x for x in proc.stderr.splitlines() if "CANNOT_VERIFY" in x)
    assert line.startswith("dlm-git: WARN notes@"), proc.stderr
    assert f"not in the local cache ({elsewhere}/models--dlm-git-random--pythia-70m-L2" in line
    assert f"the cache root {elsewhere} comes from HF_HUB_CACHE" in line, line


@pytest.mark.slow
def test_segment_replay_prints_no_loading_bars_or_library_warnings(forge: Any) -> None:
    result = forge.verify_cli("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 0 and result.verdict == "SEGMENTS_BITWISE", result.explain()
    assert result.stderr == "", result.stderr
