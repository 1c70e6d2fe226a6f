"""The verifier named in every verdict, specified on the real CLI and a real trained
repository: `dlm-git --version --json` names the running code (a copy of the package
with one byte changed names other code; a wheel built from a checkout names the
checkout's code), every `verify --json` carries that identity,
`dlm-git log` shows which verifier reached a remembered verdict ("unknown" for one
remembered without it), and no committed record names the verifier."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from dlm_git import __version__
from dlm_git.hashing import canonical_json
from dlm_git.selfid import PACKAGE, from_json, identity, package_digest
from tests.support.cli import cli, one_line_error
from tests.support.env import run
from tests.support.gitrepo import git
from tests.support.release import build, copy_checkout
from tests.support.verified import DOC

pytestmark = pytest.mark.slow

FIELDS = {"name", "version", "digest", "files", "commit", "dirty"}


def version_json(cwd: Path, **env: str) -> dict[str, Any]:
    proc = cli("--version", "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert isinstance(found, dict)
    return found


def test_version_json_names_the_running_code(tmp_path: Path) -> None:
    found = version_json(tmp_path)
    assert set(found) == FIELDS
    assert (found["name"], found["version"]) == ("dlm-git", __version__)
    assert (found["digest"], found["files"]) == package_digest(PACKAGE)
    checkout = PACKAGE.parent
    if (checkout / ".git").exists():  # an editable install of a clone: its HEAD
        assert found["commit"] == git(checkout, "rev-parse", "HEAD").strip()
        assert isinstance(found["dirty"], bool)
    assert cli("--json", "--version", cwd=tmp_path).stdout == json.dumps(found, indent=2) + "\n"


def test_one_changed_byte_of_the_package_is_another_verifier(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy / "dlm_git", ignore=shutil.ignore_patterns("__pycache__"))
    first = version_json(tmp_path, PYTHONPATH=str(copy))
    assert (first["digest"], first["files"]) == package_digest(copy / "dlm_git")
    assert (first["commit"], first["dirty"]) == (None, None)  # no checkout: no commit claimed
    data = (copy / "dlm_git" / "merkle.py").read_bytes()
    (copy / "dlm_git" / "merkle.py").write_bytes(data.replace(b"RFC 6962", b"RFC 6963", 1))
    second = version_json(tmp_path, PYTHONPATH=str(copy))
    assert second["digest"] != first["digest"]
    assert (second["digest"], second["files"]) == package_digest(copy / "dlm_git")


def test_a_wheel_built_from_a_checkout_installs_the_checkouts_digest(tmp_path: Path) -> None:
    """An auditor can compare the digest of an installed release with a checkout's: the
    wheel holds every file of `dlm_git/` and nothing else (an installed copy has no
    commit to claim)."""
    source = copy_checkout(tmp_path / "source")
    out = tmp_path / "dist"
    out.mkdir()
    build(source, out, umask=0o022, epoch=1_700_000_000)
    (wheel,) = out.glob("*.whl")
    target = tmp_path / "site"
    run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
        tmp_path,
    )
    installed = version_json(tmp_path, PYTHONPATH=str(target))
    assert (installed["digest"], installed["files"]) == package_digest(source / "dlm_git")
    assert (installed["commit"], installed["dirty"]) == (None, None)


def test_json_before_a_command_is_misuse(tmp_path: Path) -> None:
    for args in (["--json"], ["--json", "log"]):
        one_line_error(cli(*args, cwd=tmp_path), 2, "--json", "--version")


def test_every_verify_json_names_the_verifier_and_no_record_does(forge: Any) -> None:
    report = forge.root / "report.json"
    result = forge.verify("HEAD", "--report", str(report))
    assert result.code == 0, result.explain()
    assert result.payload["verifier"] == identity().to_json()
    # the --report file is what the pipeline commits as verify.json: the same payload,
    # without the verifier, so that a change of dlm-git's code makes no record drift
    without = {k: v for k, v in result.payload.items() if k != "verifier"}
    assert report.read_bytes() == canonical_json(without)
    for record in (f"{DOC}/verify.json", f"{DOC}/dlm.lock", f"{DOC}/manifest.json"):
        text = forge.read(record).decode("utf-8")
        assert identity().digest not in text and '"verifier"' not in text, record
    worktree = forge.verify("--worktree", "--doc", DOC)
    assert worktree.payload["verifier"] == identity().to_json()


def log_lines(forge: Any) -> tuple[dict[str, Any], list[str]]:
    logged = forge._call_main(["log", "--json"])
    assert logged.code == 0, logged.stderr
    (entry,) = logged.payload["documents"][0]["entries"]
    human = forge._call_main(["log"])
    assert human.code == 0, human.stderr
    return entry["local_verdict"], human.stdout.splitlines()


def test_log_shows_the_verifier_of_a_remembered_verdict(forge: Any) -> None:
    assert forge.verify("HEAD").code == 0
    local, lines = log_lines(forge)
    assert local["verdict"] == "VERIFIED" and local["verifier"] == identity().to_json()
    shown = [line.strip() for line in lines if line.strip().startswith("verifier")]
    assert shown == [f"verifier  {identity().describe()}"]


def remembered(forge: Any) -> Path:
    """This machine's verdicts file for HEAD, where git puts the repository's local state."""
    root: Path = forge.root
    head = git(root, "rev-parse", "HEAD").strip()
    return root / git(root, "rev-parse", "--git-path", f"dlm-git/verdicts/{head}.json").strip()


def rewrite_verifiers(forge: Any, verifier: object) -> None:
    """Every remembered entry's verifier replaced by `verifier` (None: removed, as a
    dlm-git before the verifier's identity wrote it)."""
    store = json.loads(remembered(forge).read_bytes())
    for entry in store["documents"].values():
        entry.pop("verifier")
        if verifier is not None:
            entry["verifier"] = verifier
    remembered(forge).write_bytes(canonical_json(store))


@pytest.mark.parametrize(
    "verifier",
    [None, {"name": "dlm-git", "version": "0.1.0", "digest": "not a digest"}, "\x1b[31m"],
    ids=["remembered without one", "of another shape", "not an object"],
)
def test_a_verdict_remembered_without_a_known_verifier_shows_unknown(
    forge: Any, verifier: object
) -> None:
    assert forge.verify("HEAD").code == 0
    rewrite_verifiers(forge, verifier)
    local, lines = log_lines(forge)
    assert local["verdict"] == "VERIFIED" and local["verifier"] is None
    shown = [line.strip() for line in lines if line.strip().startswith("verifier")]
    assert shown == ["verifier  unknown (not recorded, or not of the expected shape)"]
    assert from_json(verifier) is None


def test_a_remembered_verifiers_text_reaches_the_terminal_escaped(forge: Any) -> None:
    assert forge.verify("HEAD").code == 0
    forged = {**identity().to_json(), "version": "0.1.0\x1b[2J\u202e"}
    rewrite_verifiers(forge, forged)
    local, lines = log_lines(forge)
    assert local["verifier"] == forged  # JSON keeps the text exactly
    (shown,) = [line.strip() for line in lines if line.strip().startswith("verifier")]
    assert shown.startswith("verifier  dlm-git 0.1.0\\x1b[2J\\u202e, digest ")
