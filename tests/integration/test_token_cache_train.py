"""The token cache through the CLI: `train` / `tokenize` with and without `--no-cache`,
`cache show|prune|clear`, `show --json`'s `training_cache`, and git never seeing the cache.

Documents pull a directory of small generated files in through `training.sources`. Only
`test_warm_cache_training_matches_no_cache` trains (twice, a few steps on the tiny base).
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RunCli
from tests.support.corpus import file_text, make_corpus_doc, write_corpus_doc
from tests.support.docs import DLM_ID
from tests.support.env import subprocess_env
from tests.support.files import tree_state
from tests.support.gitrepo import git

OTHER_ID = "01M800GRBP0GEV3WAMXAHDD42C"
N_FILES = 24
ROWS = N_FILES + 2  # the sources, one prose section and one instruction pair
BODY = """
# Cached notes

Reproducible adapters are rebuilt from the commit that records them.

::instruction::
### Q
What does the token cache key on?

### A
The row id, the tokenizer's sha256 and the sequence length.
"""
FAST = """\
  lora_r: 4
  lora_alpha: 8
  lora_dropout: 0.0
  micro_batch_size: 2
  max_steps: 3
  seed: 7
"""


write_doc = functools.partial(write_corpus_doc, body=BODY, seq_len=64)
make_doc = functools.partial(make_corpus_doc, n_files=N_FILES, body=BODY, seq_len=64)


def cache_dir(repo: Path) -> Path:
    return repo / ".git" / "dlm-git" / "token-cache"  # in the git dir: no commit reaches it


def entry_files(root: Path) -> list[Path]:
    return sorted((root / "entries").rglob("*.tok"))


def stored_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in [*entry_files(root), *root.glob("packs/*.pack")])


def runs(root: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(root / "cache.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    finally:
        conn.close()


def json_of(run_cli: RunCli, *args: object) -> Any:
    code, out, err = run_cli(*args)
    assert code == 0, err
    return json.loads(out)


def tokenize_json(run_cli: RunCli, doc_dir: Path, *flags: str) -> dict[str, Any]:
    result: dict[str, Any] = json_of(run_cli, "tokenize", doc_dir, "--json", *flags)
    return result


def age(root: Path, seconds: float, keys: list[str] | None = None) -> None:
    """Set the last access of `keys` (default: every index row) to `seconds` ago."""
    conn = sqlite3.connect(root / "cache.sqlite")
    try:
        ns = time.time_ns() - int(seconds * 1e9)
        if keys is None:
            conn.execute("UPDATE entries SET last_access_ns = ?", (ns,))
        else:
            conn.executemany(
                "UPDATE entries SET last_access_ns = ? WHERE key = ?", [(ns, k) for k in keys]
            )
        conn.commit()
    finally:
        conn.close()


def set_mtime(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def manifest(doc_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((doc_dir / "manifest.json").read_text("utf-8"))
    return data


def adapter_sha(doc_dir: Path) -> str:
    return str(manifest(doc_dir)["adapter"]["files"]["adapter_model.safetensors"]["sha256"])


# --- training parity -------------------------------------------------------------------------


def test_warm_cache_training_matches_no_cache(
    git_repo: Path, run_cli: RunCli, train: RunCli
) -> None:
    doc_dir = make_doc(git_repo, training=FAST)
    root = cache_dir(git_repo)
    cold = tokenize_json(run_cli, doc_dir)  # fills the cache
    assert cold["cache"]["misses"] == ROWS
    shutil.rmtree(doc_dir / "tokens")  # else train would reuse tokens/, not the cache

    code, _, err = train(doc_dir)
    assert code == 0, err
    warm_run = runs(root)[-1]
    assert len(runs(root)) == 2
    assert (warm_run["total_rows"], warm_run["hits"], warm_run["misses"]) == (ROWS, ROWS, 0)
    warm_sha, warm_root = adapter_sha(doc_dir), manifest(doc_dir)["tokens"]["root"]
    assert warm_root == cold["stream_root"]

    before = tree_state(root)
    code, _, err = train(doc_dir, "--no-cache")
    assert code == 0, err
    assert adapter_sha(doc_dir) == warm_sha
    assert manifest(doc_dir)["tokens"]["root"] == warm_root
    assert tree_state(root) == before  # --no-cache read, wrote and recorded nothing
    assert ".dlm-git" not in git(git_repo, "status", "--porcelain", "--untracked-files=all")


# --- --no-cache and enabled: false -----------------------------------------------------------


def test_tokenize_no_cache_touches_nothing(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo)
    root = cache_dir(git_repo)
    warm = tokenize_json(run_cli, doc_dir)
    before = tree_state(root)
    # an edit that a cached run would write as a new entry and record in the index
    (doc_dir / "corpus" / "f03.md").write_text(file_text(3, version=4), "utf-8")
    bypass = tokenize_json(run_cli, doc_dir, "--no-cache")
    assert bypass["cache"] is None
    assert bypass["stream_root"] != warm["stream_root"]
    assert tree_state(root) == before
    cached = tokenize_json(run_cli, doc_dir)  # the same edit through the cache: one miss
    assert (cached["cache"]["hits"], cached["cache"]["misses"]) == (ROWS - 1, 1)
    assert cached["stream_root"] == bypass["stream_root"]
    assert tree_state(root) != before


def test_cache_disabled_in_frontmatter(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo, cache_yaml="enabled: false")
    result = tokenize_json(run_cli, doc_dir)
    assert result["cache"] is None
    assert not (git_repo / ".dlm-git").exists()
    shown = json_of(run_cli, "show", doc_dir, "--json")["training_cache"]
    assert shown["enabled"] is False and shown["entries"] == 0 and shown["last_run"] is None


# --- cache show / show --json ----------------------------------------------------------------


def test_cache_show_and_show_json_reflect_runs(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo)
    root = cache_dir(git_repo)
    empty = json_of(run_cli, "cache", "show", doc_dir, "--json")
    assert (empty["entries"], empty["bytes"], empty["last_run"]) == (0, 0, None)

    tokenize_json(run_cli, doc_dir)
    (doc_dir / "corpus" / "f05.md").write_text(file_text(5, version=1), "utf-8")
    tokenize_json(run_cli, doc_dir)

    summary = json_of(run_cli, "cache", "show", doc_dir, "--json")
    assert summary["path"] == str(root)
    assert summary["entries"] == ROWS + 2  # rows, the edited file's new entry, the pack
    assert summary["bytes"] == stored_bytes(root)
    last = summary["last_run"]
    assert (last["total_rows"], last["hits"], last["misses"]) == (ROWS, ROWS - 1, 1)
    assert last["hit_rate"] == round((ROWS - 1) / ROWS, 4)
    assert last["corrupt"] == 0 and last["cache_bytes"] == summary["bytes"]
    assert last["tokenize_seconds"] > 0

    shown = json_of(run_cli, "show", doc_dir, "--json")["training_cache"]
    assert shown["enabled"] is True
    assert {k: shown[k] for k in summary} == summary

    recorded = runs(root)
    assert [(r["dlm_id"], r["total_rows"], r["hits"], r["misses"]) for r in recorded] == [
        (DLM_ID, ROWS, 0, ROWS),
        (DLM_ID, ROWS, ROWS - 1, 1),
    ]
    assert all(r["tokenize_seconds"] > 0 and r["cache_bytes"] > 0 for r in recorded)
    assert recorded[-1]["cache_bytes"] == stored_bytes(root)

    code, out, _ = run_cli("cache", "show", doc_dir)  # the human form says the same
    assert code == 0 and f"{ROWS - 1}/{ROWS} hits" in out and str(root) in out


def test_last_run_is_per_document(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo)
    other = write_doc(doc_dir, name="other.dlm", dlm_id=OTHER_ID)
    tokenize_json(run_cli, doc_dir / "doc.dlm")
    assert json_of(run_cli, "cache", "show", other, "--json")["last_run"] is None
    # the same rows in another document of the same repository are shared hits
    result = tokenize_json(run_cli, other)
    assert (result["cache"]["hits"], result["cache"]["misses"]) == (ROWS, 0)
    shown = json_of(run_cli, "cache", "show", other, "--json")
    assert shown["last_run"]["hits"] == ROWS


# --- prune / clear ---------------------------------------------------------------------------


def test_prune_older_than_and_frontmatter_default(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo, cache_yaml="prune_older_than_days: 7")
    root = cache_dir(git_repo)
    tokenize_json(run_cli, doc_dir)
    keys = sorted(p.name.removesuffix(".tok") for p in entry_files(root))
    age(root, 40 * 86400, keys[:4])
    age(root, 10 * 86400, keys[4:8])
    age(root, 2 * 86400, keys[8:12])
    age(root, 3 * 3600, keys[12:16])

    code, _, err = run_cli("cache", "prune", doc_dir, "--older-than", "3w")
    assert code == 2 and "--older-than" in err
    assert len(entry_files(root)) == ROWS  # nothing removed on a usage error

    code, out, _ = run_cli("cache", "prune", doc_dir, "--older-than", "30d")
    assert code == 0 and "pruned 4 entries" in out
    assert len(entry_files(root)) == ROWS - 4
    code, out, _ = run_cli("cache", "prune", doc_dir)  # the frontmatter's 7 days
    assert code == 0 and "pruned 4 entries" in out
    code, out, _ = run_cli("cache", "prune", doc_dir, "--older-than", "36h")
    assert code == 0 and "pruned 4 entries" in out
    code, out, _ = run_cli("cache", "prune", doc_dir, "--older-than", "90m")
    assert code == 0 and "pruned 4 entries" in out
    left = {p.name.removesuffix(".tok") for p in entry_files(root)}
    assert left == set(keys[16:])
    summary = json_of(run_cli, "cache", "show", doc_dir, "--json")
    assert summary["entries"] == len(left) + 1  # and the pack, used just now
    assert summary["bytes"] == stored_bytes(root)


def test_prune_and_clear_sweep_strays(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo)
    root = cache_dir(git_repo)
    tokenize_json(run_cli, doc_dir)
    shard = entry_files(root)[0].parent
    strays = {
        "old_orphan": shard / f"{'a' * 32}.tok",
        "young_orphan": shard / f"{'b' * 32}.tok",
        "old_tmp": shard / f".{'c' * 32}.tok.x1.tmp",
        "old_pack_tmp": root / "packs" / f".{DLM_ID}.pack.x2.tmp",
        "old_orphan_pack": root / "packs" / f"{OTHER_ID}.pack",
    }
    for name, p in strays.items():
        p.write_bytes(b"stray")
        if name.startswith("old"):
            set_mtime(p, 3600)  # past the 10-minute grace period

    code, out, _ = run_cli("cache", "prune", doc_dir, "--older-than", "30d")
    assert code == 0 and "pruned 0 entries, swept 4" in out
    assert [k for k, p in strays.items() if p.exists()] == ["young_orphan"]
    assert len(entry_files(root)) == ROWS + 1

    code, out, _ = run_cli("cache", "clear", doc_dir, "--force")
    assert code == 0 and f"cleared {ROWS + 1} entries" in out
    assert entry_files(root) == [] and list(root.glob("packs/*")) == []
    summary = json_of(run_cli, "cache", "show", doc_dir, "--json")
    assert (summary["entries"], summary["bytes"]) == (0, 0)
    result = tokenize_json(run_cli, doc_dir)  # and the cache fills again
    assert result["cache"]["misses"] == ROWS


def test_clear_asks_and_refuses_without_a_terminal(
    git_repo: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc_dir = make_doc(git_repo)
    root = cache_dir(git_repo)
    tokenize_json(run_cli, doc_dir)
    proc = subprocess.run(
        [sys.executable, "-m", "dlm_git", "cache", "clear", str(doc_dir)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert len(entry_files(root)) == ROWS

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    code, out, _ = run_cli("cache", "clear", doc_dir)
    assert code == 1 and f"Remove {ROWS + 1} entries" in out and "nothing removed" in out
    assert len(entry_files(root)) == ROWS

    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    code, out, _ = run_cli("cache", "clear", doc_dir)
    assert code == 0 and f"cleared {ROWS + 1} entries" in out
    assert entry_files(root) == []


# --- layout and git --------------------------------------------------------------------------


def test_cache_is_sharded_and_invisible_to_git(git_repo: Path, run_cli: RunCli) -> None:
    doc_dir = make_doc(git_repo)
    git(git_repo, "add", "doc")
    git(git_repo, "commit", "-q", "-m", "doc")
    result = tokenize_json(run_cli, doc_dir)
    root = cache_dir(git_repo)
    assert result["cache"]["path"] == str(root)
    files = entry_files(root)
    assert len(files) == ROWS
    for p in files:
        shard = p.parent
        assert shard.parent == root / "entries" and p.name[:2] == shard.name
    assert len({p.parent for p in files}) > 1
    status = git(git_repo, "status", "--porcelain", "--untracked-files=all", "--ignored=no")
    assert ".dlm-git" not in status
    assert status.strip(), "tokens/ should show up: git sees untracked files here"
    # also with a .gitignore of its own that doesn't mention the cache
    (git_repo / ".gitignore").write_text("tokens/\n", "utf-8")
    assert ".dlm-git" not in git(git_repo, "status", "--porcelain", "--untracked-files=all")
