"""`verify --fetch` / `diff --fetch`: which DVC remote a fetch uses is said, and the
auditor can name their own (issue 23, "Also decide and document").

The checked-out `.dvc/config` comes with a commit, so DVC's default remote is the
commit's choice: every fetch note names the remote, its URL and the config file that
chose it. `--remote NAME` takes NAME and its settings from the auditor's own DVC config
only (`.dvc/config.local` when git does not track it, the global and the system config),
even where the checked-out `.dvc/config` defines a remote of the same name; a NAME the
auditor has not defined is a usage error (exit 2) before anything is fetched.

Remotes are local directories (a real DVC remote type); each test clones a trainer
repository whose adapters were pushed to `store/`, with the DVC global and system config
directories of every process pointed at the test's own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import one_line_error
from tests.support.env import subprocess_env
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all
from tests.support.tensorfiles import edit_weight
from tests.support.verified import DOC, WEIGHTS, copy_repo

pytestmark = pytest.mark.slow


@dataclass
class Remotes:
    trainer: Path
    store: Path
    """The adapters of both commits, pushed by the trainer."""
    decoy: Path
    """An empty directory: a remote holding nothing."""


def env_for(tmp: Path) -> dict[str, str]:
    env = subprocess_env()
    env["DVC_GLOBAL_CONFIG_DIR"] = str(tmp / "dvc-global")
    env["DVC_SYSTEM_CONFIG_DIR"] = str(tmp / "dvc-system")
    return env


@pytest.fixture(scope="module")
def remotes(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Remotes:
    """The verified repository with a committed default remote `storage` (a directory),
    then a second commit whose adapter differs; both adapters pushed."""
    base = tmp_path_factory.mktemp("fetch-remote")
    env = env_for(base)
    trainer = copy_repo(verified_repo, base / "trainer")
    store, decoy = base / "store", base / "decoy"
    decoy.mkdir()

    def dvc(*args: str) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "dvc", *args], cwd=trainer, env=env, capture_output=True
        )
        assert proc.returncode == 0, proc.stderr

    dvc("remote", "add", "-d", "storage", str(store))
    commit_all(trainer, "adapters on a directory remote")
    dvc("push")
    forge = Forge(trainer, lambda argv: None)
    files = forge.adapter_files()
    files[WEIGHTS] = edit_weight(files[WEIGHTS])
    forge.store_adapter(files, rebind="all")
    commit_all(trainer, "another adapter")
    dvc("push")
    return Remotes(trainer, store, decoy)


@dataclass
class Auditor:
    root: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), cwd=self.root, env=self.env, capture_output=True, text=True, timeout=600
        )

    def dlm_git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(Path(sys.executable).parent / "dlm-git"), *args)

    def dvc(self, *args: str) -> None:
        proc = self.run(sys.executable, "-m", "dvc", *args)
        assert proc.returncode == 0, proc.stderr

    def verify(self, *args: str) -> tuple[int, dict[str, Any]]:
        proc = self.dlm_git("verify", "HEAD", "--json", *args)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.returncode, json.loads(proc.stdout)["documents"][0]

    def cached(self) -> list[Path]:
        return [p for p in (self.root / ".dvc" / "cache").rglob("*") if p.is_file()]


@pytest.fixture
def auditor(remotes: Remotes, tmp_path: Path) -> Auditor:
    """A fresh clone of the trainer: no DVC cache, the trainer's `.dvc/config`."""
    root = tmp_path / "auditor"
    proc = subprocess.run(["git", "clone", "-q", str(remotes.trainer), str(root)])
    assert proc.returncode == 0
    return Auditor(root, env_for(tmp_path))


def notes(report: dict[str, Any]) -> str:
    return "\n".join(report.get("notes", []))


def test_a_fetch_names_the_remote_and_the_config_that_chose_it(
    auditor: Auditor, remotes: Remotes
) -> None:
    code, report = auditor.verify("--fetch")
    assert code == 0 and report["verdict"] == "VERIFIED", report
    said = f"fetched from the DVC remote 'storage' ({remotes.store}; the default remote set by"
    assert f"{said} the checked-out .dvc/config)" in notes(report), report
    shutil.rmtree(auditor.root / ".dvc" / "cache")
    table = auditor.dlm_git("verify", "HEAD", "--fetch")
    assert table.returncode == 0 and said in table.stdout, table.stdout + table.stderr


