"""The hooks' parts on plain data and small git repositories (no training, no DVC runs).

Covers: finding lines and summaries, the lock drift / determinism drift / record checks of
`Checker` fed with bytes, document discovery, what counts as touching a document, the
`.dlm` frontmatter peek, pre-push stdin parsing, hook installation, the stat-keyed hash
cache, git plumbing helpers (index vs HEAD, `GIT_INDEX_FILE`), and DVC record reading.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlm_git import gitio
from dlm_git.doc.peek import outside_sources, peek_frontmatter, source_dirs
from dlm_git.dvcfiles import (
    cache_dir,
    cache_object,
    dir_listing,
    find_out,
    find_out_in,
    parse_dvc_lock,
)
from dlm_git.errors import DlmGitError
from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.hooks import hashcache as hashcache_module
from dlm_git.hooks import pre_commit
from dlm_git.hooks.findings import HookFinding, strict_upgrade, summary
from dlm_git.hooks.hashcache import HashCache
from dlm_git.hooks.install import CHAINED_SUFFIX, MARKER, install_hooks, is_ours, shim_text
from dlm_git.hooks.pre_commit import Checker, DocState, discover, touched
from dlm_git.hooks.pre_push import framework_tips, pushed_tips

LOCK: dict[str, Any] = {
    "base_model": "builtin:tiny",
    "base_model_revision": "tiny-6e2e54f2131b67ae",
    "base_model_sha256": "d6" * 32,
    "cuda_version": None,
    "determinism_class": "strong",
    "determinism_flags": {
        "device": "cpu",
        "threads": 2,
        "deterministic_algorithms": True,
        "numerics": "x86-64-v3",
    },
    "dlm_id": "01M800GRBP0GEV3WAMXAHDD42B",
    "dlm_sha256": "79" * 32,
    "hardware_tier": "cpu",
    "license_acceptance": {"accepted": True, "license": "MIT", "requires_acceptance": False},
    "lock_version": 1,
    "pinned_versions": {"numpy": "2.4.6", "peft": "0.21.2", "torch": "2.13.0+cpu"},
    "rocm_version": None,
    "seed": 42,
    "supersedes": None,
}

MANIFEST: dict[str, Any] = {
    "adapter": {
        "files": {"adapter_model.safetensors": {"sha256": "aa" * 32, "size": 10}},
        "tensor_root": "a1" * 32,
    },
    "base": {"spec": "builtin:tiny", "tensor_root": "b1" * 32},
    "config_sha256": "c1" * 32,
    "dlm_sha256": "79" * 32,
    "lock_sha256": "",
    "sources": {"files": [], "merkle_root": "51" * 32},
}


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    ).stdout


def state(
    *,
    lock: dict[str, Any] | bytes | None = None,
    head_lock: dict[str, Any] | bytes | None = None,
    manifest: dict[str, Any] | bytes | None = None,
    head_manifest: dict[str, Any] | bytes | None = None,
    dlm: bytes | None = b"---\n---\n",
    dlm_name: str | None = "doc/doc.dlm",
) -> DocState:
    def enc(v: dict[str, Any] | bytes | None) -> bytes | None:
        return canonical_json(v) if isinstance(v, dict) else v

    return DocState(
        rel="doc",
        dlm_name=dlm_name,
        dlm=dlm,
        lock=enc(lock),
        manifest=enc(manifest),
        head_lock=enc(head_lock),
        head_manifest=enc(head_manifest),
        source_dirs=[],
    )


@pytest.fixture
def checker(tmp_path: Path) -> Checker:
    return Checker(tmp_path, strict=False)


def levels(c: Checker) -> list[tuple[str, str]]:
    return [(f.level, f.check) for f in c.findings]


# --------------------------------------------------------------------------- findings


def test_finding_line_format() -> None:
    f = HookFinding("ERROR", "notes", "stale", "notes/notes.dlm changed", "run `dvc repro`")
    assert f.line() == "dlm-git: ERROR notes: notes/notes.dlm changed (run `dvc repro`)"


def test_summary_counts_and_verdict() -> None:
    e = HookFinding("ERROR", "a", "x", "w", "f")
    w = HookFinding("WARN", "b", "x", "w", "f")
    assert summary([e, w, w], 2) == (
        "dlm-git: 1 error(s), 2 warning(s) in 2 document(s): commit refused"
    )
    assert summary([w], 1) == "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok"


def test_strict_upgrade_turns_warn_into_error_only_when_strict() -> None:
    w = HookFinding("WARN", "b", "x", "w", "f")
    assert strict_upgrade([w], False) == [w]
    assert [f.level for f in strict_upgrade([w], True)] == ["ERROR"]


# --------------------------------------------------------------------------- lock drift


def test_no_drift_no_findings(checker: Checker) -> None:
    assert checker.check_lock(state(lock=LOCK, head_lock=LOCK)) == LOCK
    assert checker.findings == []


@pytest.mark.parametrize(
    ("path", "value", "level"),
    [
        (("base_model_sha256",), "00" * 32, "ERROR"),
        (("base_model",), "hf:other/model", "ERROR"),
        (("base_model_revision",), "main", "ERROR"),
        (("dlm_id",), "01M800GRBP0GEV3WAMXAHDD42C", "ERROR"),
        (("pinned_versions", "torch"), "3.0.0", "ERROR"),
        (("pinned_versions", "torch"), "2.14.0", "WARN"),
        (("pinned_versions", "numpy"), "2.5.0", "WARN"),
        (("seed",), 7, "WARN"),
        (("hardware_tier",), "cuda", "WARN"),
        (("determinism_flags", "threads"), 4, "WARN"),
        (("determinism_class",), "best_effort", "WARN"),
        (("unknown_field",), "x", "ERROR"),
    ],
)
def test_lock_drift_severity(
    checker: Checker, path: tuple[str, ...], value: object, level: str
) -> None:
    lock = copy.deepcopy(LOCK)
    target = lock
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    checker.check_lock(state(lock=lock, head_lock=LOCK))
    assert levels(checker) == [(level, "lock.drift")]
    assert f"lock drift: {'.'.join(path)} changed" in checker.findings[0].what


def test_dlm_sha_change_is_allowed(checker: Checker) -> None:
    checker.check_lock(state(lock={**LOCK, "dlm_sha256": "11" * 32}, head_lock=LOCK))
    assert checker.findings == []


def test_supersedes_of_head_lock_accepts_error_drift_but_keeps_warnings(
    checker: Checker,
) -> None:
    head = canonical_json(LOCK)
    lock = copy.deepcopy(LOCK)
    lock["base_model_sha256"] = "00" * 32
    lock["pinned_versions"]["numpy"] = "2.5.0"
    lock["supersedes"] = sha256_bytes(head)
    checker.check_lock(state(lock=lock, head_lock=head))
    assert levels(checker) == [("WARN", "lock.drift")]


def test_supersedes_of_other_bytes_does_not_accept(checker: Checker) -> None:
    lock = {**LOCK, "base_model_sha256": "00" * 32, "supersedes": sha256_bytes(b"x")}
    checker.check_lock(state(lock=lock, head_lock=LOCK))
    assert levels(checker) == [("ERROR", "lock.drift")]


def test_strict_checker_refuses_warn_drift(tmp_path: Path) -> None:
    strict = Checker(tmp_path, strict=True)
    lock = copy.deepcopy(LOCK)
    lock["pinned_versions"]["numpy"] = "2.5.0"
    strict.check_lock(state(lock=lock, head_lock=LOCK))
    assert levels(strict) == [("ERROR", "lock.drift")]


def test_strict_mode_is_read_from_git_config_only_when_a_warning_needs_it(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DLM_GIT_STRICT", raising=False)
    reads: list[str] = []
    real = gitio.config_get

    def config_get(key: str, cwd: Path) -> str | None:
        reads.append(key)
        return real(key, cwd)

    monkeypatch.setattr(gitio, "config_get", config_get)
    git(git_repo, "config", "dlm-git.strict", "yes")
    lazy = Checker(git_repo, strict=None)
    lazy.check_lock(state(lock=LOCK, head_lock=LOCK))
    assert reads == []  # no drift: nothing to upgrade, nothing read
    lock = copy.deepcopy(LOCK)
    lock["seed"] = 1
    lazy.check_lock(state(lock=lock, head_lock=LOCK))
    assert levels(lazy) == [("ERROR", "lock.drift")]
    assert reads == ["dlm-git.strict"]
    lazy.check_lock(state(lock=lock, head_lock=LOCK))
    assert reads == ["dlm-git.strict"]  # read once


@pytest.mark.parametrize(
    "data", [b"{not json", b"[1, 2]", canonical_json({**LOCK, "lock_version": 99})]
)
def test_unreadable_staged_lock_is_an_error(checker: Checker, data: bytes) -> None:
    assert checker.check_lock(state(lock=data, head_lock=LOCK)) is None
    assert levels(checker) == [("ERROR", "lock")]
    assert "dlm.lock does not parse" in checker.findings[0].what


def test_broken_head_lock_is_not_compared(checker: Checker) -> None:
    assert checker.check_lock(state(lock=LOCK, head_lock=b"garbage")) == LOCK
    assert checker.findings == []


# --------------------------------------------------------------------------- record shape


def test_untrained_document_warns(checker: Checker) -> None:
    checker.check(state())
    assert levels(checker) == [("WARN", "record")]
    assert "not trained yet" in checker.findings[0].what


def test_outputs_without_a_single_dlm_are_an_error(checker: Checker) -> None:
    checker.check(state(lock=LOCK, dlm=None, dlm_name=None))
    assert levels(checker) == [("ERROR", "record")]


def test_no_dlm_no_outputs_is_silent(checker: Checker) -> None:
    checker.check(state(dlm=None, dlm_name=None))
    assert checker.findings == []


def test_manifest_without_lock_is_an_error(checker: Checker) -> None:
    checker.check(state(manifest=MANIFEST))
    assert levels(checker) == [("ERROR", "lock")]


def test_lock_without_manifest_is_an_error(checker: Checker) -> None:
    checker.check(state(lock=LOCK))
    assert levels(checker) == [("ERROR", "manifest")]


@pytest.mark.parametrize("data", [b"{", b'{"adapter": {}}', b"[]"])
def test_unreadable_manifest_is_an_error(checker: Checker, data: bytes) -> None:
    assert checker.parse_manifest(state(lock=LOCK, manifest=data)) is None
    assert levels(checker) == [("ERROR", "manifest")]


# --------------------------------------------------------------------------- determinism


def drift_state(manifest: dict[str, Any], lock: dict[str, Any]) -> DocState:
    return state(lock=lock, head_lock=LOCK, manifest=manifest, head_manifest=MANIFEST)


def other_adapter() -> dict[str, Any]:
    m = copy.deepcopy(MANIFEST)
    m["adapter"]["tensor_root"] = "a2" * 32
    return m


@pytest.mark.parametrize(
    ("profile", "klass", "level"),
    [
        ("x86-64-v3", "strong", "ERROR"),
        ("native", "strong", "ERROR"),
        ("armv8-a", "best-effort", "WARN"),
        (None, "advisory", "WARN"),
    ],
)
def test_same_inputs_other_adapter(
    checker: Checker, profile: str | None, klass: str, level: str
) -> None:
    """The class comes from this dlm-git's profile table, not from the lock's claim."""
    flags = {k: v for k, v in LOCK["determinism_flags"].items() if k != "numerics"}
    if profile is not None:
        flags["numerics"] = profile
    lock = {**LOCK, "determinism_flags": flags, "determinism_class": "strong"}
    head_lock = canonical_json(lock)
    s = state(lock=lock, head_lock=head_lock, manifest=other_adapter(), head_manifest=MANIFEST)
    checker.check_drift(s, other_adapter(), lock)
    assert levels(checker) == [(level, "determinism")]
    assert checker.findings[0].what == (
        f"same inputs as HEAD but a different adapter ({'a1' * 8} -> {'a2' * 8}) "
        f"under the same numerics setup (profile {profile or 'none recorded'}, class {klass}):"
        " the training was not reproducible"
    )


def test_same_inputs_same_adapter_is_fine(checker: Checker) -> None:
    checker.check_drift(drift_state(MANIFEST, LOCK), MANIFEST, LOCK)
    assert checker.findings == []


@pytest.mark.parametrize(
    "change",
    [
        ("dlm_sha256", "12" * 32),
        ("config_sha256", "c2" * 32),
        ("sources", {"merkle_root": "52" * 32}),
        ("base", {"tensor_root": "b2" * 32}),
    ],
)
def test_changed_inputs_explain_a_new_adapter(checker: Checker, change: tuple[str, object]) -> None:
    key, value = change
    manifest = other_adapter()
    manifest[key] = value
    checker.check_drift(drift_state(manifest, LOCK), manifest, LOCK)
    assert checker.findings == []


@pytest.mark.parametrize(
    ("key", "value", "cause"),
    [
        ("seed", 1, "seed 42 -> 1"),
        ("pinned_versions", {"torch": "2.13.1"}, "pinned_versions.numpy '2.4.6' -> None"),
        ("hardware_tier", "cuda", "hardware_tier 'cpu' -> 'cuda'"),
        (
            "determinism_flags",
            {**LOCK["determinism_flags"], "numerics": "native", "cpu_capability": "AVX512"},
            "determinism_flags.cpu_capability None -> 'AVX512'; "
            "determinism_flags.numerics 'x86-64-v3' -> 'native'",
        ),
        ("cuda_version", "12.4", "cuda_version None -> '12.4'"),
        ("rocm_version", "6.0", "rocm_version None -> '6.0'"),
    ],
)
def test_a_setup_change_is_named_as_the_cause_of_a_new_adapter(
    checker: Checker, key: str, value: object, cause: str
) -> None:
    lock = copy.deepcopy(LOCK)
    lock[key] = value
    checker.check_drift(drift_state(other_adapter(), lock), other_adapter(), lock)
    assert levels(checker) == [("WARN", "determinism")]
    what = checker.findings[0].what
    assert what.startswith("same inputs as HEAD but a different adapter"), what
    assert f"explained by a different setup: {cause}" in what, what


def test_no_head_record_no_drift_check(checker: Checker) -> None:
    s = state(lock=LOCK, manifest=other_adapter())
    checker.check_drift(s, other_adapter(), LOCK)
    s = state(lock=LOCK, head_lock=b"{", manifest=other_adapter(), head_manifest=b"{")
    checker.check_drift(s, other_adapter(), LOCK)
    assert checker.findings == []


# --------------------------------------------------------------------------- binding (no DVC)


def test_binding_checks_lock_sha_and_workspace_adapter(git_repo: Path) -> None:
    adapter = git_repo / "doc" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    lock_bytes = canonical_json(LOCK)
    good = copy.deepcopy(MANIFEST)
    good["lock_sha256"] = sha256_bytes(lock_bytes)
    good["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = sha256_bytes(b"weights")
    c = Checker(git_repo, strict=False)
    c.check_binding(state(lock=lock_bytes, manifest=good), good)
    assert c.findings == []  # no dvc.lock: the workspace adapter is what is checked

    bad = copy.deepcopy(good)
    bad["lock_sha256"] = "00" * 32
    bad["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ee" * 32
    c = Checker(git_repo, strict=False)
    c.check_binding(state(lock=lock_bytes, manifest=bad), bad)
    assert levels(c) == [("ERROR", "adapter.binding"), ("ERROR", "adapter.sha")]


def test_binding_without_dvc_lock_or_adapter_warns(git_repo: Path) -> None:
    m = {**MANIFEST, "lock_sha256": sha256_bytes(canonical_json(LOCK))}
    c = Checker(git_repo, strict=False)
    c.check_binding(state(lock=LOCK, manifest=m), m)
    assert levels(c) == [("WARN", "adapter.binding")]


def test_unreadable_staged_dvc_lock_is_an_error(git_repo: Path) -> None:
    (git_repo / "dvc.lock").write_text("stages: [unclosed\n")
    git(git_repo, "add", "dvc.lock")
    m = {**MANIFEST, "lock_sha256": sha256_bytes(canonical_json(LOCK))}
    c = Checker(git_repo, strict=False)
    c.check_binding(state(lock=LOCK, manifest=m), m)
    assert levels(c) == [("ERROR", "adapter.binding")]
    assert c.findings[0].what.startswith("dvc.lock: does not parse (")


# --------------------------------------------------------------------------- stale sources


SOURCES_DOC = """---
dlm_id: 01M800GRBP0GEV3WAMXAHDD42B
training:
  sources:
    - path: notes
      include: ["*.md"]
