"""A command's start pays only for what the command needs (issue 28).

For every command of the CLI's own table (`dlm_git.cli.COMMANDS`, so a new command is
covered when it is added there), a fresh interpreter runs `dlm-git <command> --help`
through `dlm_git.cli.main`, which imports the command's module and builds its parser
as every run of it does. Then:
- no heavy library has come along (the training stack, the evaluation stack, DVC):
  commands import them inside their bodies, where they are needed;
- no other command's module has been imported: `main` builds only the command asked for.
A command's body, run on real records, is held to the same list where its tests build
them (`log`: tests/integration/test_log.py, test_history_scores.py), through the same
helper (`tests.support.cli.imports_of`, `HEAVY`).

No command's parse path imports typer or pydantic (the parser is plain click,
`dlm_git.clidecl`): not its `--help`, and not `log --json`, `diff` or `verify` (hash level)
run on a committed repository. Nor does reading a document: its frontmatter, its lock and
its manifest are `dlm_git.validated` records, so `show`, `diff` and `verify` on commits
holding a document load no pydantic either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.cli import COMMANDS
from dlm_git.hashing import canonical_json
from tests.support.cli import imports_of
from tests.support.docs import DLM_ID, write_doc
from tests.support.gitrepo import commit_all, init_repo
from tests.support.models_corpus import BASE_MANIFEST
from tests.support.records import lock_record

FRAMEWORKS = ("typer", "pydantic")
"""What reading the command line once cost, before the CLI moved to plain click."""


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_nothing_heavy_and_no_other_command(name: str, tmp_path: Path) -> None:
    run = imports_of(tmp_path, name, "--help")
    assert run.code == 0, run.stdout
    assert run.heavy == [], f"dlm-git {name} imports {run.heavy} before it runs"
    own = COMMANDS[name][0]
    others = sorted(({module for module, _ in COMMANDS.values()} - {own}) & run.modules)
    assert others == [], f"dlm-git {name} imports other commands' modules: {others}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_reads_its_command_line_with_typer_or_pydantic(
    name: str, tmp_path: Path
) -> None:
    run = imports_of(tmp_path, name, "--help")
    assert run.code == 0, run.stdout
    assert sorted(set(FRAMEWORKS) & run.modules) == [], f"dlm-git {name} --help"


@pytest.mark.parametrize(
    "args", [["log", "--json"], ["diff", "HEAD", "HEAD"], ["verify", "HEAD", "--level", "hash"]]
)
def test_the_commands_people_wait_for_start_without_typer_or_pydantic(
    args: list[str], tmp_path: Path
) -> None:
    repo = init_repo(tmp_path / "repo")
    commit_all(repo, "a commit without documents")
    run = imports_of(repo, *args)
    assert run.code in (0, 1), run.stdout  # verify: no documents to verify is a failure
    assert sorted(set(FRAMEWORKS) & run.modules) == [], f"dlm-git {' '.join(args)}"


@pytest.mark.parametrize(
    "args",
    [["show", "d00"], ["diff", "HEAD~1", "HEAD"], ["verify", "HEAD", "--level", "hash"]],
)
def test_reading_a_document_loads_no_pydantic(args: list[str], tmp_path: Path) -> None:
    run = imports_of(_document_in_two_commits(tmp_path), *args)
    assert run.code in (0, 1), run.stdout  # verify: records that bind nothing fail
    assert "dlm_git.doc.parser" in run.modules, f"dlm-git {' '.join(args)} read no document"
    assert sorted(set(FRAMEWORKS) & run.modules) == [], f"dlm-git {' '.join(args)}"


def test_verifying_one_document_starts_no_thread_pool(tmp_path: Path) -> None:
    """Documents' temp directories are removed by a thread while the next document is
    checked; the last one's is removed in place, so one document needs no pool."""
    run = imports_of(_document_in_two_commits(tmp_path), "verify", "HEAD", "--level", "hash")
    assert run.code == 1, run.stdout
    assert "dlm_git.verify.hashlevel" in run.modules, "verify checked no document"
    assert "concurrent.futures" not in run.modules


def _document_in_two_commits(tmp_path: Path) -> Path:
    """A document with a lock and a manifest that parse (so verify reads the document
    too, though neither binds it: verify fails), in two commits."""
    repo = init_repo(tmp_path / "repo")
    write_doc(repo / "d00", "::instruction::\n### Q\nWhat?\n### A\nThis.\n")
    (repo / "d00" / "dlm.lock").write_bytes(canonical_json(lock_record(dlm_id=DLM_ID)))
    manifest = {**BASE_MANIFEST, "dlm_id": DLM_ID}
    (repo / "d00" / "manifest.json").write_bytes(canonical_json(manifest))
    commit_all(repo, "a document")
    write_doc(repo / "d00", "Some prose.\n", frontmatter="training:\n  lora_r: 4\n")
    commit_all(repo, "the document edited")
    return repo