def test_the_checked_out_config_chooses_the_default_and_remote_names_the_auditors(
    auditor: Auditor, remotes: Remotes
) -> None:
    """A commit moves the default remote to one that lacks the adapter and defines `mine`
    there too; the auditor's global config defines `mine` as the real store."""
    (auditor.root / ".dvc" / "config").write_text(
        "[core]\n    remote = decoy\n"
        f"['remote \"storage\"']\n    url = {remotes.store}\n"
        f"['remote \"decoy\"']\n    url = {remotes.decoy}\n"
        f"['remote \"mine\"']\n    url = {remotes.decoy}\n",
        "utf-8",
    )
    auditor.run("git", "commit", "-qam", "the default remote is the decoy now")
    code, report = auditor.verify("--fetch")
    assert code == 1 and report["verdict"] == "CANNOT_VERIFY", report
    assert f"is not on the DVC remote 'decoy' ({remotes.decoy};" in notes(report), report
    auditor.dvc("remote", "add", "--global", "mine", str(remotes.store))
    code, report = auditor.verify("--fetch", "--remote", "mine")
    assert code == 0 and report["verdict"] == "VERIFIED", report
    said = f"'mine' ({remotes.store}; --remote, defined in your global DVC config)"
    assert said in notes(report), report


def test_a_remote_from_config_local_never_from_a_tracked_one(
    auditor: Auditor, remotes: Remotes
) -> None:
    auditor.dvc("remote", "add", "--local", "mine", str(remotes.store))
    code, report = auditor.verify("--fetch", "--remote", "mine")
    assert code == 0 and report["verdict"] == "VERIFIED", report
    assert f"'mine' ({remotes.store}; --remote, defined in .dvc/config.local)" in notes(report)
    # a .dvc/config.local that a commit carries (force-added past DVC's .gitignore)
    local = auditor.root / ".dvc" / "config.local"
    local.write_text(f"['remote \"sneaky\"']\n    url = {remotes.store}\n", "utf-8")
    auditor.run("git", "add", "-f", str(local))
    auditor.run("git", "commit", "-qm", "a config.local in the commit")
    proc = auditor.dlm_git("verify", "HEAD", "--fetch", "--remote", "sneaky")
    one_line_error(proc, 2, "'sneaky'")


MISUSE: dict[str, tuple[list[str], str]] = {
    "unknown": (["verify", "HEAD", "--fetch", "--remote", "nosuch"], "'nosuch'"),
    "only-committed": (["verify", "HEAD", "--fetch", "--remote", "storage"], "'storage'"),
    "without-fetch": (["verify", "HEAD", "--remote", "storage"], "--remote goes with --fetch"),
    "worktree": (["verify", "--worktree", "--doc", DOC, "--remote", "storage"], "--fetch"),
    "diff-unknown": (["diff", "HEAD~1", "HEAD", "--fetch", "--remote", "nosuch"], "'nosuch'"),
    "diff-without-fetch": (["diff", "HEAD~1", "HEAD", "--remote", "x"], "--remote goes with"),
}


@pytest.mark.parametrize("case", list(MISUSE))
def test_a_remote_the_auditor_has_not_defined_is_refused_before_fetching(
    auditor: Auditor, case: str
) -> None:
    args, words = MISUSE[case]
    one_line_error(auditor.dlm_git(*args), 2, words)
    assert auditor.cached() == [], "nothing fetched"


def adapter_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    (doc,) = json.loads(proc.stdout)["documents"]
    return dict(doc["adapter"])


def test_diff_fetches_from_the_remote_the_auditor_names(auditor: Auditor, remotes: Remotes) -> None:
    auditor.dvc("remote", "add", "-d", "decoy", str(remotes.decoy))  # the work tree's default
    adapter = adapter_json(auditor.dlm_git("diff", "HEAD~1", "HEAD", "--fetch", "--json"))
    assert adapter["tensors"] == [] and adapter["unavailable"], adapter
    assert all("'decoy'" in why for why in adapter["unavailable"]), adapter
    auditor.dvc("remote", "add", "--global", "mine", str(remotes.store))
    named = ("--fetch", "--remote", "mine", "--json")
    adapter = adapter_json(auditor.dlm_git("diff", "HEAD~1", "HEAD", *named))
    assert adapter["unavailable"] == [] and adapter["tensors"], adapter
