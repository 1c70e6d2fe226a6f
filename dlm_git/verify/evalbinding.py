"""`eval.binding`: a document's `eval.json` and `eval_metrics.json` judged against the
revision that holds them (a commit, the index, the work tree), from their bytes alone.

Invariants:
- A revision holding neither file is "not evaluated": no check runs (commits from before
  evaluation existed, documents never evaluated). One file without the other fails.
- Every byte is hostile: the record is read bounded (`MAX_EVAL_BYTES`), parsed through
  `safeparse` (finite numbers, unique keys) and checked field by field (`EVAL`, through
  `contract.shapes`) before any value is used. A record of an `eval_version` newer than
  this dlm-git's is ABSENT (nothing compared: upgrade to judge it), never a pass; any
  other malformed record fails.
- The record is bound to its revision: `adapter_sha256` = the weights' sha256 the
  manifest records, `manifest_sha256` = sha256 of the revision's `manifest.json` bytes,
  `numerics` = the lock's profile and threads, and every task file, include and data
  file it names has, at that revision, the sha256 it states (a path `paths.problem`
  refuses, a missing file, or a symbolic link or a path below one fails: the work tree
  and the index report links as a commit does, `DocAt.tree.linked`).
- What the record says of itself holds: every float equals its `*_hex` bits, every
  probe's `exact_match` is `eval.probes.exact_match` of its texts, and
  `eval_metrics.json` is `eval.record.metrics_of(record)`, compared as parsed values:
  the metrics file is never trusted.
- The scores themselves are judged only by running the model again; this check binds
  them to what was evaluated. It lives here, not in `contract/`, because the record's
  rules (`eval.record`, `eval.probes`) sit above the contract layer; the verify hash
  level and the pre-commit hook both run this one function. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dlm_git.contract.outcome import CheckAbsent, CheckFailed, Checks, short
from dlm_git.contract.shapes import BOOL, INT, NUM, STR, Shape, shape_problem
from dlm_git.docat import DocAt, TreeAt
from dlm_git.eval.probes import exact_match
from dlm_git.eval.record import EVAL_VERSION, MODES, metrics_of
from dlm_git.hashing import canonical_text, sha256_bytes
from dlm_git.layout import ADAPTER_WEIGHTS, EVAL_METRICS_NAME, EVAL_NAME, MANIFEST_NAME
from dlm_git.paths import problem
from dlm_git.safeparse import load_json

CHECK = "eval.binding"
MAX_EVAL_BYTES = 16 << 20
"""The most of `eval.json` (or its metrics file) this check parses."""
NOT_EVALUATED = "not evaluated (no eval.json)"

LOSS: Shape = {
    "loss": NUM,
    "loss_hex": STR,
    "perplexity": NUM,
    "perplexity_hex": STR,
    "tokens": INT,
    "rows": INT,
}
PROBE: Shape = {
    "section_id": STR,
    "marked": BOOL,
    "question": STR,
    "reference": STR,
    "generated": STR,
    "generated_ids": ("list", INT),
    "prompt_tokens": INT,
    "exact_match": BOOL,
}
TASK: Shape = {
    "task_file": STR,
    "task_sha256": STR,
    "include_sha256": ("map", STR),
    "data_sha256": ("map", STR),
    "harness": {"name": STR, "version": STR},
    "settings": ("map", ("any", None)),
    "samples": INT,
    "metrics": ("map", {"value": NUM, "hex": STR}),
}
EVAL: Shape = {
    "eval_version": ("literal", EVAL_VERSION),
    "adapter_sha256": STR,
    "manifest_sha256": STR,
    "numerics": {"profile": STR, "threads": INT, "device": STR},
    "settings": ("map", ("any", None)),
    "val": (
        "optional",
        {"val_fraction": NUM, **{m: ("optional", LOSS) for m in ("overall", *MODES)}},
    ),
    "probes": ("list", PROBE),
    "tasks": ("map", TASK),
}


def eval_checks(
    checks: Checks, doc: DocAt, manifest: dict[str, Any], lock: dict[str, Any] | None
) -> str | None:
    """`eval.binding` of `doc` (records parsed: `manifest`, and `lock` when it parsed);
    the note "not evaluated" when the revision holds no eval record (no check then)."""
    names = [doc.prefix + EVAL_NAME, doc.prefix + EVAL_METRICS_NAME]
    found = doc.tree.read(names)
    data, metrics = found[names[0]], found[names[1]]
    if data is None and metrics is None:
        return NOT_EVALUATED
    checks.run(CHECK, lambda: binding(doc, data, metrics, manifest, lock))
    return None


def binding(
    doc: DocAt,
    data: bytes | None,
    metrics: bytes | None,
    manifest: dict[str, Any],
    lock: dict[str, Any] | None,
) -> str:
    """The pass detail, or `CheckFailed` naming the first thing that does not hold."""
    if data is None:
        raise CheckFailed(f"{EVAL_METRICS_NAME} without {EVAL_NAME}")
    record = parse_record(data)
    bind_adapter(record, doc, manifest, lock)
    bind_tasks(doc, record["tasks"])
    self_consistent(record)
    if metrics is None:
        raise CheckFailed(f"{EVAL_NAME} without {EVAL_METRICS_NAME}")
    if _parse(metrics, EVAL_METRICS_NAME) != _numbers(record):
        raise CheckFailed(
            f"{EVAL_METRICS_NAME} does not hold the numbers of {EVAL_NAME} (edited, or"
            " left from another evaluation)"
        )
    tasks = len(record["tasks"])
    return (
        f"bound to adapter {record['adapter_sha256'][:16]} and {MANIFEST_NAME};"
        f" {len(record['probes'])} probe(s), {tasks} task(s)"
    )


def _numbers(record: dict[str, Any]) -> Any:
    """`eval.record.metrics_of` of a checked record (a shape it does not expect fails)."""
    try:
        return metrics_of(record)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        raise CheckFailed(f"{EVAL_NAME}: its numbers cannot be read ({exc!r:.80})") from None


def _parse(data: bytes, name: str) -> Any:
    if len(data) > MAX_EVAL_BYTES:
        raise CheckFailed(f"{name}: {len(data)} bytes, more than any evaluation writes")
    try:
        return load_json(data.decode("utf-8"), finite=True, unique_keys=True)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckFailed(f"{name} is not valid JSON ({exc})") from None


def parse_record(data: bytes) -> dict[str, Any]:
    """`eval.json` as a checked dict: `CheckAbsent` for a newer version, else `CheckFailed`."""
    obj = _parse(data, EVAL_NAME)
    if not isinstance(obj, dict):
        raise CheckFailed(f"{EVAL_NAME} is {type(obj).__name__}, not an object")
    version = obj.get("eval_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > EVAL_VERSION:
        raise CheckAbsent(
            f"{EVAL_NAME} is eval_version {version}; this dlm-git knows {EVAL_VERSION}"
            " (upgrade dlm-git to judge it)"
        )
    wrong = shape_problem(obj, EVAL)
    if wrong is not None:
        raise CheckFailed(f"malformed {EVAL_NAME}: {wrong}")
    return obj


def bind_adapter(
    record: dict[str, Any], doc: DocAt, manifest: dict[str, Any], lock: dict[str, Any] | None
) -> None:
    """The record evaluated this revision's adapter and manifest, under the lock's profile."""
    weights = manifest["adapter"]["files"].get(ADAPTER_WEIGHTS)
    recorded = weights["sha256"] if weights is not None else None
    if record["adapter_sha256"] != recorded:
        raise CheckFailed(
            f"{EVAL_NAME} scores adapter {short(record['adapter_sha256'])}, not the"
            f" {MANIFEST_NAME}'s {short(recorded)} (a stale or moved record)"
        )
    actual = sha256_bytes(canonical_text(doc.manifest or b""))
    if record["manifest_sha256"] != actual:
        raise CheckFailed(
            f"{EVAL_NAME} was made against {MANIFEST_NAME} {short(record['manifest_sha256'])},"
            f" not this one ({actual[:16]}: a stale or moved record)"
        )
    flags = lock.get("determinism_flags") if lock is not None else None
    if isinstance(flags, dict):
        ran = record["numerics"]
        wanted = {"profile": flags.get("numerics"), "threads": flags.get("threads")}
        for key, value in wanted.items():
            if value is not None and ran[key] != value:
                raise CheckFailed(
                    f"{EVAL_NAME} numerics.{key} {ran[key]!r:.40} is not the lock's"
                    f" {value!r:.40} (evaluated under another setup)"
                )


def named_paths(data: bytes) -> list[str]:
    """Every repository path the tasks of `eval.json` bytes `data` name (task files,
    includes, data); none when the record does not parse (`eval.binding` judges it)."""
    try:
        tasks = parse_record(data).get("tasks") or {}
    except (CheckFailed, CheckAbsent):
        return []
    return [path for _, path, _ in _task_files(tasks)]


def _task_files(tasks: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(task name, repository path, recorded sha256) of every file the tasks name."""
    for name, task in tasks.items():
        yield name, task["task_file"], task["task_sha256"]
        for files in (task["include_sha256"], task["data_sha256"]):
            for path, sha in files.items():
                yield name, path, sha


