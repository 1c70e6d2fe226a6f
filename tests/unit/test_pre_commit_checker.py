"""The pre-commit hook on small git repositories (no training, no DVC runs): it runs the
contract's check list on the index, as `verify` runs it on a commit, plus its own
commit-time checks (lock drift and determinism against HEAD, pipeline membership).

A "trained" document here is written by `trained()`: the `.dlm`, its sources, and a lock
and manifest that bind them as a training run would (section ids and sources from the
real parser), with a small adapter in the work tree (no dvc.lock: the hook checks the
work tree's `adapter/`)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dlm_git import gitio
from dlm_git.contract.commit_time import determinism, lock_drift
from dlm_git.contract.outcome import Check, Outcome
from dlm_git.contract.records import builtin_revision
from dlm_git.docat import Rev, TreeAt
from dlm_git.errors import DlmGitError
from dlm_git.hashing import canonical_json, canonical_json_sha256, sha256_bytes
from dlm_git.hooks import pre_commit
from dlm_git.hooks.findings import HookFinding, finding_of, summary
from dlm_git.hooks.pre_commit import collect, touched
from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.severity import Severity
from dlm_git.verify.commit import verify_commit
from tests.support.gitrepo import commit_all, git
from tests.support.records import BIG_DVC_LOCK, LOCK_RECORD, lock_record

SOURCES_DOC = """---
dlm_id: 01M800GRBP0GEV3WAMXAHDD42B
training:
  sources:
    - path: notes
      include: ["*.md"]
---
Body.

