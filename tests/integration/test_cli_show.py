"""`dlm-git show` end to end, in subprocesses: JSON and human output, exit codes, errors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlm_git import __version__
from tests.support.docs import DLM_ID, section_id, source_section_id
from tests.support.env import subprocess_env

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo"
HF_SPEC = "hf:org/name@" + "0123456789abcdef" * 2 + "01234567"


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, exe: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = (exe if exe is not None else [sys.executable, "-m", "dlm_git"]) + list(args)
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env if env is not None else subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def demo_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding a copy of examples/demo (shared: tests only read it)."""
    repo = tmp_path_factory.mktemp("demo-repo")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    shutil.copytree(DEMO, repo / "demo")
    return repo


@pytest.fixture(scope="module")
def demo_json(demo_repo: Path) -> dict:  # type: ignore[type-arg]
    result = run("show", "demo", "--json", cwd=demo_repo)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_show_json_demo(demo_repo: Path, demo_json: dict) -> None:  # type: ignore[type-arg]
    report = demo_json
    doc_bytes = (demo_repo / "demo" / "demo.dlm").read_bytes()
    assert report["path"] == "demo/demo.dlm"
    assert report["dlm_sha256"] == hashlib.sha256(doc_bytes).hexdigest()
    assert report["frontmatter"]["dlm_id"] == DLM_ID
    assert report["frontmatter"]["training"]["max_steps"] == 24
    assert report["frontmatter"]["training"]["sources"][0]["include"] == ["*.md", "*.txt"]

    sections = report["sections"]
    assert [(s["type"], s["line"], s["source_path"]) for s in sections] == [
        ("prose", 25, None),
        ("instruction", 31, None),
        ("instruction", 38, None),
        ("preference", 46, None),
        ("prose", None, "notes/hashing.md"),
        ("prose", None, "notes/verify.txt"),
    ]
    assert sections[0]["first_line"] == "# Reproducible adapters"
    assert sections[1]["first_line"] == "What does dlm.lock record?"
    assert len({s["id"] for s in sections}) == 6
    note = (demo_repo / "demo" / "notes" / "hashing.md").read_text("utf-8")
    assert sections[4]["id"] == source_section_id("notes/hashing.md", note)
    assert report["counts"] == {
        "prose": 1,
        "instruction": 2,
        "preference": 1,
        "source_files": 2,
        "skipped_files": 0,
    }

    src = report["sources"]
    assert src["directives"] == [{"index": 0, "path": "notes", "taken": 2, "skipped": 0}]
    assert [f["relpath"] for f in src["files"]] == ["notes/hashing.md", "notes/verify.txt"]
    for f in src["files"]:
        data = (demo_repo / "demo" / f["relpath"]).read_bytes()
        assert f["sha256"] == hashlib.sha256(data).hexdigest()
        assert f["size"] == len(data)
    assert src["skipped"] == []

    base = report["base_model"]
    assert base["spec"] == "builtin:tiny"
    assert base["kind"] == "builtin"
    assert base["available"] is True
    assert base["revision"].startswith("tiny-")
    # the session's base cache, never ~/.cache
    assert Path(base["path"]).parent == Path(os.environ["DLM_GIT_BASE_CACHE"])


