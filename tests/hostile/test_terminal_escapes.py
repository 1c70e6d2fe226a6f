"""Text a commit chose never drives the terminal: file names, a section's first line, a
frontmatter value, a forged record value, a params.yaml training key (check
`params.training`), a `dlm_id` two documents share (check `docset.dlm_id`) and a
commit's author reach the stdout and stderr of `show`, `diff`, `verify` (every level's
text), `log`, error lines and the pre-commit and pre-push hooks as visible escapes
(`\\x1b`, `\\u202e`, `\\r`; one line per finding), never as the characters themselves,
and `--json` output still gives back every string exactly. Commands run as real
subprocesses on real git repositories (`hostile_names_repo`: sources named with
`ESCAPE_NAMES`, trained and committed)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import Run, dlm_git, hook
from tests.support.gitrepo import commit_all, git
from tests.support.hostile import ESCAPE_NAMES, ESCAPES, assert_inert, escaped
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

ZERO = "0" * 40
EVERY = "".join(ESCAPES.values())
"""Every terminal-active character of `ESCAPES` in one string."""
IN_LINE = "".join(v for k, v in ESCAPES.items() if k not in ("cr", "line_sep"))
"""Those a line of a document can hold (CR and U+2028 end a line there)."""
MARKUP = "[bold red]loud[/]"
"""Rich markup: printed as these characters, never as a style."""


def inert(result: Run, *codes: int) -> Run:
    """`result` exited with one of `codes` (no traceback) and sent nothing a terminal
    acts on, on either stream."""
    why = f"exit {result.code}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.code in codes and "Traceback" not in result.stderr, why
    assert_inert(result.stdout, where="stdout")
    assert_inert(result.stderr, where="stderr")
    return result


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.split("\n") if needle in line]


def copy(repo: Path, tmp_path: Path) -> Path:
    return copy_repo(repo, tmp_path / "repo")  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- file names


def test_show_prints_escape_names_escaped(hostile_names_repo: Path, tmp_path: Path) -> None:
    root = copy(hostile_names_repo, tmp_path)
    shown = inert(dlm_git(root, "show", DOC), 0).stdout
    for name in ESCAPE_NAMES:
        (line,) = lines_with(shown, f"notes/{escaped(name)}")
        assert line.startswith("  ") and "source" in line, line
    report = json.loads(inert(dlm_git(root, "show", DOC, "--json"), 0).stdout)
    files = {f["relpath"] for f in report["sources"]["files"]}
    assert {f"notes/{name}" for name in ESCAPE_NAMES} <= files, sorted(files)


def test_diff_prints_added_escape_names_escaped(hostile_names_repo: Path, tmp_path: Path) -> None:
    root = copy(hostile_names_repo, tmp_path)
    text = inert(dlm_git(root, "diff", "HEAD~1", "HEAD"), 0).stdout
    for name in ESCAPE_NAMES:
        assert lines_with(text, f"  source   + notes/{escaped(name)}"), text
    payload = json.loads(inert(dlm_git(root, "diff", "HEAD~1", "HEAD", "--json"), 0).stdout)
    assert {f"notes/{n}" for n in ESCAPE_NAMES} <= set(_find_strings(payload)), payload


def _find_strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        obj = [*obj.keys(), *obj.values()]
    if isinstance(obj, list):
        return [s for item in obj for s in _find_strings(item)]
    return []


def _stale_source_commit(root: Path) -> tuple[str, str]:
    """Edit the escape-named sources after training and commit them (no hook): verify
    fails at the sources check, whose detail names the changed files."""
    for name in ESCAPE_NAMES[:4]:
        (root / DOC / "notes" / name).write_text("edited after training\n", "utf-8")
    commit_all(root, "stale sources")
    return git(root, "rev-parse", "HEAD").strip(), ESCAPE_NAMES[0]


@pytest.mark.parametrize("level", ["hash", "replay", "segments"])
def test_verify_prints_a_failed_detail_escaped(
    hostile_names_repo: Path, tmp_path: Path, level: str
) -> None:
    root = copy(hostile_names_repo, tmp_path)
    _, name = _stale_source_commit(root)
    result = inert(dlm_git(root, "verify", "HEAD", "--level", level, timeout=600), 1)
    (line,) = lines_with(result.stdout, "sources.root")
    assert "FAIL" in line and escaped(f"notes/{name}") in line, result.stdout
    verdict = lines_with(result.stdout, "verdict")[-1].split()[-1]
    assert verdict in ("FAILED", "MISMATCH"), result.stdout
    if level == "hash":
        payload = json.loads(inert(dlm_git(root, "verify", "HEAD", "--json"), 1).stdout)
        (doc,) = payload["documents"]
        (check,) = [c for c in doc["checks"] if c["name"] == "sources.root"]
        assert f"notes/{name}" in check["detail"], check


def test_pre_push_prints_a_failed_detail_escaped(hostile_names_repo: Path, tmp_path: Path) -> None:
    root = copy(hostile_names_repo, tmp_path)
    sha, name = _stale_source_commit(root)
    pushed = inert(hook(root, "pre_push", f"refs/heads/main {sha} refs/heads/main {ZERO}\n"), 1)
    (line,) = lines_with(pushed.stderr, f"{DOC}@{sha[:12]}")
    assert "ERROR" in line and escaped(f"notes/{name}") in line, pushed.stderr
    assert pushed.stderr.endswith("push refused\n"), pushed.stderr


def test_pre_commit_prints_escape_names_escaped(forge: Any) -> None:
    """A staged params.yaml that lists directories named with escapes, and a staged
    `.dlm` in another: every finding is one line, with the names escaped."""
    listed = f"listed{EVERY}"
    params = yaml.safe_load(forge.read("params.yaml"))
    params["documents"] = [*params["documents"], listed]
    forge.write("params.yaml", yaml.safe_dump(params).encode())
    stray = f"stray{ESCAPES['osc']}{ESCAPES['bidi']}"
    forge.write(f"{stray}/doc.dlm", forge.read(f"{DOC}/{DOC}.dlm"))
    forge.git("add", "-A")
    result = inert(hook(forge.root, "pre_commit"), 1)
    assert lines_with(result.stderr, escaped(listed)), result.stderr
    assert lines_with(result.stderr, escaped(stray)), result.stderr
    assert result.stderr.endswith("commit refused\n"), result.stderr
    for line in result.stderr.strip("\n").split("\n"):
        assert line.startswith("dlm-git: "), result.stderr


# --------------------------------------------------------------------------- a document's text


def _hostile_document(forge: Any, first_line: str) -> str:
    """Commit a `.dlm` with one more Q/A section whose first line is `first_line`, bound
    into lock and manifest (a thorough forger's edit: no retraining)."""
    rel = f"{DOC}/{DOC}.dlm"
    text = forge.read(rel).decode("utf-8")
    text = text.rstrip("\n") + f"\n\n### Q\n{first_line}\n\n### A\nAn answer.\n"
    forge.rebind_document(text)
    forge.commit("a hostile section")
    return text


FIRST_LINES = {
    "controls": f"Why{IN_LINE} me?",
    "bidi": f"Is invoice{ESCAPES['bidi']}fdp.exe{ESCAPES['zero_width']} safe to open?",
}


@pytest.mark.parametrize("kind", sorted(FIRST_LINES))
def test_a_section_first_line_is_printed_escaped(forge: Any, kind: str) -> None:
    first = FIRST_LINES[kind]
    _hostile_document(forge, first)
    shown = inert(dlm_git(forge.root, "show", DOC), 0).stdout
    assert lines_with(shown, escaped(first)[:60]), shown
    diffed = inert(dlm_git(forge.root, "diff", "HEAD~1", "HEAD"), 0).stdout
    (line,) = lines_with(diffed, "  section  + ")
    assert line.endswith(escaped(first)), diffed
    for args in (["show", DOC], ["diff", "HEAD~1", "HEAD"]):
        payload = json.loads(inert(dlm_git(forge.root, *args, "--json"), 0).stdout)
        assert first in _find_strings(payload), payload


BASES = {
    "escapes": f"./bases/tiny{ESCAPES['osc']}{ESCAPES['c1']}{ESCAPES['bidi']}",
    "markup": f"./bases/tiny{MARKUP}",
}


@pytest.mark.parametrize("kind", sorted(BASES))
def test_a_frontmatter_value_is_printed_escaped(forge: Any, kind: str) -> None:
    """`base_model` holds escapes or rich markup: `show` prints the spec, `diff` the
    change, each as the characters it holds."""
    rel = f"{DOC}/{DOC}.dlm"
    text = forge.read(rel).decode("utf-8")
    value = BASES[kind]
    quoted = json.dumps(value)  # a YAML double-quoted scalar holds the escapes
    text, n = re.subn(r"(?m)^base_model: .*$", lambda _: f"base_model: {quoted}", text)
    assert n == 1, text
    forge.rebind_document(text)
    forge.commit("a hostile base")
    shown = inert(dlm_git(forge.root, "show", DOC), 0).stdout
    (line,) = lines_with(shown, "  base model ")
    assert f"base model   {escaped(value)} (local; NOT available" in line, shown
    diffed = inert(dlm_git(forge.root, "diff", "HEAD~1", "HEAD"), 0).stdout
    (line,) = lines_with(diffed, "  base ")
    assert line.endswith(f"builtin:tiny -> {escaped(value)}"), diffed
    payload = json.loads(inert(dlm_git(forge.root, "diff", "HEAD~1", "HEAD", "--json"), 0).stdout)
    assert value in _find_strings(payload), payload


REFUSED = {
    "source path": ("training:\n  sources:\n    - path: {}", f"notes{EVERY}"),
    "unknown key": ("{}: 1", f"key{IN_LINE}"),
    "base_model": ("base_model: {}", f"hf:org{EVERY}"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_an_error_line_prints_a_value_escaped(git_repo: Path, write_doc: Any, what: str) -> None:
    """A frontmatter value that is refused is named in the one error line, escaped."""
    template, value = REFUSED[what]
    (git_repo / "d" / "notes").mkdir(parents=True)
    doc = write_doc(git_repo / "d", "Prose.\n", frontmatter=template.format(json.dumps(value)))
    result = inert(dlm_git(git_repo, "show", str(doc)), 1)
    line = result.one_line_error(1, "doc.dlm")  # base_model too: `path:line:col` (issue 25)
    assert escaped(value) in line, line


# --------------------------------------------------------------------------- the newest checks

HOSTILE_SETTING = f"{ESCAPES['osc']}lr"
"""A params.yaml training key that sets the terminal's title (the value: a clear-screen)."""


def _hostile_override(forge: Any) -> None:
    """params.yaml's `docs.demo.training` given a key and a value that drive a terminal."""
    params = yaml.safe_load(forge.read("params.yaml"))
    params["docs"][DOC]["training"] = {HOSTILE_SETTING: f"{ESCAPES['clear']}{IN_LINE}"}
    forge.write("params.yaml", yaml.safe_dump(params).encode())


def test_a_params_training_key_is_printed_escaped(forge: Any) -> None:
    """Check `params.training` names a params.yaml key that holds escapes: the hook's
    ERROR line and verify's FAIL line show it escaped, `--json` gives it back exactly;
    `diff` prints the setting as written, escaped."""
    _hostile_override(forge)
    forge.git("add", "params.yaml")
    result = inert(hook(forge.root, "pre_commit"), 1)
    (line,) = lines_with(result.stderr, "params.training")
    assert line.startswith(f"dlm-git: ERROR {DOC}: ") and escaped(HOSTILE_SETTING) in line, line
    assert result.stderr.endswith("commit refused\n"), result.stderr

    sha = forge.commit("a hostile override")
    verified = inert(dlm_git(forge.root, "verify", "HEAD"), 1).stdout
    (line,) = lines_with(verified, "params.training")
    assert "FAIL" in line and escaped(HOSTILE_SETTING) in line, verified
    _pushed_escaped(forge, sha, escaped(HOSTILE_SETTING))
    payload = json.loads(inert(dlm_git(forge.root, "verify", "HEAD", "--json"), 1).stdout)
    (check,) = [c for c in payload["documents"][0]["checks"] if c["name"] == "params.training"]
    assert HOSTILE_SETTING in check["detail"], check

    diffed = inert(dlm_git(forge.root, "diff", "HEAD~1", "HEAD"), 0).stdout
    (line,) = lines_with(diffed, "  config   training.")
    assert line.startswith(f"  config   training.{escaped(HOSTILE_SETTING)}: None -> "), diffed
    payload = json.loads(inert(dlm_git(forge.root, "diff", "HEAD~1", "HEAD", "--json"), 0).stdout)
    assert f"training.{HOSTILE_SETTING}" in _find_strings(payload), payload


def _pushed_escaped(forge: Any, sha: str, shown: str) -> None:
    """The pre-push hook refuses commit `sha`, its ERROR line showing `shown`."""
    stdin = f"refs/heads/main {sha} refs/heads/main {ZERO}\n"
    pushed = inert(hook(forge.root, "pre_push", stdin), 1)
    (line,) = lines_with(pushed.stderr, f"{DOC}@{sha[:12]}")
    assert "ERROR" in line and shown in line, pushed.stderr
    assert pushed.stderr.endswith("push refused\n"), pushed.stderr


HOSTILE_ID = f"01{EVERY}"
OTHER = "other/other.dlm"


def _shared_hostile_id(forge: Any) -> None:
    """`demo` given a `dlm_id` that holds escapes (re-bound in its records), and a second
    document `other` that copies it."""
    text = forge.read(f"{DOC}/{DOC}.dlm").decode("utf-8")
    text, n = re.subn(r"(?m)^dlm_id: .*$", lambda _: f"dlm_id: {json.dumps(HOSTILE_ID)}", text)
    assert n == 1, text
    forge.rebind_document(text)
    forge.write(OTHER, text.encode())


def test_a_shared_dlm_id_is_printed_escaped(forge: Any) -> None:
    """Check `docset.dlm_id` names an id that holds escapes, shared by two documents: the
    hook's ERROR lines and verify's FAIL line show it escaped, `--json` exactly."""
    _shared_hostile_id(forge)
    forge.git("add", "-A")
    result = inert(hook(forge.root, "pre_commit"), 1)
    found = lines_with(result.stderr, "docset.dlm_id")
    assert sorted(line.split(":")[1].split()[-1] for line in found) == [DOC, "other"], found
    for line in found:
        assert f"dlm_id {escaped(HOSTILE_ID)} is also the dlm_id of " in line, result.stderr
    assert result.stderr.endswith("commit refused\n"), result.stderr

    sha = forge.commit("a shared hostile id")
    verified = inert(dlm_git(forge.root, "verify", "HEAD"), 1).stdout
    (line,) = lines_with(verified, "docset.dlm_id")
    assert "FAIL" in line and f"dlm_id {escaped(HOSTILE_ID)} is also" in line, verified
    _pushed_escaped(forge, sha, f"dlm_id {escaped(HOSTILE_ID)} is also")
    payload = json.loads(inert(dlm_git(forge.root, "verify", "HEAD", "--json"), 1).stdout)
    (doc,) = [d for d in payload["documents"] if d["doc"] == DOC]
    (check,) = [c for c in doc["checks"] if c["name"] == "docset.dlm_id"]
    assert check["detail"].startswith(f"dlm_id {HOSTILE_ID} is also the dlm_id of {OTHER}")


# --------------------------------------------------------------------------- history


def test_log_prints_an_author_and_an_accepted_lock_escaped(forge: Any) -> None:
    """A lock acceptance (a new `supersedes`) with a hostile value, by a hostile author."""
    lock = forge.lock()
    lock["supersedes"] = hashlib.sha256(forge.read(f"{DOC}/dlm.lock")).hexdigest()
    lock["hardware_tier"] = f"tier{EVERY}"
    forge.write_lock(lock)
    author = f"Mallory{ESCAPES['osc']}{ESCAPES['clear']}"
    subject = f"accept{ESCAPES['bidi']}{ESCAPES['cr']} it"
    forge.git("add", "-A")
    forge.git("-c", f"user.name={author}", "commit", "-q", "--no-verify", "-m", subject)
    text = inert(dlm_git(forge.root, "log"), 0).stdout
    assert lines_with(text, f"{escaped(author)}: {escaped(subject)}"), text
    (accepted,) = lines_with(text, "accepted")
    assert f"by {escaped(author)}" in accepted and escaped(f"tier{EVERY}") in accepted, text
    payload = json.loads(inert(dlm_git(forge.root, "log", "--json"), 0).stdout)
    entry = payload["documents"][0]["entries"][0]
    assert (entry["author"], entry["subject"]) == (author, subject), entry


def test_json_output_round_trips_every_escape(hostile_names_repo: Path, tmp_path: Path) -> None:
    """The JSON a command prints is inert too (escapes as `\\u001b`, `\\u202e`) and
    `json.loads` gives back each name exactly, for `verify --json` and `show --json`."""
    root = copy(hostile_names_repo, tmp_path)
    result = dlm_git(root, "show", DOC, "--json")
    payload = json.loads(inert(result, 0).stdout)
    relpaths = {f["relpath"] for f in payload["sources"]["files"]}
    assert {f"notes/{n}" for n in ESCAPE_NAMES} <= relpaths, relpaths
    for kind in ("osc", "bidi", "c1"):
        assert json.dumps(ESCAPES[kind])[1:-1] in result.stdout, kind


# --------------------------------------------------------------------------- eval record

HOSTILE_TASK = f"mc{IN_LINE}"
"""A task name in a forged `eval.json`: any key a record holds is text a commit chose."""


def test_an_eval_record_task_name_and_path_are_printed_escaped(forge: Any) -> None:
    """Check `eval.binding` names a task (and the file it names) of a forged `eval.json`:
    the hook's ERROR line and verify's FAIL line show them escaped, `--json` exactly."""
    from dlm_git.eval.record import metrics_of

    record = forge.read_json(f"{DOC}/eval.json")
    record["tasks"][HOSTILE_TASK] = {
        "task_file": f"{DOC}/{HOSTILE_TASK}.yaml",
        "task_sha256": "0" * 64,
        "include_sha256": {},
        "data_sha256": {},
        "harness": {"name": "lm-eval", "version": "0.4.13"},
        "settings": {},
        "samples": 1,
        "metrics": {},
    }
    forge.write_canonical(f"{DOC}/eval.json", record)
    forge.write_canonical(f"{DOC}/eval_metrics.json", metrics_of(record))
    forge.git("add", "-A")
    result = inert(hook(forge.root, "pre_commit"), 1)
    (line,) = lines_with(result.stderr, "eval.binding")
    assert line.startswith(f"dlm-git: ERROR {DOC}: ") and escaped(HOSTILE_TASK) in line, line

    forge.commit("a hostile task name")
    verified = inert(dlm_git(forge.root, "verify", "HEAD"), 1).stdout
    (line,) = lines_with(verified, "eval.binding")
    assert "FAIL" in line and f"{escaped(HOSTILE_TASK)}.yaml' is not a file" in line, verified
    payload = json.loads(inert(dlm_git(forge.root, "verify", "HEAD", "--json"), 1).stdout)
    (check,) = [c for c in payload["documents"][0]["checks"] if c["name"] == "eval.binding"]
    assert check["detail"].startswith(f"task '{HOSTILE_TASK}': '{DOC}/{HOSTILE_TASK}.yaml'")
