"""Bad data never crashes dlm-git: each malformed input gives exit 1 (a failed check) or
2 (command-line misuse) and one line on stderr naming the file, never a traceback, a
signal or a hang. Commands run as real subprocesses (`dlm-git`, `python -m
dlm_git.hooks.*`), so a libyaml stack overflow would show as a negative exit status."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import dlm_git, hook
from tests.support.env import subprocess_env
from tests.support.verdicts import assert_caught
from tests.support.verified import ADAPTER_OUT, DOC

pytestmark = pytest.mark.slow

ZERO = "0" * 40
DEEP = 100_000
"""Far past libyaml's stack (it overflowed at ~30K `[`) and Python's recursion limit."""

FRONTMATTER_DEEP = {
    "flow": "system_prompt: " + "[" * DEEP + "]" * DEEP,
    "block": "system_prompt:\n  " + "- " * DEEP + "x",
}


@pytest.mark.parametrize("shape", sorted(FRONTMATTER_DEEP))
def test_deep_frontmatter(git_repo: Path, write_doc: Any, shape: str) -> None:
    doc = write_doc(git_repo / "d", "Some prose.\n", frontmatter=FRONTMATTER_DEEP[shape])
    line = dlm_git(git_repo, "show", str(doc)).one_line_error(1, "doc.dlm")
    assert "nested deeper than" in line, line


@pytest.mark.parametrize(
    ("frontmatter", "key"),
    [
        ("training:\n  learning_rate: .inf", "learning_rate"),
        ("training:\n  learning_rate: .nan", "learning_rate"),
        ("training:\n  lora_alpha: -.inf", "lora_alpha"),
        ("training:\n  warmup_ratio: .nan", "warmup_ratio"),
        ("training:\n  max_steps: true", "max_steps"),
        ("training:\n  seed: false", "seed"),
        ("training:\n  lora_dropout: true", "lora_dropout"),
        ("training:\n  sources:\n    - path: notes\n      max_files: true", "max_files"),
        ("dlm_version: true", "dlm_version"),
    ],
)
def test_frontmatter_numbers(git_repo: Path, write_doc: Any, frontmatter: str, key: str) -> None:
    (git_repo / "d" / "notes").mkdir(parents=True)
    doc = write_doc(git_repo / "d", "Some prose.\n", frontmatter=frontmatter)
    line = dlm_git(git_repo, "show", str(doc)).one_line_error(1, "doc.dlm:", key)
    assert "finite" in line or "boolean" in line, line


def test_an_oversized_document_is_refused_before_it_is_tokenized(
    git_repo: Path, write_doc: Any
) -> None:
    """A 50 MB .dlm once took 9.2 GB: the document is bounded (bulk text goes to sources,
    each bounded by max_bytes_per_file), in train, show and the hooks' parser alike."""
    from dlm_git.doc.parser import MAX_DOCUMENT_BYTES

    para = "Reproducible adapters are rebuilt from the commit that records them.\n\n"
    doc = write_doc(git_repo / "d", para * (MAX_DOCUMENT_BYTES // len(para) + 1))
    for args in (["show", str(doc)], ["train", str(doc), "--device", "cpu"]):
        line = dlm_git(git_repo, *args, timeout=120).one_line_error(1, "doc.dlm")
        assert "over the 4 MiB limit" in line and "training.sources" in line, line


def test_fifo_as_the_document(git_repo: Path) -> None:
    fifo = git_repo / "d" / "doc.dlm"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    for args in (["show", str(fifo)], ["show", str(fifo.parent)], ["train", str(fifo)]):
        dlm_git(git_repo, *args, timeout=120).one_line_error(1, "doc.dlm", "regular file")


def test_verify_sample_and_report_misuse(forge: Any, tmp_path: Path) -> None:
    for sample in ("-1", "0"):
        line = dlm_git(
            forge.root, "verify", "HEAD", "--level", "segments", "--sample", sample
        ).one_line_error(2, "--sample")
        assert sample in line
    (tmp_path / "a-dir").mkdir()
    dlm_git(forge.root, "verify", "HEAD", "--report", str(tmp_path / "a-dir")).one_line_error(
        2, "--report", "a-dir"
    )


# --------------------------------------------------------------------- hostile commits


def commit_file(forge: Any, rel: str, data: bytes) -> str:
    forge.write(rel, data)
    return forge.commit(f"hostile {rel}")  # type: ignore[no-any-return]


def verify_json(forge: Any) -> dict[str, Any]:
    """`dlm-git verify HEAD --json` as a subprocess: exit 1, no traceback, one document."""
    result = dlm_git(forge.root, "verify", "HEAD", "--json")
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "FAILED"
    (doc,) = payload["documents"]
    return doc  # type: ignore[no-any-return]


def first_failure(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["checks"] if not c["ok"])


DVC_LOCKS = {
    "deep_flow": b"schema: '2.0'\nstages: " + b"[" * DEEP + b"]" * DEEP + b"\n",
    "deep_block": b"schema: '2.0'\nstages:\n  " + b"- " * DEEP + b"x\n",
    "stages_list": b"schema: '2.0'\nstages:\n- train\n- verify\n",
    "stage_list": b"schema: '2.0'\nstages:\n  train@demo:\n  - outs\n",
    "outs_mapping": b"schema: '2.0'\nstages:\n  train@demo:\n    outs: {path: demo/adapter}\n",
    "unparseable": b"schema: '2.0'\nstages: [unclosed\n",
    "not_utf8": b"schema: '2.0'\nstages: {}\n# \xff\xfe\n",
    "scalar": b"just a string\n",
    # values PyYAML cannot build: bare ValueError/KeyError tracebacks until 73de650
    "bad_date": b"schema: '2.0'\nstages:\n  train@demo:\n    when: 2024-02-30\n",
    "bad_tag": b"schema: '2.0'\nstages: !!bool maybe\n",
    "huge_hex_int": b"schema: '2.0'\nstages:\n  n: 0x" + b"f" * 3600 + b"\n",
    "self_alias": b"schema: '2.0'\nstages: &a [*a]\n",
}


@pytest.mark.parametrize("case", sorted(DVC_LOCKS))
def test_malformed_dvc_lock_fails_verify(forge: Any, case: str) -> None:
    """Malformed, not absent: FAILED at dvc.binding (the pre-push hook refuses it; a
    CANNOT_VERIFY would only warn)."""
    commit_file(forge, "dvc.lock", DVC_LOCKS[case])
    doc = verify_json(forge)
    assert doc["verdict"] == "FAILED", doc
    bad = first_failure(doc)
    assert bad["name"] == "dvc.binding" and "dvc.lock" in bad["detail"], bad
    sha = forge.git("rev-parse", "HEAD").strip()
    pushed = hook(forge.root, "pre_push", f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    assert pushed.code == 1 and "Traceback" not in pushed.stderr, pushed.stderr
    assert "push refused" in pushed.stderr and "dvc.binding" in pushed.stderr, pushed.stderr


@pytest.mark.parametrize("case", ["not_json", "not_a_list", "deep", "duplicate", "bad_entry"])
def test_corrupt_dir_listing_fails_verify(forge: Any, case: str) -> None:
    """The `.dir` object dvc.lock names is in the cache but is not a listing."""
    good = forge.listing(forge.out_md5())
    entries = [{"md5": m, "relpath": r} for r, m in sorted(good.items())]
    data = {
        "not_json": b"\x00\x01 not json",
        "not_a_list": json.dumps({"relpath": "x"}).encode(),
        "deep": b"[" * DEEP + b"]" * DEEP,
        "duplicate": json.dumps(entries + entries[:1]).encode(),
        "bad_entry": json.dumps([*entries, {"md5": 5, "relpath": None}]).encode(),
    }[case]
    name = forge.put_object(data) + ".dir"
    forge.cache_path(name).write_bytes(data)
    forge.set_out_md5(ADAPTER_OUT, name, None, None)
    forge.commit(f"corrupt listing {case}")
    doc = verify_json(forge)
    assert doc["verdict"] == "FAILED", doc
    bad = first_failure(doc)
    assert bad["name"] == "dvc.binding" and name in bad["detail"], bad


def test_a_corrupt_segments_listing_fails_the_segments_level(forge: Any) -> None:
    """The hash level does not read segments/; the segments level must not call a
    malformed listing "absent" (CANNOT_VERIFY) either."""
    segments = f"{DOC}/segments"
    good = forge.listing(forge.out_md5(segments))
    name = forge.put_listing({**good, "../escape.json": next(iter(good.values()))})
    forge.set_out_md5(segments, name, None, None)
    forge.commit("corrupt segments listing")
    result = forge.verify("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 1 and result.verdict == "FAILED", result.explain()
    assert "malformed record" in result.check("segments.chain")["detail"], result.explain()


def test_absent_listing_stays_cannot_verify(forge: Any) -> None:
    forge.set_out_md5(ADAPTER_OUT, "0" * 32 + ".dir", None, None)
    forge.commit("adapter not in this cache")
    doc = verify_json(forge)
    assert doc["verdict"] == "CANNOT_VERIFY", doc


@pytest.mark.parametrize("what", ["manifest", "lock"])
def test_deep_json_records_fail_verify(forge: Any, what: str) -> None:
    rel = f"{DOC}/{'manifest.json' if what == 'manifest' else 'dlm.lock'}"
    commit_file(forge, rel, b"[" * DEEP + b"]" * DEEP)
    doc = verify_json(forge)
    assert first_failure(doc)["name"] == f"{what}.parse", doc


def test_deep_params_yaml(forge: Any) -> None:
    commit_file(forge, "params.yaml", b"documents: " + b"[" * DEEP + b"]" * DEEP + b"\n")
    dlm_git(forge.root, "verify", "HEAD").one_line_error(1, "params.yaml", "nested deeper")
    sha = forge.git("rev-parse", "HEAD").strip()
    pushed = hook(forge.root, "pre_push", f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    pushed.one_line_error(1, "params.yaml", "nested deeper")


def test_params_yaml_holding_a_value_yaml_cannot_build(forge: Any) -> None:
    """A bare ValueError traceback until 73de650: now the pipeline check fails, named."""
    commit_file(forge, "params.yaml", b"documents: [demo]\nseed: 2024-02-30\n")
    result = dlm_git(forge.root, "verify", "HEAD")
    assert result.code == 1 and "Traceback" not in result.stderr, result.stderr
    failed = [line for line in result.stdout.splitlines() if " FAIL " in line]
    assert failed == [
        "params.yaml              pipeline.documents   FAIL params.yaml: does not parse: not a"
        " valid timestamp (day is out of range for month) (hint: list each document directory"
        " under `documents:` in params.yaml)"
    ], result.stdout
    sha = forge.git("rev-parse", "HEAD").strip()
    pushed = hook(forge.root, "pre_push", f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    assert pushed.code == 1 and "Traceback" not in pushed.stderr, pushed.stderr
    assert "push refused" in pushed.stderr and "pipeline.documents" in pushed.stderr


STAGED = {
    "dvc.lock": b"stages: " + b"[" * DEEP + b"]" * DEEP + b"\n",
    "params.yaml": b"documents: " + b"{a: " * DEEP + b"}" * DEEP + b"\n",
    "demo/manifest.json": b"[" * DEEP + b"]" * DEEP,
    "demo/dlm.lock": b'{"a": ' * DEEP + b"1" + b"}" * DEEP,
    "dvc.lock#stages_list": b"schema: '2.0'\nstages:\n- a\n",
    "demo/demo.dlm#deep": b"---\nsystem_prompt: " + b"[" * DEEP + b"\n---\nprose\n",
}


@pytest.mark.parametrize("case", sorted(STAGED))
def test_pre_commit_on_hostile_staged_files(forge: Any, case: str) -> None:
    """Staged hostile records: the pre-commit hook answers (refuses with a finding, or
    lets through what it cannot concern itself with), never crashes."""
    rel = case.split("#")[0]
    forge.write(rel, STAGED[case])
    forge.git("add", "-A")
    result = hook(forge.root, "pre_commit")
    assert result.code in (0, 1), result.stderr
    assert "Traceback" not in result.stderr and "Error:" not in result.stderr, result.stderr
    if rel in ("dvc.lock", "demo/manifest.json", "demo/dlm.lock"):
        assert result.code == 1 and "ERROR" in result.stderr, result.stderr


def test_path_injected_md5_reads_nothing_outside(
    forge: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """dvc.lock's adapter md5 is `ab/<absolute path>`: verify (in-process, under an
    audit hook that records every file opened) fails and never opens that path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    listing = forge.listing(forge.out_md5())
    target = outside / "adapter.dir"
    target.write_text(json.dumps([{"md5": m, "relpath": r} for r, m in listing.items()]))
    forge.set_out_md5(ADAPTER_OUT, "ab" + str(target), None, None)
    forge.commit("md5 with a path")
    opened: list[str] = []
    recording = [True]

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if recording[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(args[0]))

    sys.addaudithook(audit)  # cannot be removed: switched off below
    try:
        result = forge.verify("HEAD")
    finally:
        recording[0] = False
    assert_caught(result, "dvc.binding")
    assert "Traceback" not in result.stderr
    assert opened, "the audit hook saw no open at all"
    assert not [p for p in opened if p.startswith(str(outside))], opened


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_tokens_are_retokenized(forge: Any, damage: str) -> None:
    """A corrupt `tokens/tokens.safetensors` is not a crash: train tokenizes afresh and
    trains the same adapter (same inputs, class strong, same setup as the pipeline)."""
    rel = f"{DOC}/tokens/tokens.safetensors"
    blob = forge.read(rel)
    forge.write(rel, b"\x00garbage" * 64 if damage == "garbage" else blob[: len(blob) // 2])
    before = forge.manifest()["adapter"]["files"]
    result = dlm_git(
        forge.root,
        *("train", DOC, "--tiny-dir", "bases/tiny", "--quiet"),
        *("--device", "cpu", "--threads", "2"),
    )
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    assert forge.manifest()["adapter"]["files"] == before


def test_a_full_disk_is_one_line_and_leaves_the_outputs_intact(forge: Any) -> None:
    """The file-size limit stands in for a full disk: writing the new adapter fails with
    EFBIG. One line naming the file, exit 1, and every recorded output as it was."""
    import resource
    import signal
    import subprocess

    doc_dir = forge.root / DOC
    before = {p.name: p.read_bytes() for p in doc_dir.iterdir() if p.is_file()}
    before_adapter = (doc_dir / "adapter" / "adapter_model.safetensors").read_bytes()
    text = (doc_dir / f"{DOC}.dlm").read_text("utf-8")
    (doc_dir / f"{DOC}.dlm").write_text(text + "\nOne more paragraph.\n", "utf-8")

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, 32 * 1024))

    proc = subprocess.run(
        [sys.executable, "-m", "dlm_git", "train", str(doc_dir), "-q", "--device", "cpu"],
        cwd=forge.root,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
        timeout=600,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "File too large" in lines[0], lines
    after = {p.name: p.read_bytes() for p in doc_dir.iterdir() if p.is_file()}
    changed = {n for n in before if before[n] != after.get(n)} - {f"{DOC}.dlm"}
    assert not changed, f"outputs changed by a failed train: {changed}"
    assert (doc_dir / "adapter" / "adapter_model.safetensors").read_bytes() == before_adapter