::instruction::
### Q
first question?
### A
first answer.
### Q
second question?
### A
second answer.
"""
PLAIN_DOC = "---\ndlm_id: 01M800GRBP0GEV3WAMXAHDD42B\n---\nJust prose.\n"
WEIGHTS = b"adapter weights"
REVISION = builtin_revision(LOCK_RECORD["pinned_versions"])


def trained(repo: Path, text: str = SOURCES_DOC, notes: dict[str, str] | None = None) -> None:
    """Write doc/doc.dlm, its sources, its adapter and the records a training run of the
    work tree would write (nothing staged)."""
    from dlm_git.doc.parser import parse_document
    from dlm_git.doc.sources import expand_sources
    from dlm_git.manifest.records import sources_record

    doc = repo / "doc" / "doc.dlm"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
    for name, body in (notes if notes is not None else {"a.md": "fact a\n"}).items():
        (repo / "doc" / "notes").mkdir(exist_ok=True)
        (repo / "doc" / "notes" / name).write_text(body)
    parsed = parse_document(doc)
    expanded = expand_sources(parsed, repo)
    sources = sources_record((f.relpath, f.sha256, f.size) for f in expanded.files)
    ids = [s.section_id for s in parsed.sections] + [f.section_id for f in expanded.files]
    (repo / "doc" / "adapter").mkdir(exist_ok=True)
    (repo / "doc" / "adapter" / ADAPTER_WEIGHTS).write_bytes(WEIGHTS)
    lock = lock_record(
        dlm_sha256=parsed.sha256, base_model_revision=REVISION, base_model_sha256="b1" * 32
    )
    write_records(repo, lock, manifest_for(parsed.sha256, ids, sources.model_dump(mode="json")))


def manifest_for(dlm_sha: str, ids: list[str], sources: dict[str, Any]) -> dict[str, Any]:
    config = {"seed": 42, "lora_r": 8}
    return {
        "schema_version": 1,
        "dlm_id": LOCK_RECORD["dlm_id"],
        "dlm_sha256": dlm_sha,
        "section_ids": ids,
        "sources": sources,
        "tokens": {"root": "70" * 32, "rows": 1, "sequences": 1, "tokens": 8},
        "tokenizer_sha256": "7a" * 32,
        "base": {
            "spec": "builtin:tiny",
            "kind": "builtin",
            "revision": REVISION,
            "tensor_root": "b1" * 32,
            "tokenizer_sha256": "7a" * 32,
            "config_sha256": "c0" * 32,
        },
        "training_config": config,
        "config_sha256": canonical_json_sha256(config),
        "lock_sha256": "",
        "adapter": {
            "files": {ADAPTER_WEIGHTS: {"sha256": sha256_bytes(WEIGHTS), "size": len(WEIGHTS)}},
            "tensor_root": "a1" * 32,
            "tensors": [],
        },
        "training": {
            "steps": 1,
            "final_loss_hex": "0x1p+0",
            "tokens_trained": 8,
            "skipped_preference_sections": 0,
        },
    }


def write_records(
    repo: Path, lock: dict[str, Any] | bytes, manifest: dict[str, Any] | bytes, bind: bool = True
) -> None:
    """Write doc/dlm.lock and doc/manifest.json (`bind`: the manifest's lock_sha256 made
    the lock's sha256)."""
    lock_bytes = canonical_json(lock) if isinstance(lock, dict) else lock
    if isinstance(manifest, dict):
        if bind:
            manifest = {**manifest, "lock_sha256": sha256_bytes(lock_bytes)}
        manifest = canonical_json(manifest)
    (repo / "doc" / "dlm.lock").write_bytes(lock_bytes)
    (repo / "doc" / "manifest.json").write_bytes(manifest)


def records(repo: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        json.loads((repo / "doc" / "dlm.lock").read_bytes()),
        json.loads((repo / "doc" / "manifest.json").read_bytes()),
    )


def found(repo: Path, stage: bool = True) -> list[tuple[str, str]]:
    """(level, check id) of every finding of the hook on the index (strict mode off)."""
    if stage:
        git(repo, "add", "-A")
    head = gitio.resolve_commit("HEAD", repo)
    findings, _ = collect(repo, head)
    return [(f.level, f.check) for f in findings]


def lines(repo: Path) -> list[str]:
    head = gitio.resolve_commit("HEAD", repo)
    findings, _ = collect(repo, head)
    return [f.line() for f in findings]


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A trained document, committed (HEAD), and the hook silent about it."""
    trained(git_repo)
    commit_all(git_repo, "trained")
    return git_repo


# --------------------------------------------------------------------------- findings


def test_finding_line_format() -> None:
    """The document, then the check's id (the key of `git config dlm-git.<id>`), as git
    fsck prints `error in commit X: badDate: ...`."""
    f = HookFinding(
        Severity.ERROR, "notes", "doc.sha256", "notes/notes.dlm changed", "run `dvc repro`"
    )
    assert f.line() == "dlm-git: ERROR notes: doc.sha256: notes/notes.dlm changed (run `dvc repro`)"


def test_summary_counts_and_verdict() -> None:
    e = HookFinding(Severity.ERROR, "a", "x", "w", "f")
    w = HookFinding(Severity.WARN, "b", "x", "w", "f")
    assert summary([e, w, w], 2) == (
        "dlm-git: 1 error(s), 2 warning(s) in 2 document(s): commit refused"
    )
    assert summary([w], 1) == "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok"


def test_a_finding_is_the_table_read_for_the_state() -> None:
    """FAILED is the row's severity, ABSENT its absent severity, unless the check set its
    own; IGNORE and a pass say nothing; the fix is the row's unless the check names one."""
    assert finding_of("d", Check("lock.fields", Outcome.OK, "ok")) is None
    failed = finding_of("d", Check("lock.fields", Outcome.FAILED, "seed differs"))
    assert failed is not None and (failed.level, failed.check) == ("ERROR", "lock.fields")
    assert "dvc repro" in failed.fix
    outside = finding_of("d", Check("sources.root", Outcome.ABSENT, "outside"))
    assert outside is not None and outside.level == "WARN"
    assert finding_of("d", Check("sections.order", Outcome.ABSENT, "outside")) is None
    own = finding_of("d", Check("determinism", Outcome.FAILED, "x", Severity.WARN, "why"))
    assert own is not None and (own.level, own.fix) == ("WARN", "why")
    signed = finding_of("d", Check("signature.binding", Outcome.FAILED, "x"))
    assert signed is not None and "git rm -f d/dlm.sig" in signed.fix


def test_a_checks_severity_is_set_as_gits_fsck_sets_one(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`git config dlm-git.<check id> error|warn|ignore`; strict mode still turns a WARN
    into an ERROR. Before, no check's severity could be set."""
    lock, manifest = records(repo)
    manifest["dlm_id"] = "01M800GRBP0GEV3WAMXAHDD42C"  # lock.fields fails
    write_records(repo, lock, manifest)
    git(repo, "add", "-A")
    git(repo, "config", "dlm-git.lock.fields", "warn")
    assert pre_commit.run(repo) == 0
    assert "dlm-git: WARN doc: lock.fields: lock.dlm_id vs manifest" in capsys.readouterr().err
    git(repo, "config", "dlm-git.strict", "true")
    assert pre_commit.run(repo) == 1
    assert "dlm-git: ERROR doc: lock.fields: lock.dlm_id vs manifest" in capsys.readouterr().err
    git(repo, "config", "--unset", "dlm-git.strict")
    git(repo, "config", "dlm-git.lock.fields", "ignore")
    assert pre_commit.run(repo) == 0
    assert capsys.readouterr().err == ""
    git(repo, "config", "dlm-git.lock.fields", "maybe")
    with pytest.raises(DlmGitError) as caught:
        pre_commit.run(repo)
    assert caught.value.one_line() == (
        "git config dlm-git.lock.fields: 'maybe' is not error, warn or ignore"
        " (hint: git config dlm-git.lock.fields error|warn|ignore)"
    )


# --------------------------------------------------------------------------- the honest case


def test_a_trained_document_staged_as_trained_is_silent(git_repo: Path) -> None:
    trained(git_repo)
    assert found(git_repo) == []  # first commit: no HEAD, every check from scratch
    commit_all(git_repo, "trained")
    trained(git_repo, SOURCES_DOC + "\nMore prose, retrained.\n")
    assert found(git_repo) == []  # sources unchanged since HEAD: the fast path


# --------------------------------------------------------------------------- lock drift


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
        (("determinism_class",), "best-effort", "WARN"),
    ],
)
def test_lock_drift_severity(path: tuple[str, ...], value: object, level: str) -> None:
    lock = copy.deepcopy(LOCK_RECORD)
    target = lock
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    (drift,) = lock_drift(lock, LOCK_RECORD, canonical_json(LOCK_RECORD))
    assert (drift.name, drift.severity) == ("lock.drift", Severity(level))
    assert drift.detail.startswith(f"{'.'.join(path)} changed")