---
Body.
"""


def _worktree_root(doc: Path) -> str:
    """The sources root training would record from the work tree as it is now."""
    from dlm_git.doc.parser import parse_document
    from dlm_git.doc.sources import expand_sources
    from dlm_git.manifest.records import sources_record

    expanded = expand_sources(parse_document(doc), doc.parent.parent)
    return sources_record((f.relpath, f.sha256, f.size) for f in expanded.files).merkle_root


def _record(repo: Path, doc: Path) -> dict[str, Any]:
    """A manifest binding the work tree's .dlm and sources (what a fresh train writes)."""
    m = copy.deepcopy(MANIFEST)
    m["dlm_sha256"] = sha256_bytes(doc.read_bytes())
    m["sources"] = {"merkle_root": _worktree_root(doc)}
    return m


@pytest.fixture
def sources_repo(git_repo: Path) -> Path:
    """doc/doc.dlm with `sources: notes (*.md)`, committed with a manifest that binds it."""
    doc = git_repo / "doc" / "doc.dlm"
    (git_repo / "doc" / "notes").mkdir(parents=True)
    doc.write_text(SOURCES_DOC)
    (git_repo / "doc" / "notes" / "a.md").write_text("fact a\n")
    (git_repo / "doc" / "manifest.json").write_bytes(canonical_json(_record(git_repo, doc)))
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "trained")
    return git_repo