def test_show_json_is_deterministic(demo_repo: Path, demo_json: dict) -> None:  # type: ignore[type-arg]
    again = run("show", "demo/demo.dlm", "--json", cwd=demo_repo)
    assert again.returncode == 0
    assert json.loads(again.stdout) == demo_json
    # canonical JSON: sorted keys, 2-space indent, one trailing newline
    assert (
        again.stdout == json.dumps(demo_json, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    )


def test_show_human_contains_section_ids(demo_repo: Path, demo_json: dict) -> None:  # type: ignore[type-arg]
    result = run("show", "demo", cwd=demo_repo)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert DLM_ID in out
    assert demo_json["dlm_sha256"] in out
    for s in demo_json["sections"]:
        assert s["id"] in out
    assert "1 prose, 2 instruction, 1 preference, 2 source files (0 skipped)" in out
    assert "sources[0] notes: 2 taken, 0 skipped" in out
    assert "Traceback" not in out + result.stderr


def test_show_reports_skips_and_unavailable_hf_base(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "notes").mkdir()
    (git_repo / "notes" / "a.md").write_text("a\n", "utf-8")
    (git_repo / "notes" / "b.bin").write_bytes(b"\x00\x01")
    doc = git_repo / "d.dlm"
    doc.write_text(
        f"---\ndlm_id: {DLM_ID}\nbase_model: {HF_SPEC}\ntraining:\n  sources:\n"
        "    - path: notes\n---\nHello.\n",
        "utf-8",
    )
    env = subprocess_env(HF_HUB_CACHE=str(tmp_path / "empty-hub"))
    result = run("show", "d.dlm", "--json", cwd=git_repo, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sources"]["skipped"] == [
        {"relpath": "notes/b.bin", "reason": "binary (NUL byte in the first KiB)"}
    ]
    base = report["base_model"]
    assert (base["kind"], base["name"], base["available"]) == ("hf", "org/name", False)
    assert base["revision"] == HF_SPEC.rsplit("@", 1)[1]

    human = run("show", "d.dlm", cwd=git_repo, env=env)
    assert human.returncode == 0
    assert "NOT available" in human.stdout
    assert "skipped notes/b.bin: binary (NUL byte in the first KiB)" in human.stdout


# --- user errors: exit 1, one line, no traceback ---------------------------------------------

FM = "---\ndlm_id: 01M800GRBP0GEV3WAMXAHDD42B\n"

# (document bytes, line the error names, what to pass to `show`: the file or its directory)
BAD_INPUTS = [
    pytest.param(FM + "bogus: 1\n---\n", 3, "docs/bad.dlm", id="frontmatter"),
    pytest.param("---\nbase_model: builtin:tiny\n---\n", 1, "docs", id="missing-id"),
    pytest.param(FM + "---\n::instruction::\n### Q\nq\n", 5, "docs", id="body"),
    pytest.param(
        FM + "training:\n  sources:\n    - path: ../..\n---\n", 5, "docs/bad.dlm", id="escape"
    ),
    pytest.param(FM + "training:\n  sources:\n    - path: gone\n---\n", 5, "docs", id="no-src"),
    pytest.param(FM.encode() + b"---\n\xfe\n", 4, "docs/bad.dlm", id="utf8"),
]


@pytest.mark.parametrize(("content", "line", "target"), BAD_INPUTS)
def test_bad_input_exit_1_one_line(
    git_repo: Path, content: str | bytes, line: int, target: str
) -> None:
    sub = git_repo / "docs"
    sub.mkdir()
    data = content.encode("utf-8") if isinstance(content, str) else content
    (sub / "bad.dlm").write_bytes(data)
    result = run("show", target, "--json", cwd=git_repo)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    # the directory form finds the one .dlm in it and names it the same way
    assert lines[0].startswith(f"docs/bad.dlm:{line}:"), lines[0]


def test_missing_file_exit_1(git_repo: Path) -> None:
    result = run("show", "nothere.dlm", cwd=git_repo)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "nothere.dlm: no such file or directory (hint: check the document path)"
    ]


def test_directory_without_document_exit_1(git_repo: Path) -> None:
    result = run("show", ".", cwd=git_repo)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(".: directory holds no .dlm file")


def test_invalid_base_model_exit_1(git_repo: Path) -> None:
    (git_repo / "d.dlm").write_text(f"---\ndlm_id: {DLM_ID}\nbase_model: llama-7b\n---\n", "utf-8")
    result = run("show", "d.dlm", cwd=git_repo)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "unknown base model 'llama-7b'" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["show"], id="show-without-doc"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["show", "x.dlm", "--bogus"], id="unknown-option"),
        pytest.param([], id="no-args"),
    ],
)
def test_cli_misuse_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr


def test_version(tmp_path: Path) -> None:
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"dlm-git {__version__}\n"
    assert __version__ == "0.1.0"


def test_git_dlm_subcommand(git_repo: Path) -> None:
    script = shutil.which("git-dlm") or shutil.which(
        "git-dlm", path=str(Path(sys.executable).parent)
    )
    if script is None:
        pytest.skip("the git-dlm console script is not installed")
    (git_repo / "d.dlm").write_text(
        f"---\ndlm_id: {DLM_ID}\nbase_model: ./base\n---\nHello git.\n", "utf-8"
    )
    env = subprocess_env()
    env["PATH"] = str(Path(script).parent) + os.pathsep + env["PATH"]
    result = run("dlm", "show", "d.dlm", "--json", cwd=git_repo, env=env, exe=["git"])
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [s["id"] for s in report["sections"]] == [section_id("prose", "Hello git.")]
    assert report["base_model"]["kind"] == "local"
    assert report["base_model"]["available"] is False
    version = run("dlm", "--version", cwd=git_repo, env=env, exe=["git"])
    assert version.stdout == f"dlm-git {__version__}\n"
