"""The pre-commit hook's `Checker` on plain data and small git repositories: finding lines
and summaries, lock drift, record shape, determinism drift, binding, stale sources and
document discovery (no training, no DVC runs)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dlm_git import gitio
from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.hooks import pre_commit
from dlm_git.hooks.findings import HookFinding, strict_upgrade, summary
from dlm_git.hooks.pre_commit import Checker, DocState, discover, touched
from tests.support.gitrepo import git
from tests.support.records import BIG_DVC_LOCK

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


@pytest.mark.parametrize(
    "path",
    [("unknown_field",), ("determinism_flags", "bits_expected"), ("pinned_versions", "kernels")],
)
def test_a_key_no_dlm_git_writes_is_a_malformed_lock_not_drift(
    checker: Checker, path: tuple[str, ...]
) -> None:
    """Refused however it is accepted: a malformed record is not a drift to accept."""
    lock = copy.deepcopy(LOCK)
    target = lock
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "x"
    lock["supersedes"] = sha256_bytes(canonical_json(LOCK))
    checker.check_lock(state(lock=lock, head_lock=canonical_json(LOCK)))
    assert levels(checker) == [("ERROR", "lock")]
    assert "malformed lock" in checker.findings[0].what and path[-1] in checker.findings[0].what


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


def _worktree_sources(doc: Path) -> dict[str, Any]:
    """The sources record training would write from the work tree as it is now."""
    from dlm_git.doc.parser import parse_document
    from dlm_git.doc.sources import expand_sources
    from dlm_git.manifest.records import sources_record

    expanded = expand_sources(parse_document(doc), doc.parent.parent)
    record = sources_record((f.relpath, f.sha256, f.size) for f in expanded.files)
    return record.model_dump(mode="json")


def _record(repo: Path, doc: Path) -> dict[str, Any]:
    """A manifest binding the work tree's .dlm and sources (what a fresh train writes)."""
    m = copy.deepcopy(MANIFEST)
    m["dlm_sha256"] = sha256_bytes(doc.read_bytes())
    m["sources"] = _worktree_sources(doc)
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

    def boom(self: Checker, s: DocState, m: dict[str, Any]) -> bool:
        raise AssertionError("re-expanded sources that are unchanged since HEAD")

    monkeypatch.setattr(Checker, "staged_sources", boom)
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
    monkeypatch.setattr(Checker, "staged_sources", lambda self, s, m: called.append(s.rel) or False)
    staged = gitio.staged_paths(repo)
    (s,) = pre_commit.load_states(repo, ["doc"], symlinks=(links := []))
    assert links == ["doc/notes/link.md"]
    head = json.loads(git(repo, "show", "HEAD:doc/manifest.json"))
    Checker(repo, strict=False, staged=staged, symlinks=links).check_stale(s, head)
    assert called == ["doc"]


def test_sources_outside_the_repository_warn(git_repo: Path) -> None:
    from dlm_git.manifest.records import sources_record

    text = SOURCES_DOC.replace("path: notes", "path: ../../shared").replace(
        "training:\n", "training:\n  sources_policy: permissive\n"
    )
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "doc.dlm").write_text(text)
    git(git_repo, "add", ".")
    (s,) = pre_commit.load_states(git_repo, ["doc"])
    outside = sources_record([("../../shared/a.md", "ab" * 32, 3)]).model_dump(mode="json")
    m = {**MANIFEST, "dlm_sha256": sha256_bytes(text.encode()), "sources": outside}
    c = Checker(git_repo, strict=False, staged=["doc/doc.dlm"])
    c.check_stale(s, m)
    assert levels(c) == [("WARN", "stale")]
    assert "outside the repository (../../shared)" in c.findings[0].what


@pytest.mark.parametrize("edit", ["changed", "new", "gone"])
def test_sources_inside_are_checked_beside_outside_ones(
    git_repo: Path, tmp_path: Path, edit: str
) -> None:
    """A document with sources outside the repository (not in git: WARN) still has the
    files inside it compared: an in-repo source edited, added or removed without
    retraining is stale, whatever is outside."""
    from dlm_git.manifest.records import sources_record

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "s.md").write_text("outside fact\n")
    text = SOURCES_DOC.replace(
        '      include: ["*.md"]\n', f'      include: ["*.md"]\n    - path: {shared}\n'
    ).replace("training:\n", "training:\n  sources_policy: permissive\n")
    doc = git_repo / "doc" / "doc.dlm"
    (git_repo / "doc" / "notes").mkdir(parents=True)
    doc.write_text(text)
    (git_repo / "doc" / "notes" / "a.md").write_text("fact a\n")
    (git_repo / "doc" / "notes" / "b.md").write_text("fact b\n")
    trained = _worktree_sources(doc)  # what train records: inside and outside files
    assert [f["relpath"] for f in trained["files"]] == [
        "notes/a.md",
        "notes/b.md",
        f"{shared}/s.md",
    ]
    m = {**MANIFEST, "dlm_sha256": sha256_bytes(doc.read_bytes()), "sources": trained}
    git(git_repo, "add", ".")
    (s,) = pre_commit.load_states(git_repo, ["doc"])
    honest = Checker(git_repo, strict=False, staged=gitio.staged_paths(git_repo))
    honest.check_stale(s, m)
    assert levels(honest) == [("WARN", "stale")]
    if edit == "changed":
        (git_repo / "doc" / "notes" / "a.md").write_text("fact a, edited\n")
    elif edit == "new":
        (git_repo / "doc" / "notes" / "c.md").write_text("fact c\n")
    else:
        (git_repo / "doc" / "notes" / "b.md").unlink()
    git(git_repo, "add", "-A")
    assert (
        sources_record((f["relpath"], f["sha256"], f["size"]) for f in trained["files"]).merkle_root
        == trained["merkle_root"]
    )
    (s,) = pre_commit.load_states(git_repo, ["doc"])
    c = Checker(git_repo, strict=False, staged=gitio.staged_paths(git_repo))
    c.check_stale(s, m)
    assert levels(c) == [("WARN", "stale"), ("ERROR", "stale")]
    assert c.findings[1].what == "staged sources differ from those manifest.json was trained on"


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


# --------------------------------------------------------------------------- dvc.lock changes


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