def _stale_findings(repo: Path, manifest: dict[str, Any]) -> list[HookFinding]:
    staged = gitio.staged_paths(repo)
    (s,) = pre_commit.load_states(repo, ["doc"])
    c = Checker(repo, strict=False, staged=staged)
    c.check_stale(s, manifest)
    return c.findings


def test_dlm_edited_since_training_is_stale(sources_repo: Path) -> None:
    repo = sources_repo
    doc = repo / "doc" / "doc.dlm"
    record = _record(repo, doc)
    doc.write_text(SOURCES_DOC + "An edit nobody trained on.\n")
    git(repo, "add", "doc/doc.dlm")
    (f,) = _stale_findings(repo, record)
    assert (f.level, f.check) == ("ERROR", "stale")
    assert f.what == "doc/doc.dlm changed since it was trained (manifest.json is stale)"


def test_unchanged_sources_are_not_re_expanded(
    sources_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = sources_repo
    doc = repo / "doc" / "doc.dlm"
    doc.write_text(SOURCES_DOC + "More body.\n")  # retrained after a body edit
    git(repo, "add", "doc/doc.dlm")

    def boom(self: Checker, s: DocState) -> str:
        raise AssertionError("re-expanded sources that are unchanged since HEAD")

    monkeypatch.setattr(Checker, "sources_root", boom)
    assert _stale_findings(repo, _record(repo, doc)) == []


def test_changed_sources_are_re_expanded_from_the_index(sources_repo: Path) -> None:
    repo = sources_repo
    doc = repo / "doc" / "doc.dlm"
    (repo / "doc" / "notes" / "a.md").write_text("fact a, edited\n")
    git(repo, "add", ".")
    assert _stale_findings(repo, _record(repo, doc)) == []  # retrained and staged: fine
    # The index is what counts: the same record, the source edit unstaged, is stale.
    git(repo, "reset", "-q", "doc/notes/a.md")
    (f,) = _stale_findings(repo, _record(repo, doc))
    assert (f.level, f.check) == ("ERROR", "stale")
    assert f.what == "staged sources differ from those manifest.json was trained on"


def test_untracked_source_that_training_saw_is_stale(sources_repo: Path) -> None:
    """Retrained with a new notes/b.md in the work tree that was never `git add`ed."""
    repo = sources_repo
    doc = repo / "doc" / "doc.dlm"
    (repo / "doc" / "notes" / "b.md").write_text("fact b\n")
    record = _record(repo, doc)
    (f,) = _stale_findings(repo, record)
    assert "staged sources differ" in f.what
    git(repo, "add", "doc/notes/b.md")
    assert _stale_findings(repo, record) == []


def test_changed_sources_spec_is_re_expanded(sources_repo: Path) -> None:
    repo = sources_repo
    doc = repo / "doc" / "doc.dlm"
    (repo / "doc" / "notes" / "c.txt").write_text("fact c\n")
    git(repo, "add", "doc/notes/c.txt")
    git(repo, "commit", "-qm", "a .txt file, not a source yet")
    doc.write_text(SOURCES_DOC.replace('["*.md"]', '["*.md", "*.txt"]'))
    git(repo, "add", "doc/doc.dlm")
    head_record = json.loads(git(repo, "show", "HEAD:doc/manifest.json"))
    stale = {**_record(repo, doc), "sources": head_record["sources"]}  # HEAD's root kept
    (f,) = _stale_findings(repo, stale)
    assert "staged sources differ" in f.what
    assert _stale_findings(repo, _record(repo, doc)) == []


def test_symlinked_sources_are_re_expanded(
    sources_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = sources_repo
    (repo / "elsewhere.md").write_text("target\n")
    (repo / "doc" / "notes" / "link.md").symlink_to("../../elsewhere.md")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a symlinked source")
    called: list[str] = []
    monkeypatch.setattr(Checker, "sources_root", lambda self, s: called.append(s.rel) or "x")
    staged = gitio.staged_paths(repo)
    (s,) = pre_commit.load_states(repo, ["doc"], symlinks=(links := []))
    assert links == ["doc/notes/link.md"]
    head = json.loads(git(repo, "show", "HEAD:doc/manifest.json"))
    Checker(repo, strict=False, staged=staged, symlinks=links).check_stale(s, head)
    assert called == ["doc"]


def test_sources_outside_the_repository_warn(git_repo: Path) -> None:
    text = SOURCES_DOC.replace("path: notes", "path: ../../shared").replace(
        "training:\n", "training:\n  sources_policy: permissive\n"
    )
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "doc.dlm").write_text(text)
    git(git_repo, "add", ".")
    (s,) = pre_commit.load_states(git_repo, ["doc"])
    m = {**MANIFEST, "dlm_sha256": sha256_bytes(text.encode())}
    c = Checker(git_repo, strict=False, staged=["doc/doc.dlm"])
    c.check_stale(s, m)
    assert levels(c) == [("WARN", "stale")]
    assert "outside the repository (../../shared)" in c.findings[0].what


# --------------------------------------------------------------------------- discovery


def test_discover_lists_params_documents_and_staged_dlm_dirs(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents:\n  - a\n  - ./b/\n  - 3\n")
    git(git_repo, "add", "params.yaml")
    staged = ["c/c.dlm", "a/a.dlm", "top.dlm", "a/notes/x.md"]
    found = discover(git_repo, staged)
    assert found.rels == ["a", "b", "c", "."]
    assert found.params is not None and found.params.problems == [
        ("params.yaml", "documents: entry 3 (3) is not a directory name")
    ]


def test_discover_reports_a_broken_params_file(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents: [unclosed\n")
    git(git_repo, "add", "params.yaml")
    found = discover(git_repo, ["d/d.dlm"])
    assert found.rels == ["d"]
    assert found.params is not None and found.params.listed is None
    assert "does not parse" in found.params.problems[0][1]


def test_discover_reads_the_index_not_the_worktree(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents: [staged]\n")
    git(git_repo, "add", "params.yaml")
    (git_repo / "params.yaml").write_text("documents: [worktree]\n")
    assert discover(git_repo, []).rels == ["staged"]


HOSTILE_DIR = "new\nline -x:0:"
"""A document directory whose name holds a newline, a leading dash and `:0:`."""


def _doc_with_records(repo: Path, rel: str, lock: bool = True, manifest: bool = True) -> None:
    d = repo / rel
    d.mkdir(parents=True, exist_ok=True)
    (d / "doc.dlm").write_text("---\ndlm_id: x\n---\nbody\n")
    if lock:
        (d / "dlm.lock").write_text("{}")
    if manifest:
        (d / "manifest.json").write_text("{}")


@pytest.mark.parametrize("records", ["both", "lock", "manifest"])
def test_discover_finds_unlisted_documents_by_their_records(git_repo: Path, records: str) -> None:
    """params.yaml never narrows the set: a .dlm beside records is a document (any bytes
    in its directory's name), listed or not; so is a lone dlm.lock; an unlisted .dlm
    without records is not (and neither is a lone manifest.json, which may be anyone's)."""
    (git_repo / "params.yaml").write_text("documents: [listed]\n")
    _doc_with_records(git_repo, "listed")
    _doc_with_records(git_repo, HOSTILE_DIR, records != "manifest", records != "lock")
    _doc_with_records(git_repo, "untrained", lock=False, manifest=False)
    (git_repo / "lone").mkdir()
    (git_repo / "lone" / "dlm.lock").write_text("{}")
    (git_repo / "web").mkdir()
    (git_repo / "web" / "manifest.json").write_text("{}")
    git(git_repo, "add", ".")
    found = discover(git_repo, ["README.md"])
    assert found.rels == ["listed", "lone", HOSTILE_DIR]
    assert found.params is not None
    findings = pre_commit.pipeline_findings(found.params, found.tree, found.rels, ["params.yaml"])
    assert sorted(findings) == ["lone", HOSTILE_DIR]
    assert "does not list it" in findings[HOSTILE_DIR].what


def test_params_naming_a_missing_directory_is_an_error(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "params.yaml").write_text("documents: [doc, gone, ../up]\n")
    _doc_with_records(git_repo, "doc", lock=False, manifest=False)
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "dlm-git: ERROR params.yaml: documents: entry '../up' is not a directory inside the"
        " repository (list each document directory under `documents:` in params.yaml)",
        "dlm-git: ERROR gone: params.yaml documents: lists gone, which holds no .dlm"
        " (list each document directory under `documents:` in params.yaml)",
        "dlm-git: WARN doc: document not trained yet (no manifest.json, no dlm.lock)"
        " (run `dvc repro` (or `dlm-git train`) and stage the results)",
        "dlm-git: 2 error(s), 1 warning(s) in 2 document(s): commit refused",
    ]


@pytest.mark.parametrize(
    ("staged", "hit"),
    [
        (["doc/doc.dlm"], True),
        (["doc/sub/file"], True),
        (["shared/notes/a.md"], True),
        (["dvc.lock"], True),
        (["docs/readme.md"], False),
        (["shared/notesX"], False),
        (["README.md", "params.yaml"], False),
    ],
)
def test_touched(staged: list[str], hit: bool) -> None:
    s = state()
    s.source_dirs = ["shared/notes"]
    assert touched(s, staged) is hit


def test_root_document_is_touched_by_anything() -> None:
    s = state()
    s.rel = "."
    assert touched(s, ["README.md"]) is True


# --------------------------------------------------------------------------- peek


def test_source_dirs_resolve_relative_to_the_document() -> None:
    text = (
        b"---\ntraining:\n  sources:\n    - path: notes\n    - path: ../shared\n"
        b"    - path: ../../../outside\n    - path: ../../top\n    - path: .\n"
        b"    - {include: ['*']}\n    - 7\n---\nbody\n"
    )
    assert source_dirs("docs/a", text) == ["docs/a/notes", "docs/shared", "top", "docs/a"]
    assert outside_sources("docs/a", text) == ["../../../outside"]
    assert source_dirs(".", text) == ["notes", "."]
    assert outside_sources(".", text) == ["../shared", "../../../outside", "../../top"]


def test_absolute_source_paths_are_outside() -> None:
    text = b"---\ntraining:\n  sources:\n    - path: /srv/data\n    - path: n\n---\n"
    assert source_dirs("d", text) == ["d/n"]
    assert outside_sources("d", text) == ["/srv/data"]


@pytest.mark.parametrize(
    "text",
    [b"no frontmatter", b"---\nkey: [unclosed\n---\n", b"---\nunterminated: 1\n", b"\xff\xfe"],
)
def test_peek_gives_nothing_for_unreadable_frontmatter(text: bytes) -> None:
    assert peek_frontmatter(text) == {}
    assert source_dirs("doc", text) == []


def test_peek_handles_bom_and_crlf() -> None:
    text = "\ufeff---\r\ntraining:\r\n  sources:\r\n    - path: n\r\n---\r\n".encode()
    assert source_dirs("d", text) == ["d/n"]


# --------------------------------------------------------------------------- pre-push stdin


def test_pushed_tips() -> None:
    a, b, z = "a" * 40, "b" * 40, "0" * 40
    stdin = "\n".join(
        [
            f"refs/heads/main {a} refs/heads/main {z}",
            f"refs/heads/x {a} refs/heads/x {b}",
            f"(delete) {z} refs/heads/gone {b}",
            f"refs/heads/s256 {'c' * 64} refs/heads/s256 {'0' * 64}",
            f"(delete) {'0' * 64} refs/heads/gone256 {'d' * 64}",
            "garbage",
            "",
        ]
    )
    assert pushed_tips(stdin) == [a, "c" * 64]


def test_framework_tips(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRE_COMMIT_TO_REF", raising=False)
    monkeypatch.delenv("PRE_COMMIT_LOCAL_BRANCH", raising=False)
    assert framework_tips(git_repo) == []
    monkeypatch.setenv("PRE_COMMIT_TO_REF", "0" * 40)
    assert framework_tips(git_repo) == []
    monkeypatch.setenv("PRE_COMMIT_TO_REF", "e" * 40)
    assert framework_tips(git_repo) == ["e" * 40]
    # A push carrying the root commit: pre-commit sets only the local ref.
    monkeypatch.delenv("PRE_COMMIT_TO_REF")
    (git_repo / "a").write_text("a")
    git(git_repo, "add", "a")
    git(git_repo, "commit", "-qm", "root")
    monkeypatch.setenv("PRE_COMMIT_LOCAL_BRANCH", "HEAD")
    assert framework_tips(git_repo) == [git(git_repo, "rev-parse", "HEAD").strip()]
    monkeypatch.setenv("PRE_COMMIT_LOCAL_BRANCH", "refs/heads/nope")
    assert framework_tips(git_repo) == []


# --------------------------------------------------------------------------- install


def test_shim_text_runs_the_module_and_chains() -> None:
    text = shim_text("pre-commit", "/opt/my env/bin/python")
    assert text.startswith("#!/bin/sh\n") and MARKER in text
    assert "py='/opt/my env/bin/python'" in text
    assert f'"$here/pre-commit{CHAINED_SUFFIX}" "$@" || exit $?' in text
    assert 'exec "$py" -m dlm_git.hooks.pre_commit "$@"' in text
    push = shim_text("pre-push", "/usr/bin/python3")
    assert "dlm_git.hooks.pre_push" in push and "input=$(cat)" in push
    merge = shim_text("pre-merge-commit", "/usr/bin/python3")
    assert f'"$here/pre-merge-commit{CHAINED_SUFFIX}" "$@" || exit $?' in merge
    assert 'exec "$py" -m dlm_git.hooks.pre_merge_commit "$@"' in merge


def test_install_is_idempotent_and_updates_stale_shims(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    lines = install_hooks(git_repo)
    assert lines == [
        f"pre-commit: installed in {hooks}",
        f"pre-merge-commit: installed in {hooks}",
        f"pre-push: installed in {hooks}",
    ]
    for name in ("pre-commit", "pre-merge-commit", "pre-push"):
        assert is_ours(hooks / name) and os.access(hooks / name, os.X_OK)
    assert install_hooks(git_repo) == [
        "pre-commit: already installed",
        "pre-merge-commit: already installed",
        "pre-push: already installed",
    ]
    (hooks / "pre-commit").write_text(f"#!/bin/sh\n{MARKER} (old)\n")
    assert install_hooks(git_repo)[0] == "pre-commit: updated"
    assert (hooks / "pre-commit").read_text() == shim_text("pre-commit")


def test_install_chains_foreign_hook_and_uninstall_restores(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    foreign = "#!/bin/sh\nexit 0\n"
    (hooks / "pre-push").write_text(foreign)
    lines = install_hooks(git_repo)
    assert lines[2].endswith(f"(existing hook kept, runs first as pre-push{CHAINED_SUFFIX})")
    assert (hooks / f"pre-push{CHAINED_SUFFIX}").read_text() == foreign
    assert install_hooks(git_repo, uninstall=True) == [
        "pre-commit: removed",
        "pre-merge-commit: removed",
        "pre-push: removed (restored the previous hook)",
    ]
    assert (hooks / "pre-push").read_text() == foreign
    assert not (hooks / "pre-commit").exists()
    assert not (hooks / "pre-merge-commit").exists()
    assert install_hooks(git_repo, uninstall=True) == [
        "pre-commit: not installed",
        "pre-merge-commit: not installed",
        "pre-push: not installed",
    ]
    assert (hooks / "pre-push").read_text() == foreign  # a foreign hook is never removed


def test_install_keeps_a_symlinked_hook(git_repo: Path, tmp_path: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    target = tmp_path / "lfs-hook"
    target.write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit").symlink_to(target)
    install_hooks(git_repo)
    chained = hooks / f"pre-commit{CHAINED_SUFFIX}"
    assert chained.is_symlink() and chained.resolve() == target.resolve()


def test_install_refuses_when_foreign_and_chained_both_exist(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    (hooks / f"pre-commit{CHAINED_SUFFIX}").write_text("#!/bin/sh\n")
    with pytest.raises(DlmGitError, match="both a foreign hook"):
        install_hooks(git_repo)


def test_install_outside_git_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DlmGitError, match="not a git repository"):
        install_hooks(tmp_path)


# --------------------------------------------------------------------------- hash cache


def test_hash_cache_hits_without_reading_and_misses_on_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = hashlib.file_digest

    def counting(fh: Any, name: str) -> Any:
        calls.append(fh.name)
        return real(fh, name)

    monkeypatch.setattr(hashcache_module.hashlib, "file_digest", counting)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc")
    cache = HashCache(tmp_path)
    assert cache.sha256(f) == sha256_bytes(b"abc")
    cache.save()
    assert (tmp_path / ".dlm-git" / "hash-cache.json").is_file()

    again = HashCache(tmp_path)
    assert again.sha256(f) == sha256_bytes(b"abc")
    assert len(calls) == 1 and not again.dirty  # hit: not read again

    f.write_bytes(b"abd")  # same size; mtime/ctime move
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert again.sha256(f) == sha256_bytes(b"abd")
    assert len(calls) == 2 and again.dirty


@pytest.mark.parametrize("content", ["{broken", "[1, 2]", '{"/x": [1, 2, 3, 4, 5]}'])
def test_damaged_hash_cache_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / ".dlm-git").mkdir()
    (tmp_path / ".dlm-git" / "hash-cache.json").write_text(content)
    f = tmp_path / "x"
    f.write_bytes(b"x")
    cache = HashCache(tmp_path)
    assert cache.sha256(f) == sha256_bytes(b"x")
    cache.save()
    data = json.loads((tmp_path / ".dlm-git" / "hash-cache.json").read_text())
    assert data[str(f.resolve())][4] == sha256_bytes(b"x")


def test_hash_cache_entry_with_wrong_shape_is_rehashed(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_bytes(b"x")
    st = f.stat()
    (tmp_path / ".dlm-git").mkdir()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    (tmp_path / ".dlm-git" / "hash-cache.json").write_text(
        json.dumps({str(f.resolve()): stamp})  # no digest
    )
    assert HashCache(tmp_path).sha256(f) == sha256_bytes(b"x")


# --------------------------------------------------------------------------- git plumbing


def test_cat_files_index_head_and_missing(git_repo: Path) -> None:
    (git_repo / "a b.txt").write_bytes(b"one\n")
    git(git_repo, "add", ".")
    assert gitio.resolve_commit("HEAD", git_repo) is None
    assert gitio.staged_paths(git_repo) == ["a b.txt"]  # before the first commit
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "a b.txt").write_bytes(b"two\n")
    git(git_repo, "add", ".")
    blobs = gitio.cat_files([":a b.txt", "HEAD:a b.txt", ":nope", "HEAD:", ":a b.txt"], git_repo)
    assert blobs == {":a b.txt": b"two\n", "HEAD:a b.txt": b"one\n", ":nope": None, "HEAD:": None}
    assert gitio.cat_files([], git_repo) == {}


def test_blob_reader_reads_in_rounds_and_chunks(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(300):
        (git_repo / f"f{i:03d}").write_bytes(f"{i}\n".encode() * (i + 1))
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "many")
    monkeypatch.setattr(gitio.BlobReader, "CHUNK", 7)
    with gitio.BlobReader(git_repo) as reader:
        first = reader.read([":f000", "HEAD:", ":nope", ":f000"])
        assert first == {":f000": b"0\n", "HEAD:": None, ":nope": None}
        names = [f"HEAD:f{i:03d}" for i in range(300)]
        many = reader.read(names)
        assert many == gitio.cat_files(names, git_repo)
        assert many["HEAD:f299"] == b"299\n" * 300
        assert reader.read([]) == {}


def test_blob_reader_outside_git_is_an_error(tmp_path: Path) -> None:
    with gitio.BlobReader(tmp_path) as reader, pytest.raises(DlmGitError):
        reader.read([":x"])


def test_staged_paths_follow_git_index_file(git_repo: Path) -> None:
    (git_repo / "a").write_text("a")
    (git_repo / "b").write_text("b")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "a").write_text("a2")
    (git_repo / "b").write_text("b2")
    git(git_repo, "add", "a")
    assert gitio.staged_paths(git_repo) == ["a"]
    other = git_repo / ".git" / "other-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(other)}
    git(git_repo, "read-tree", "HEAD", env=env)
    git(git_repo, "add", "b", env=env)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_INDEX_FILE", str(other))
        assert gitio.staged_paths(git_repo) == ["b"]
        assert gitio.cat_files([":b"], git_repo) == {":b": b"b2"}


def test_materialize_index_and_commit(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "d" / "n").mkdir(parents=True)
    (git_repo / "d" / "n" / "x.md").write_text("v1")
    (git_repo / "other").write_text("o")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "d" / "n" / "x.md").write_text("v2")
    git(git_repo, "add", ".")
    (git_repo / "d" / "n" / "x.md").write_text("worktree")
    gitio.materialize(["d"], tmp_path / "idx", git_repo)
    gitio.materialize(["d"], tmp_path / "head", git_repo, rev="HEAD")
    assert (tmp_path / "idx" / "d" / "n" / "x.md").read_text() == "v2"
    assert (tmp_path / "head" / "d" / "n" / "x.md").read_text() == "v1"
    assert not (tmp_path / "idx" / "other").exists()
    gitio.materialize(["missing"], tmp_path / "none", git_repo)
    assert not (tmp_path / "none").exists()


def test_toplevel_outside_git_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DlmGitError, match="not inside a git work tree"):
        gitio.toplevel(tmp_path)
    monkeypatch.setenv("DLM_GIT_STRICT", " Yes ")
    assert gitio.env_flag("DLM_GIT_STRICT")
    monkeypatch.setenv("DLM_GIT_STRICT", "0")
    assert not gitio.env_flag("DLM_GIT_STRICT")


def test_run_with_nothing_staged_is_silent(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pre_commit.run(git_repo) == 0
    (git_repo / "params.yaml").write_text("documents: []\n")
    (git_repo / "README.md").write_text("hi\n")
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 0
    assert capsys.readouterr() == ("", "")


def test_run_reports_an_untrained_staged_document(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "doc.dlm").write_text("---\ndlm_id: x\n---\nbody\n")
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "dlm-git: WARN doc: document not trained yet (no manifest.json, no dlm.lock) "
        "(run `dvc repro` (or `dlm-git train`) and stage the results)",
        "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok",
    ]


# --------------------------------------------------------------------------- DVC records


DVC_LOCK = b"""schema: '2.0'
stages:
  train@doc:
    cmd: dlm-git train doc
    outs:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
      size: 10
      nfiles: 2
    - path: doc/dlm.lock
      md5: ffffffffffffffffffffffffffffffff
"""


BIG_DVC_LOCK = b"""schema: '2.0'
stages:
  base:
    cmd: dlm-git base build --out bases/tiny
    outs:
    - path: bases/tiny
      hash: md5
      md5: 074602d49c8a19cc9c331f8e839634da.dir
  verify@doc:
    cmd: dlm-git verify --worktree --doc doc
    deps:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
  train@doc:
    cmd: dlm-git train doc --tiny-dir bases/tiny --quiet --lock-mode default
      --device cpu --threads 2
    deps:
    - path: bases/tiny
      md5: 074602d49c8a19cc9c331f8e839634da.dir
    outs:
    - path: doc/adapter
      hash: md5
      md5: 0123456789abcdef0123456789abcdef.dir
      size: 10
      nfiles: 2
    - path: doc/dlm.lock
      hash: md5
      md5: ffffffffffffffffffffffffffffffff
  train@other:
    cmd: dlm-git train other
    outs:
    - path: other/adapter
      hash: md5
      md5: 22222222222222222222222222222222.dir
"""


def test_find_out_and_dir_listing(tmp_path: Path) -> None:
    lock = parse_dvc_lock(DVC_LOCK)
    out = find_out(lock, "doc/adapter")
    assert out is not None and out.is_dir and out.stage == "train@doc" and out.nfiles == 2
    assert find_out(lock, "doc") is None
    assert dir_listing(tmp_path, out.md5) is None
    obj = cache_object(tmp_path, out.md5)
    assert obj == tmp_path / ".dvc/cache/files/md5/01/23456789abcdef0123456789abcdef.dir"
    obj.parent.mkdir(parents=True)
    aa, bb = "a" * 32, "b" * 32
    obj.write_text(json.dumps([{"md5": aa, "relpath": "a"}, {"md5": bb, "relpath": "b/c"}]))
    assert dir_listing(tmp_path, out.md5) == {"a": aa, "b/c": bb}


def test_find_out_in_matches_the_full_parse() -> None:
    data = BIG_DVC_LOCK
    full = parse_dvc_lock(data)
    for path in ("doc/adapter", "doc/dlm.lock", "other/adapter", "bases/tiny", "missing"):
        assert find_out_in(data, path) == find_out(full, path), path
    # the adapter is a dep of verify@doc before it is an out of train@doc here
    assert find_out_in(data, "doc/adapter").stage == "train@doc"  # type: ignore[union-attr]


def test_find_out_in_parses_only_the_stages_naming_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dlm_git import dvcfiles

    def full_parse(data: bytes) -> dict[str, Any]:
        raise AssertionError("parsed the whole dvc.lock")

    monkeypatch.setattr(dvcfiles, "parse_dvc_lock", full_parse)
    out = find_out_in(BIG_DVC_LOCK, "other/adapter")
    assert out is not None and out.md5 == "2" * 32 + ".dir"


MD5 = b"c" * 32 + b".dir"


@pytest.mark.parametrize(
    "data",
    [
        # not DVC's layout: flow style, quoted paths, other indentation
        b'stages: {"train@doc": {"outs": [{"path": "doc/adapter", "md5": "' + MD5 + b'"}]}}\n',
        b"stages:\n  train@doc:\n    outs:\n    - path: 'doc/adapter'\n      md5: " + MD5 + b"\n",
        b"stages:\n    train@doc:\n        outs:\n        - {path: doc/adapter, md5: "
        + MD5
        + b"}\n",
    ],
)
def test_find_out_in_falls_back_to_the_full_parse(data: bytes) -> None:
    out = find_out_in(data, "doc/adapter")
    assert out is not None and out.md5 == MD5.decode()


def test_find_out_in_raises_on_unreadable_yaml() -> None:
    with pytest.raises((ValueError, yaml.YAMLError)):
        find_out_in(b"stages: [unclosed\n", "doc/adapter")


def _blobs(index: bytes | None, head: bytes | None) -> dict[str, bytes | None]:
    return {":dvc.lock": index, "HEAD:dvc.lock": head}


def test_adapter_record_changed_per_document() -> None:
    other = BIG_DVC_LOCK.replace(b"0123456789abcdef0123456789abcdef.dir", b"f" * 32 + b".dir")
    doc, other_doc = state(), state()
    other_doc.rel = "other"
    changed = pre_commit.adapter_record_changed(_blobs(other, BIG_DVC_LOCK))
    assert changed(doc) and not changed(other_doc)
    assert touched(doc, ["dvc.lock"], changed)
    assert not touched(other_doc, ["dvc.lock"], changed)
    assert touched(other_doc, ["dvc.lock"])  # no HEAD comparison given: every document
    assert pre_commit.adapter_record_changed(_blobs(BIG_DVC_LOCK, None))(doc)
    assert not pre_commit.adapter_record_changed(_blobs(None, None))(doc)
    assert pre_commit.adapter_record_changed(_blobs(b"stages: [", BIG_DVC_LOCK))(doc)


def test_unchanged_adapter_record_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    other = BIG_DVC_LOCK.replace(b"0123456789abcdef0123456789abcdef.dir", b"f" * 32 + b".dir")
    changed = pre_commit.adapter_record_changed(_blobs(other, BIG_DVC_LOCK))

    def parse(data: bytes, path: str) -> None:
        raise AssertionError(f"parsed dvc.lock for {path}")

    monkeypatch.setattr(pre_commit, "find_out_in", parse)
    s = state()
    s.rel = "other"
    assert changed(s) is False


def test_parse_dvc_lock_refuses_non_mappings() -> None:
    with pytest.raises(ValueError):
        parse_dvc_lock(b"- a\n- b\n")
    assert parse_dvc_lock(b"") == {}


def test_cache_dir_honours_config_local_then_config(tmp_path: Path) -> None:
    dvc = tmp_path / ".dvc"
    dvc.mkdir()
    assert cache_dir(tmp_path) == dvc / "cache"
    (dvc / "config").write_text("[core]\n    remote = store\n[cache]\n    dir = ../shared-cache\n")
    assert cache_dir(tmp_path) == (tmp_path / "shared-cache").resolve()
    (dvc / "config.local").write_text("[cache]\n    dir = /abs/cache\n")
    assert cache_dir(tmp_path) == Path("/abs/cache")


def test_cache_dir_ignores_dir_keys_of_other_sections(tmp_path: Path) -> None:
    dvc = tmp_path / ".dvc"
    dvc.mkdir()
    (dvc / "config").write_text("[state]\n    dir = /obsolete/state\n[index]\n    dir = x\n")
    assert cache_dir(tmp_path) == dvc / "cache"