def test_dlm_sha_change_is_allowed() -> None:
    lock = {**LOCK_RECORD, "dlm_sha256": "11" * 32}
    assert lock_drift(lock, LOCK_RECORD, canonical_json(LOCK_RECORD)) == []


def test_supersedes_of_head_lock_accepts_error_drift_but_keeps_warnings() -> None:
    head = canonical_json(LOCK_RECORD)
    lock = copy.deepcopy(LOCK_RECORD)
    lock["base_model_sha256"] = "00" * 32
    lock["pinned_versions"]["numpy"] = "2.5.0"
    lock["supersedes"] = sha256_bytes(head)
    assert [c.severity for c in lock_drift(lock, LOCK_RECORD, head)] == [Severity.WARN]
    lock["supersedes"] = sha256_bytes(b"x")  # another lock's: accepts nothing
    assert [c.severity for c in lock_drift(lock, LOCK_RECORD, head)] == [
        Severity.ERROR,
        Severity.WARN,
    ]


@pytest.mark.parametrize(
    "path",
    [("unknown_field",), ("determinism_flags", "bits_expected"), ("pinned_versions", "kernels")],
)
def test_a_key_no_dlm_git_writes_is_a_malformed_lock_not_drift(
    repo: Path, path: tuple[str, ...]
) -> None:
    """Refused however it is accepted: a malformed record is not a drift to accept."""
    lock, manifest = records(repo)
    target = lock
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = "x"
    lock["supersedes"] = sha256_bytes((repo / "doc" / "dlm.lock").read_bytes())
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "lock.parse")]
    assert "malformed lock" in lines(repo)[0] and path[-1] in lines(repo)[0]