def bind_tasks(doc: DocAt, tasks: dict[str, Any]) -> None:
    """Every file a task names is, at this revision, the one that was evaluated."""
    task_files(doc.tree, tasks)


def task_files(tree: TreeAt, tasks: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of every file the (checked) `tasks` of an eval record name, by repository
    path, read from `tree`: each a repository path, no link nor below one, there, and of
    the sha256 the record states; else `CheckFailed` naming the first that is not. The
    one rule of what a task file is: `eval.binding` judges by it, and `eval.replay`
    writes its replay tree's task files from it."""
    named = list(_task_files(tasks))
    for name, path, _ in named:
        if problem(path) is not None:
            raise CheckFailed(f"task {_q(name)} names {_q(path)}: not a repository path")
    paths = [path for _, path, _ in named]
    links = tree.linked(paths)  # the work tree's too: refused before it is committed
    found = tree.read([path for path in paths if path not in links])
    for name, path, sha in named:
        if path in links:
            raise CheckFailed(
                f"task {_q(name)}: {_q(path)} is a symbolic link or lies under one"
                " (no task file is read through a link: commit the file itself)"
            )
        data = found.get(path)
        if data is None:
            raise CheckFailed(
                f"task {_q(name)}: {_q(path)} is not a file of this revision"
                " (a task file gone after evaluation)"
            )
        got = sha256_bytes(canonical_text(data))
        if got != sha:
            raise CheckFailed(
                f"task {_q(name)}: {_q(path)} has sha256 {got[:16]}, not"
                f" the {short(sha)} that was evaluated (changed after evaluation)"
            )
    return {path: found[path] or b"" for path in paths}


def _q(text: str) -> str:
    """A name from the record, quoted, whole up to 60 characters (printed through
    `output`, which shows what a terminal would act on as escapes)."""
    return f"'{short(text)}'"


def self_consistent(record: dict[str, Any]) -> None:
    """Every float is its `*_hex` bits, and every probe's `exact_match` its texts'."""
    for where, value, bits in _floats(record):
        try:
            same = float.fromhex(bits) == value
        except (ValueError, OverflowError):
            same = False
        if not same:
            raise CheckFailed(
                f"{EVAL_NAME} {where} {value!r:.40} is not its bits {bits!r:.40} (an edited score)"
            )
    for i, probe in enumerate(record["probes"]):
        if probe["exact_match"] != exact_match(probe["generated"], probe["reference"]):
            raise CheckFailed(
                f"{EVAL_NAME} probes[{i}].exact_match {probe['exact_match']} is not what"
                " its answer and reference give (an edited result)"
            )


def _floats(record: dict[str, Any]) -> Iterator[tuple[str, float, str]]:
    """(where, number, its `float.hex` text) of every float the record states twice."""
    val = record["val"] or {}
    for mode in ("overall", *MODES):
        entry = val.get(mode)
        if entry is not None:
            yield f"val.{mode}.loss", entry["loss"], entry["loss_hex"]
            yield f"val.{mode}.perplexity", entry["perplexity"], entry["perplexity_hex"]
    for name, task in record["tasks"].items():
        for key, metric in task["metrics"].items():
            yield f"tasks.{name}.metrics.{key}", metric["value"], metric["hex"]
