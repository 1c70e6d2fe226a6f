"""`eval.replay`: after a replay reproduced a commit's adapter bit for bit, the evaluation
is run again and its record compared with the commit's `eval.json`, byte for byte.

Invariants:
- Runs only after a bitwise replay of a commit whose `eval.json` passed `eval.binding`
  (no record: no check; a record the hash level refused is already FAILED there). The
  replayed document directory gets the commit's own `manifest.json` and `dlm.lock`
  bytes (its adapter is the recorded one), the replay tree every file the record names
  (task files, includes, data: in the document's directory or anywhere else in the
  repository), taken from the commit's blobs by the rule `eval.binding` judged them by
  (`evalbinding.task_files`), and `eval.run.run_eval` evaluates it under the lock's
  numerics profile, threads and device, pinned as it pins itself.
- Equal bytes pass. Otherwise the first differing field is named (a JSON path: which
  score, which probe's answer): FAILED where this dlm-git expects bits
  (`numerics.judge.expect_bits`, from the replay's own facts), else ABSENT (the verdict
  CANNOT_VERIFY) saying why: never MISMATCH, never an accusation without evidence.
- An evaluation that cannot run here (its base, the `eval` extra, a task file) is
  ABSENT with its one line: nothing was compared.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlm_git import gitio
from dlm_git.contract.outcome import (
    Check,
    CheckAbsent,
    CheckFailed,
    Outcome,
    absent,
    failed,
    passed,
    short,
)
from dlm_git.docat import prefix_of
from dlm_git.errors import DlmGitError
from dlm_git.layout import EVAL_NAME, LOCK_NAME, MANIFEST_NAME
from dlm_git.safeparse import load_json
from dlm_git.verify.evalbinding import CHECK as BINDING
from dlm_git.verify.evalbinding import parse_record, task_files
from dlm_git.verify.report import DocReport, Verdict

CHECK = "eval.replay"


def replay_eval(
    root: Path, sha: str, report: DocReport, tree: Path, expect: Callable[[], Any]
) -> Check | None:
    """`eval.replay` of commit `sha`'s document (`report`, its hash level), replayed bit
    for bit into the replay tree `tree` (the document at `tree/<doc>`); None when its
    eval record did not pass `eval.binding` (none, or judged there)."""
    bound = next((c for c in report.checks if c.name == BINDING), None)
    if bound is None or not bound.ok:
        return None
    names = {f"{sha}:{prefix_of(report.doc)}{n}": n for n in (EVAL_NAME, MANIFEST_NAME, LOCK_NAME)}
    blobs = gitio.cat_files(list(names), root)
    recorded = {n: blobs.get(spec) for spec, n in names.items()}
    unplaced = place_task_files(root, sha, recorded[EVAL_NAME], tree)
    if unplaced is not None:
        return absent(CHECK, unplaced)
    return eval_replay(tree / report.doc, recorded, expect)


def place_task_files(root: Path, sha: str, record: bytes | None, tree: Path) -> str | None:
    """Write every file commit `sha`'s eval record names (task files, includes, data)
    into the replay tree `tree`, wherever in the repository it lies: the commit's blobs
    as `eval.binding` bound them (`evalbinding.task_files`: repository paths, no link nor
    below one, the recorded sha256). A file the tree already holds stays (the commit's
    own, or what the replay wrote): other bytes there are a reason. None, or why not."""
    from dlm_git.docat import TreeAt

    try:
        tasks = parse_record(record or b"")["tasks"]
        with TreeAt(root, sha) as at:
            files = task_files(at, tasks)
    except (CheckFailed, CheckAbsent) as exc:
        return f"the task files cannot be taken from the commit: {exc}"
    for path, data in files.items():
        target = tree / path  # `paths.problem` accepted it; the tree holds no link
        try:
            if target.exists():
                if target.read_bytes() != data:
                    return f"task file '{short(path)}' is also a file the replay wrote"
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            return f"task file '{short(path)}' cannot be written for the replay ({exc.strerror})"
    return None


def with_eval(verdict: Verdict, check: Check | None) -> Verdict:
    """A bitwise replay's verdict with `eval.replay`'s state: FAILED when it failed,
    CANNOT_VERIFY instead of BITWISE when nothing could be compared."""
    if check is None or check.ok:
        return verdict
    if check.state is Outcome.FAILED:
        return Verdict.FAILED
    return Verdict.CANNOT_VERIFY if verdict == Verdict.BITWISE else verdict


def eval_replay(
    doc_dir: Path, recorded: dict[str, bytes | None], expect: Callable[[], Any]
) -> Check:
    """`eval.replay` of the replayed document at `doc_dir`: `recorded` holds the commit's
    eval.json, manifest.json and dlm.lock bytes (by name); `expect()` says whether bits
    are expected (`numerics.judge.Expectation`)."""
    from dlm_git.eval.run import run_eval

    for name in (MANIFEST_NAME, LOCK_NAME):
        data = recorded[name]
        if data is None:
            return absent(CHECK, f"the commit has no {name} to evaluate against")
        (doc_dir / name).write_bytes(data)
    record = recorded[EVAL_NAME] or b""
    try:
        again = run_eval(doc_dir, replay=True).record.encode("utf-8")
    except DlmGitError as exc:
        return absent(CHECK, f"the evaluation cannot run here: {exc.one_line()}")
    if again == record:
        return passed(CHECK, f"re-run evaluation = {EVAL_NAME}, byte for byte")
    recorded_json, again_json = _parsed(record), load_json(again)
    where = first_difference(recorded_json, again_json)
    detail = f"re-run evaluation differs from {EVAL_NAME} at {where}"
    if _only_tasks_differ(recorded_json, again_json):
        return absent(CHECK, f"{detail}: {UNPINNED}")
    expectation = expect()
    if expectation.bits:
        return failed(CHECK, f"{detail} (bit equality expected: {expectation.reason})")
    return absent(CHECK, f"{detail}; bit equality not expected ({expectation.reason})")


UNPINNED = (
    "task scores also depend on the versions of datasets, pyarrow and jinja2 (loading"
    " and rendering the rows), which the record does not pin: bit equality not expected"
)


def _only_tasks_differ(recorded: Any, again: Any) -> bool:
    """Whether the two records differ in their lm-eval task results alone."""
    if not isinstance(recorded, dict) or not isinstance(again, dict):
        return False
    rest = {k: v for k, v in recorded.items() if k != "tasks"}
    return rest == {k: v for k, v in again.items() if k != "tasks"}


def _parsed(data: bytes) -> Any:
    try:
        return load_json(data.decode("utf-8"), finite=True)
    except (UnicodeDecodeError, ValueError):
        return None


def first_difference(recorded: Any, again: Any, path: str = "") -> str:
    """The JSON path of the first field (in sorted key order) where the two differ."""
    if isinstance(recorded, dict) and isinstance(again, dict):
        for key in sorted(set(recorded) | set(again), key=str):
            if recorded.get(key, _MISSING) != again.get(key, _MISSING):
                return first_difference(recorded.get(key), again.get(key), f"{path}.{key}")
    elif isinstance(recorded, list) and isinstance(again, list) and len(recorded) == len(again):
        for i, (a, b) in enumerate(zip(recorded, again, strict=True)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
    return f"'{short(path.lstrip('.'))}'" if path else "the record's bytes"


_MISSING = object()
