"""lm-evaluation-harness tasks run on the evaluated model: the record's `tasks` section.

Invariants:
- Only tasks `eval.taskdef` checked are run, each built from its checked config (never
  by lm-eval's task loader or index), one `simple_evaluate` call per task, so a task's
  scores do not depend on the other tasks named.
- Offline: `HF_DATASETS_OFFLINE` and `HF_HUB_OFFLINE` are set before `datasets` or
  lm-eval is imported; the JSONL data is read from the repository into a throwaway
  datasets cache (nothing is kept in the user's cache between runs).
- Templates render in the bounded sandbox (`eval.sandbox`, an
  `ImmutableSandboxedEnvironment`): a template reaches no Python attribute that runs
  code, and each render stays within fixed bounds (text, loop steps, work) or is one
  `EvalError` line; `regex_replace` is not registered (a commit's pattern can backtrack).
- Fixed settings, recorded per task (`SETTINGS`): batch size 1, the document's seed for
  every RNG lm-eval seeds, no sample limit, no bootstrap (stderr is not computed: it is
  random), the task's `num_fewshot` (0 if unset) and greedy `max_gen_toks`.
- The model is the one the rest of eval scores (the base with the adapter, fp32, eval
  mode), under the same pinned numerics profile; every score is recorded with its
  `float.hex` bits. A score that is not a finite number is an error (nothing written).
- lm-eval is imported only when a document names tasks: without the `eval` extra such a
  document is one `EvalError` line with the install hint; a core install never imports it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import posixpath
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.eval.record import BATCH_SIZE, EvalError
from dlm_git.eval.taskdef import INSTALL_HINT, Absent, TaskDef, map_files, worktree
from dlm_git.hashing import canonical_text, float_hex, sha256_bytes

HARNESS = "lm-eval"
HARNESS_VERSION = "0.4.13"
DEFAULT_MAX_GEN_TOKS = 256
"""lm-eval's own default for `generation_kwargs.max_gen_toks`."""
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


def run_tasks(
    tasks: list[TaskDef], model: Any, tokenizer_path: Path, seed: int, repo_root: Path
) -> dict[str, dict[str, Any]]:
    """Each task's record entry, by task name (`{}` when the document names none); the
    tasks' data files are read from the work tree at `repo_root`."""
    if not tasks:
        return {}
    _check_harness()
    with _offline():
        return _run_all(tasks, model, tokenizer_path, seed, repo_root)


def _run_all(
    tasks: list[TaskDef], model: Any, tokenizer_path: Path, seed: int, repo_root: Path
) -> dict[str, dict[str, Any]]:
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    _quiet()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path), trust_remote_code=False)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=BATCH_SIZE)
    out: dict[str, dict[str, Any]] = {}
    with (
        _sandboxed_templates(),
        _no_probes(),
        tempfile.TemporaryDirectory(prefix="dlm-git-eval-") as cache,
    ):
        for task in tasks:
            with _silenced(), _one_line(task):
                out[task.name] = _run_one(lm, task, seed, cache, repo_root)
    return out


@contextlib.contextmanager
def _one_line(task: TaskDef) -> Iterator[None]:
    """What a task's bytes can make lm-eval raise (a template refused by the sandbox or
    naming no column, data that does not load or lacks a split), as one `EvalError`."""
    from jinja2 import TemplateError
    from jinja2.exceptions import SecurityError

    from dlm_git.eval.templatebudget import OverBudget, TemplateRefused

    try:
        yield
    except TemplateRefused as exc:
        raise EvalError(task.path, f"a template is refused: {_first(exc)}", _RULES) from None
    except OverBudget as exc:
        raise EvalError(
            task.path, f"a template is over its bounds: {_first(exc)}", _BOUNDS
        ) from None
    except SecurityError as exc:
        raise EvalError(
            task.path, f"a template reaches unsafe Python ({_first(exc)}): refused", _SANDBOX
        ) from None
    except TemplateError as exc:
        raise EvalError(task.path, f"a template fails: {_first(exc)}", _FIX) from None
    except DlmGitError:
        raise
    except Exception as exc:  # lm-eval and datasets raise many types, all from the task
        cause = exc.__cause__ or exc.__context__
        detail = _first(exc) + (f"; {_first(cause)}" if cause is not None else "")
        raise EvalError(
            task.path, f"lm-eval cannot run it: {type(exc).__name__}: {detail}", _FIX
        ) from None


_SANDBOX = "templates are rendered sandboxed; use the row's fields only (docs/eval.md, 'Tasks')"
_RULES = "templates use the tags, filters and methods docs/eval.md lists ('Tasks')"
_BOUNDS = "a render builds at most 1 Mi characters in 1 Mi loop steps (docs/eval.md, 'Tasks')"
_FIX = "check the task's templates and splits against its JSONL rows"


def _first(exc: BaseException) -> str:
    """The first line of what `exc` says (an object's address left out: it varies)."""
    text = re.sub(r" (?:object )?at 0x[0-9a-f]+", "", str(exc).strip())
    return text.splitlines()[0][:200] if text else type(exc).__name__


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """lm-eval's and datasets' progress bars and prints kept off the terminal: dlm-git's
    output is its own lines (an error still comes out as its one line)."""
    sink = io.StringIO()
    with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
        yield