def test_strict_mode_is_read_from_git_config_only_when_a_warning_needs_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Strict mode is applied once, to every finding, at the end of the run."""
    monkeypatch.delenv("DLM_GIT_STRICT", raising=False)
    reads: list[str] = []
    real = gitio.config_bool

    def counting(key: str, cwd: Path) -> bool | None:
        reads.append(key)
        return real(key, cwd)

    monkeypatch.setattr(gitio, "config_bool", counting)
    git(repo, "config", "dlm-git.strict", "yes")
    (repo / "README.md").write_text("no document\n")
    git(repo, "add", "README.md")
    assert pre_commit.run(repo) == 0
    assert "dlm-git.strict" not in reads  # nothing to upgrade, nothing read
    lock, manifest = records(repo)
    lock["seed"] = 7  # a WARN drift, recorded consistently
    manifest["training_config"] = {**manifest["training_config"], "seed": 7}
    manifest["config_sha256"] = canonical_json_sha256(manifest["training_config"])
    write_records(repo, lock, manifest)
    git(repo, "add", "-A")
    assert pre_commit.run(repo) == 1
    assert reads.count("dlm-git.strict") == 1
    err = capsys.readouterr().err
    assert "dlm-git: ERROR doc: lock.drift: seed changed: 42 -> 7" in err, err


@pytest.mark.parametrize(
    "data", [b"{not json", b"[1, 2]", canonical_json({**LOCK_RECORD, "lock_version": 99})]
)
def test_unreadable_staged_lock_is_an_error(repo: Path, data: bytes) -> None:
    _, manifest = records(repo)
    write_records(repo, data, manifest)
    assert found(repo) == [("ERROR", "lock.parse")]


def test_broken_head_lock_is_not_compared(repo: Path) -> None:
    lock, manifest = records(repo)
    (repo / "doc" / "dlm.lock").write_bytes(b"garbage")
    commit_all(repo, "a broken lock, past the hook")
    lock["seed"] = 7
    lock["pinned_versions"]["numpy"] = "2.5.0"
    write_records(repo, lock, manifest)
    assert ("WARN", "lock.drift") not in found(repo)


# --------------------------------------------------------------------------- record shape


def test_untrained_document_warns(git_repo: Path) -> None:
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "doc.dlm").write_text(PLAIN_DOC)
    assert found(git_repo) == [("WARN", "doc.trained")]
    assert "not trained yet" in lines(git_repo)[0]


def test_outputs_without_a_single_dlm_are_an_error(repo: Path) -> None:
    (repo / "doc" / "second.dlm").write_text(PLAIN_DOC)
    assert ("ERROR", "doc.sha256") in found(repo)
    assert any("holds 2 .dlm files, not exactly one" in line for line in lines(repo))


def test_no_dlm_no_outputs_is_silent(git_repo: Path) -> None:
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "notes.md").write_text("not a document\n")
    assert found(git_repo) == []


def test_manifest_without_lock_is_an_error(repo: Path) -> None:
    (repo / "doc" / "dlm.lock").unlink()
    assert found(repo) == [("ERROR", "lock.parse")]


def test_lock_without_manifest_is_an_error(repo: Path) -> None:
    (repo / "doc" / "manifest.json").unlink()
    assert found(repo) == [("ERROR", "manifest.parse")]


@pytest.mark.parametrize("data", [b"{", b'{"adapter": {}}', b"[]"])
def test_unreadable_manifest_is_an_error(repo: Path, data: bytes) -> None:
    lock, _ = records(repo)
    write_records(repo, lock, data)
    assert found(repo) == [("ERROR", "manifest.parse")]


# --------------------------------------------------------------------------- new in the hook
# Each of these was committed silently before the hook ran the contract's check list
# (its own copy checked none of them): `verify` failed the commit afterwards.


def test_a_manifest_of_the_wrong_shape_is_refused(repo: Path) -> None:
    """Before, the hook only needed `adapter.files` to be a mapping of mappings."""
    lock, manifest = records(repo)
    del manifest["tokens"]
    manifest["adapter"]["files"][ADAPTER_WEIGHTS]["size"] = True  # a bool is not a count
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "manifest.parse")]
    assert "malformed manifest: tokens: missing" in lines(repo)[0]


def test_lock_fields_disagreeing_with_the_manifest_are_refused(repo: Path) -> None:
    lock, manifest = records(repo)
    manifest["dlm_id"] = "01M800GRBP0GEV3WAMXAHDD42C"  # the lock says ...42B
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "lock.fields")]


def test_a_config_digest_that_is_not_the_configs_is_refused(repo: Path) -> None:
    lock, manifest = records(repo)
    manifest["training_config"] = {**manifest["training_config"], "lora_r": 64}
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "config.digest")]


def test_versions_that_did_not_build_the_base_are_refused(repo: Path) -> None:
    """A supersedes-accepted torch major (a drift the lock may record) that did not build
    the recorded builtin base: `lock.versions`."""
    lock, manifest = records(repo)
    lock["pinned_versions"]["torch"] = "3.0.0"
    lock["supersedes"] = sha256_bytes((repo / "doc" / "dlm.lock").read_bytes())
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "lock.versions")]


SWAPPED_DOC = SOURCES_DOC.replace(
    "### Q\nfirst question?\n### A\nfirst answer.\n### Q\nsecond question?\n### A\nsecond answer.",
    "### Q\nsecond question?\n### A\nsecond answer.\n### Q\nfirst question?\n### A\nfirst answer.",
)


@pytest.mark.parametrize("sources", ["unchanged", "edited"])
def test_swapped_sections_are_refused(repo: Path, sources: str) -> None:
    """Two Q/A pairs swapped, every hash re-bound to the edit, the recorded section ids
    left in the trained order: only `sections.order` can tell, with HEAD's sources
    (re-derived from HEAD's record) or with new ones (the sources re-expanded)."""
    assert SWAPPED_DOC != SOURCES_DOC
    trained(repo, SWAPPED_DOC, {"a.md": "fact a\n" if sources == "unchanged" else "new\n"})
    lock, manifest = records(repo)
    ids = manifest["section_ids"]
    manifest["section_ids"] = [ids[0], ids[2], ids[1], *ids[3:]]
    write_records(repo, lock, manifest)
    assert found(repo) == [("ERROR", "sections.order")]
    assert "section order differs from the manifest" in lines(repo)[0]


def test_a_crlf_lock_binds_in_its_canonical_form(repo: Path) -> None:
    """A lock checked out with CRLF and a manifest binding its canonical (LF) bytes, as
    training on a CRLF checkout writes them: verify's rule. Before, the hook hashed raw
    bytes and refused the honest commit."""
    lock, manifest = records(repo)
    lf = json.dumps(lock, indent=2, sort_keys=True).encode() + b"\n"
    write_records(
        repo, lf.replace(b"\n", b"\r\n"), {**manifest, "lock_sha256": sha256_bytes(lf)}, bind=False
    )
    assert found(repo) == []


def test_the_hook_and_verify_fail_the_same_checks(repo: Path) -> None:
    """One check list: the same forged records fail the same record checks staged (the
    hook) and committed (`verify COMMIT`)."""
    lock, manifest = records(repo)
    manifest["dlm_id"] = "01M800GRBP0GEV3WAMXAHDD42C"
    manifest["training_config"] = {**manifest["training_config"], "lora_r": 64}
    write_records(repo, lock, manifest)
    hook = {check for _, check in found(repo)}
    sha = commit_all(repo, "forged, past the hook")
    (report,) = verify_commit(repo, sha, None, build_base=False)
    failed = {c.name for c in report.checks if c.state is Outcome.FAILED}
    assert hook == failed == {"lock.fields", "config.digest"}


# --------------------------------------------------------------------------- determinism


def _other_adapter(manifest: dict[str, Any]) -> dict[str, Any]:
    other = copy.deepcopy(manifest)
    other["adapter"]["tensor_root"] = "a2" * 32
    return other


@pytest.mark.parametrize(
    ("profile", "klass", "level"),
    [
        ("x86-64-v3", "strong", "ERROR"),
        ("native", "strong", "ERROR"),
        ("armv8-a", "best-effort", "WARN"),
        (None, "advisory", "WARN"),
    ],
)
def test_same_inputs_other_adapter(profile: str | None, klass: str, level: str) -> None:
    """The class comes from this dlm-git's profile table, not from the lock's claim."""
    _, manifest = manifest_pair()
    flags = {k: v for k, v in LOCK_RECORD["determinism_flags"].items() if k != "numerics"}
    if profile is not None:
        flags["numerics"] = profile
    lock = {**LOCK_RECORD, "determinism_flags": flags, "determinism_class": "strong"}
    found = determinism(_other_adapter(manifest), lock, manifest, lock)
    assert found is not None and found.severity == Severity(level)
    assert found.detail == (
        f"same inputs as HEAD but a different adapter ({'a1' * 8} -> {'a2' * 8}) "
        f"under the same numerics setup (profile {profile or 'none recorded'}, class {klass}):"
        " the training was not reproducible"
    )


def manifest_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    m = manifest_for("79" * 32, [], {"files": [], "merkle_root": "51" * 32})
    return copy.deepcopy(m), m


def test_same_inputs_same_adapter_is_fine() -> None:
    _, manifest = manifest_pair()
    assert determinism(manifest, LOCK_RECORD, manifest, LOCK_RECORD) is None


@pytest.mark.parametrize(
    "change",
    [
        ("dlm_sha256", "12" * 32),
        ("config_sha256", "c2" * 32),
        ("sources", {"merkle_root": "52" * 32}),
        ("base", {"tensor_root": "b2" * 32}),
    ],
)
def test_changed_inputs_explain_a_new_adapter(change: tuple[str, object]) -> None:
    _, manifest = manifest_pair()
    key, value = change
    other = _other_adapter(manifest)
    other[key] = value
    assert determinism(other, LOCK_RECORD, manifest, LOCK_RECORD) is None


@pytest.mark.parametrize(
    ("key", "value", "cause"),
    [
        ("seed", 1, "seed 42 -> 1"),
        ("hardware_tier", "cuda", "hardware_tier 'cpu' -> 'cuda'"),
        ("cuda_version", "12.4", "cuda_version None -> '12.4'"),
        ("rocm_version", "6.0", "rocm_version None -> '6.0'"),
        (
            "determinism_flags",
            {**LOCK_RECORD["determinism_flags"], "numerics": "native"},
            "determinism_flags.numerics 'x86-64-v3' -> 'native'",
        ),
    ],
)
def test_a_setup_change_is_named_as_the_cause_of_a_new_adapter(
    key: str, value: object, cause: str
) -> None:
    _, manifest = manifest_pair()
    lock = copy.deepcopy(LOCK_RECORD)
    lock[key] = value
    found = determinism(_other_adapter(manifest), lock, manifest, LOCK_RECORD)
    assert found is not None and found.severity is Severity.WARN
    assert found.detail.startswith("same inputs as HEAD but a different adapter")
    assert f"explained by a different setup: {cause}" in found.detail


# --------------------------------------------------------------------------- the adapter


def test_the_work_trees_adapter_is_checked_without_a_dvc_lock(repo: Path) -> None:
    (repo / "doc" / "adapter" / ADAPTER_WEIGHTS).write_bytes(b"other weights!!")
    assert found(repo) == [("ERROR", "adapter.sha256")]
    assert "adapter_model.safetensors sha256" in lines(repo)[0]


def test_no_dvc_lock_and_no_adapter_warns(repo: Path) -> None:
    import shutil

    shutil.rmtree(repo / "doc" / "adapter")
    assert found(repo) == [("WARN", "adapter.files")]
    assert "no dvc.lock and no adapter/ here" in lines(repo)[0]


def test_unreadable_staged_dvc_lock_is_an_error(repo: Path) -> None:
    (repo / "dvc.lock").write_text("stages: [unclosed\n")
    assert found(repo) == [("ERROR", "dvc.binding")]
    assert "malformed record: dvc.lock: does not parse (" in lines(repo)[0]


# --------------------------------------------------------------------------- stale sources


def test_dlm_edited_since_training_is_stale(repo: Path) -> None:
    (repo / "doc" / "doc.dlm").write_text(SOURCES_DOC + "An edit nobody trained on.\n")
    assert found(repo) == [("ERROR", "doc.sha256")]  # stale: sources and sections not run
    assert lines(repo)[0].startswith(
        "dlm-git: ERROR doc: doc.sha256: doc/doc.dlm changed since it was trained"
        " (manifest.json is stale)"
    )


def test_unchanged_sources_are_not_re_expanded(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained(repo, SOURCES_DOC + "More body.\n")  # retrained after a body edit

    def boom(*args: object) -> None:
        raise AssertionError("re-expanded sources that are unchanged since HEAD")

    monkeypatch.setattr("dlm_git.hooks.staged.sources_checks", boom)
    assert found(repo) == []


def test_changed_sources_are_re_expanded_from_the_index(repo: Path) -> None:
    trained(repo, notes={"a.md": "fact a, edited\n"})
    assert found(repo) == []  # retrained and staged: fine
    # The index is what counts: the same record, the source edit unstaged, is stale.
    git(repo, "reset", "-q", "doc/notes/a.md")
    assert found(repo, stage=False) == [("ERROR", "sources.root"), ("ERROR", "sections.order")]
    assert lines(repo)[0].startswith(
        "dlm-git: ERROR doc: sources.root: staged sources differ from those manifest.json was"
        " trained on"
    )


def test_untracked_source_that_training_saw_is_stale(repo: Path) -> None:
    """Retrained with a new notes/b.md in the work tree that was never `git add`ed."""
    trained(repo, notes={"a.md": "fact a\n", "b.md": "fact b\n"})
    git(repo, "add", "doc/dlm.lock", "doc/manifest.json")
    assert ("ERROR", "sources.root") in found(repo, stage=False)
    assert found(repo) == []  # b.md staged too


def test_changed_sources_spec_is_re_expanded(repo: Path) -> None:
    (repo / "doc" / "notes" / "c.txt").write_text("fact c\n")
    commit_all(repo, "a .txt file, not a source yet")
    _, head_record = records(repo)
    trained(repo, SOURCES_DOC.replace('["*.md"]', '["*.md", "*.txt"]'))
    lock, manifest = records(repo)
    write_records(repo, lock, {**manifest, "sources": head_record["sources"]})
    assert ("ERROR", "sources.root") in found(repo)  # HEAD's root kept: stale
    trained(repo, SOURCES_DOC.replace('["*.md"]', '["*.md", "*.txt"]'))
    assert found(repo) == []


def test_symlinked_sources_are_re_expanded(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link under the source directories may point anywhere: no fast path."""
    (repo / "elsewhere.md").write_text("target\n")
    (repo / "doc" / "notes" / "link.md").symlink_to("../../elsewhere.md")
    commit_all(repo, "a symlinked source")
    with TreeAt(repo, Rev.INDEX) as index:
        assert index.symlinks(["doc"]) == ["doc/notes/link.md"]
    called: list[str] = []
    monkeypatch.setattr(
        "dlm_git.hooks.staged.sources_checks", lambda checks, doc, m, work: called.append(doc.rel)
    )
    trained(repo, SOURCES_DOC + "More body.\n")
    found(repo)
    assert called == ["doc"]


def test_sources_outside_the_repository_warn(git_repo: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "s.md").write_text("outside fact\n")
    text = SOURCES_DOC.replace(
        '      include: ["*.md"]\n', f'      include: ["*.md"]\n    - path: {shared}\n'
    ).replace("training:\n", "training:\n  sources_policy: permissive\n")
    trained(git_repo, text)
    assert found(git_repo) == [("WARN", "sources.root")]  # re-expanded: no HEAD
    assert str(shared) in lines(git_repo)[0]
    commit_all(git_repo, "trained")
    trained(git_repo, text + "More prose.\n")
    assert found(git_repo) == [("WARN", "sources.root")]  # HEAD's sources: named, not read


@pytest.mark.parametrize("edit", ["changed", "new", "gone"])
def test_sources_inside_are_checked_beside_outside_ones(
    git_repo: Path, tmp_path: Path, edit: str
) -> None:
    """A document with sources outside the repository still has the files inside it
    compared: an in-repo source edited, added or removed without retraining is stale,
    whatever is outside."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "s.md").write_text("outside fact\n")
    text = SOURCES_DOC.replace(
        '      include: ["*.md"]\n', f'      include: ["*.md"]\n    - path: {shared}\n'
    ).replace("training:\n", "training:\n  sources_policy: permissive\n")
    trained(git_repo, text, {"a.md": "fact a\n", "b.md": "fact b\n"})
    assert found(git_repo) == [("WARN", "sources.root")]
    if edit == "changed":
        (git_repo / "doc" / "notes" / "a.md").write_text("fact a, edited\n")
    elif edit == "new":
        (git_repo / "doc" / "notes" / "c.md").write_text("fact c\n")
    else:
        (git_repo / "doc" / "notes" / "b.md").unlink()
    assert ("ERROR", "sources.root") in found(git_repo)
    assert "staged sources differ from those manifest.json was trained on" in lines(git_repo)[0]


# --------------------------------------------------------------------------- discovery


def test_discover_lists_params_documents_and_staged_dlm_dirs(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents:\n  - a\n  - ./b/\n  - 3\n")
    git(git_repo, "add", "params.yaml")
    staged = ["c/c.dlm", "a/a.dlm", "top.dlm", "a/notes/x.md"]
    with TreeAt(git_repo, Rev.INDEX) as index:
        assert pre_commit.discover(index, staged) == ["a", "b", "c", "."]
        assert index.params.problems == [
            ("params.yaml", "documents: entry 3 (3) is not a directory name")
        ]


def test_discover_reads_the_index_not_the_worktree(git_repo: Path) -> None:
    (git_repo / "params.yaml").write_text("documents: [staged]\n")
    git(git_repo, "add", "params.yaml")
    (git_repo / "params.yaml").write_text("documents: [worktree]\n")
    with TreeAt(git_repo, Rev.INDEX) as index:
        assert pre_commit.discover(index, []) == ["staged"]


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
    with TreeAt(git_repo, Rev.INDEX) as index:
        rels = pre_commit.discover(index, ["README.md"])
        assert rels == ["listed", "lone", HOSTILE_DIR]
        findings = pre_commit.pipeline_findings(index, rels, ["params.yaml"], set())
    assert sorted(f.doc for f in findings) == ["lone", HOSTILE_DIR]
    assert all(f.check == "pipeline.documents" for f in findings)
    assert "does not list it" in next(f.what for f in findings if f.doc == HOSTILE_DIR)


def test_params_naming_a_missing_directory_is_an_error(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "params.yaml").write_text("documents: [doc, gone, ../up]\n")
    _doc_with_records(git_repo, "doc", lock=False, manifest=False)
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "dlm-git: ERROR params.yaml: pipeline.documents: documents: entry '../up' is not a"
        " directory inside the repository (list each document directory under `documents:`"
        " in params.yaml)",
        "dlm-git: ERROR gone: pipeline.documents: params.yaml documents: lists gone, which"
        " holds no .dlm (list each document directory under `documents:` in params.yaml)",
        "dlm-git: WARN doc: doc.trained: document not trained yet (no manifest.json, no"
        " dlm.lock)"
        " (run `dlm-git train doc` and stage the results)",  # no dvc.yaml: no pipeline
        "dlm-git: 2 error(s), 1 warning(s) in 2 document(s): commit refused",
    ]


# --------------------------------------------------------------------------- what is touched


def _doc(git_repo: Path, rel: str = "doc", sources: str | None = None) -> Any:
    from dlm_git.docat import DocAt

    text = (
        "---\n---\n"
        if sources is None
        else (f"---\ntraining:\n  sources:\n    - path: {sources}\n---\n")
    )
    return DocAt(TreeAt(git_repo, Rev.INDEX), rel, (f"{rel}/d.dlm",), dlm=text.encode())


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
def test_touched(git_repo: Path, staged: list[str], hit: bool) -> None:
    doc = _doc(git_repo, sources="../shared/notes")
    assert doc.source_dirs == ["shared/notes"]
    assert touched(doc, staged) is hit


def test_root_document_is_touched_by_anything(git_repo: Path) -> None:
    assert touched(_doc(git_repo, "."), ["README.md"]) is True


def test_adapter_record_changed_per_document(git_repo: Path) -> None:
    other = BIG_DVC_LOCK.replace(b"0123456789abcdef0123456789abcdef.dir", b"f" * 32 + b".dir")
    doc, other_doc = _doc(git_repo), _doc(git_repo, "other")
    changed = pre_commit.adapter_record_changed(other, BIG_DVC_LOCK)
    assert changed(doc) and not changed(other_doc)
    assert touched(doc, ["dvc.lock"], changed)
    assert not touched(other_doc, ["dvc.lock"], changed)
    assert touched(other_doc, ["dvc.lock"])  # no HEAD comparison given: every document
    assert pre_commit.adapter_record_changed(BIG_DVC_LOCK, None)(doc)
    assert not pre_commit.adapter_record_changed(None, None)(doc)
    assert pre_commit.adapter_record_changed(b"stages: [", BIG_DVC_LOCK)(doc)


def test_unchanged_adapter_record_is_not_parsed(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = BIG_DVC_LOCK.replace(b"0123456789abcdef0123456789abcdef.dir", b"f" * 32 + b".dir")
    changed = pre_commit.adapter_record_changed(other, BIG_DVC_LOCK)

    def parse(data: bytes, path: str) -> None:
        raise AssertionError(f"parsed dvc.lock for {path}")

    monkeypatch.setattr(pre_commit, "find_out_in", parse)
    assert changed(_doc(git_repo, "other")) is False