def _check_harness() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("lm_eval")
    except PackageNotFoundError:
        raise EvalError(
            "lm-eval", "is not installed (the document names tasks)", INSTALL_HINT
        ) from None
    if found != HARNESS_VERSION:
        raise EvalError(
            "lm-eval",
            f"is {found}, not the pinned {HARNESS_VERSION} (scores differ between versions)",
            INSTALL_HINT + " -c requirements/constraints.txt",
        )


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """The Hub and datasets offline while tasks run: the variables set before either is
    imported here, and their import-time copies set where they were imported already;
    the variables are restored after."""
    saved = {key: os.environ.get(key) for key in OFFLINE}
    os.environ.update(OFFLINE)
    import datasets.config
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _quiet() -> None:
    for name in ("lm_eval", "lm-eval", "datasets", "evaluate"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # failures come back as errors
    import datasets

    datasets.disable_progress_bars()


@contextlib.contextmanager
def _no_probes() -> Iterator[None]:
    """lm-eval's after-run probes of the machine left out: they run `git describe` in the
    working directory (on a commit under audit) and torch's `collect_env` (`pip list` and
    more, seconds long), for fields of its results dlm-git does not record."""
    import lm_eval.evaluator as evaluator

    saved = evaluator.get_git_commit_hash, evaluator.add_env_info
    evaluator.get_git_commit_hash = lambda: None
    evaluator.add_env_info = lambda storage: None
    try:
        yield
    finally:
        evaluator.get_git_commit_hash, evaluator.add_env_info = saved


@contextlib.contextmanager
def _sandboxed_templates() -> Iterator[None]:
    """lm-eval's template environment replaced by the bounded sandbox (`eval.sandbox`:
    lm-eval's settings, sandboxed, every render within fixed bounds)."""
    import lm_eval.utils as lm_utils

    from dlm_git.eval.sandbox import BoundedSandbox

    saved = lm_utils.env
    lm_utils.env = BoundedSandbox()
    try:
        yield
    finally:
        lm_utils.env = saved


def settings_of(task: TaskDef, seed: int) -> dict[str, Any]:
    """The harness settings a task runs under (recorded as they were used)."""
    generation = task.config.get("generation_kwargs") or {}
    generates = task.config.get("output_type") == "generate_until"
    return {
        "batch_size": BATCH_SIZE,
        "num_fewshot": int(task.config.get("num_fewshot") or 0),
        "seed": seed,
        "limit": None,
        "max_gen_toks": int(generation.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
        if generates
        else None,
        "bootstrap_iters": 0,
    }


def _checked_copies(task: TaskDef, repo_root: Path, cache: Path) -> dict[str, str]:
    """Each data file of `task` copied under a plain name into `cache`, from the bytes
    whose digest the record binds: `datasets` reads a data path as a glob pattern (and
    follows links it finds), so it is handed only these copies, never a repository path."""
    read = worktree(repo_root)
    copies: dict[str, str] = {}
    for i, (rel, sha) in enumerate(sorted(task.data.items())):
        raw = read(rel)
        if isinstance(raw, Absent) or sha256_bytes(canonical_text(raw)) != sha:
            raise EvalError(rel, "changed while the evaluation ran", "run `dlm-git eval` again")
        dest = cache / f"data-{len(os.listdir(cache))}-{i}{posixpath.splitext(rel)[1]}"
        dest.write_bytes(raw)
        copies[rel] = str(dest)
    return copies


def _run_one(lm: Any, task: TaskDef, seed: int, cache: str, repo_root: Path) -> dict[str, Any]:
    """One task run and its record entry (see `docs/eval.md`, "The record")."""
    from lm_eval import simple_evaluate
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager

    settings = settings_of(task, seed)
    config = dict(task.config)
    copies = _checked_copies(task, repo_root, Path(cache))
    files = map_files(config["dataset_kwargs"]["data_files"], copies.__getitem__)
    config["dataset_kwargs"] = {"data_files": files, "cache_dir": cache}
    built = ConfigurableTask(config=config)
    results = simple_evaluate(
        model=lm,
        tasks=[built],
        num_fewshot=settings["num_fewshot"],
        batch_size=BATCH_SIZE,
        limit=None,
        bootstrap_iters=0,
        log_samples=False,
        task_manager=TaskManager(include_defaults=False),
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    if results is None:
        raise EvalError(task.path, "lm-eval returned no results", "re-run in a single process")
    return {
        "task_file": task.path,
        "task_sha256": task.sha256,
        "include_sha256": dict(sorted(task.includes.items())),
        "data_sha256": task.data,
        "harness": {"name": HARNESS, "version": HARNESS_VERSION},
        "settings": settings,
        "samples": int(results["n-samples"][task.name]["effective"]),
        "metrics": _metrics(results["results"][task.name], task.path),
    }


def _metrics(scores: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """Each score lm-eval reports (`<metric>,<filter>`), with its bits; stderr left out."""
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(scores):
        value = scores[key]
        if "," not in key or "_stderr," in key:  # `alias`, `sample_len`: not scores
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        number = float(value)
        if not math.isfinite(number):
            raise EvalError(
                f"{where}: {key}",
                f"the score is {number} (not a finite number)",
                "check the task's data and metric; the old eval.json is kept",
            )
        out[key] = {"value": number, "hex": float_hex(number)}
    return out
