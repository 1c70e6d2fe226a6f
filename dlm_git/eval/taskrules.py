"""What each key of an lm-eval task file may hold, as dlm-git runs it (docs/eval.md,
"Tasks"): one rule per key, returning what is wrong with a value, or None.

Invariant: every rule accepts plain data only (text, whole numbers, booleans, lists and
mappings of them) of the shape lm-eval reads as data, never a name lm-eval resolves to
code: the dataset is `json` over local files, the metrics are lm-eval's built-in `acc`,
`acc_norm` and `exact_match` averaged, and generation is greedy. A key without a rule
is not run (`taskdef` refuses it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OUTPUT_TYPES = frozenset({"multiple_choice", "generate_until", "loglikelihood"})
METRICS = frozenset({"acc", "acc_norm", "exact_match"})
EXACT_MATCH_OPTIONS = frozenset({"ignore_case", "ignore_punctuation", "ignore_numbers"})


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "is not text"


def _count(low: int, high: int) -> Callable[[Any], str | None]:
    def rule(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"is not a whole number from {low} to {high}"

    return rule


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _template(value: Any) -> str | None:
    ok = isinstance(value, str | int) and not isinstance(value, bool)
    return None if ok or _texts(value) else "is not a template, a column or a list of texts"


def _data_files_rule(value: Any) -> str | None:
    def files(v: Any) -> bool:
        return isinstance(v, str) or _texts(v)

    ok = files(value) or (
        isinstance(value, dict) and all(isinstance(k, str) and files(v) for k, v in value.items())
    )
    return None if ok else "is not a file, a list of files or a mapping of splits to files"


def _dataset_kwargs(value: Any) -> str | None:
    if not isinstance(value, dict) or set(value) != {"data_files"}:
        return "holds something other than `data_files` (local data only)"
    return _data_files_rule(value["data_files"])


def _generation(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "is not a mapping"
    for key, v in value.items():
        if key == "until" and (isinstance(v, str) or _texts(v)):
            continue
        if key == "max_gen_toks" and _count(1, 4096)(v) is None:
            continue
        if key == "do_sample" and v is False:
            continue
        if key == "temperature" and v in (0, 0.0) and not isinstance(v, bool):
            continue
        return f"has {key}: {v!r:.40} (generation is greedy: until, max_gen_toks only)"
    return None


def _metrics(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "is not a list of metrics"
    for item in value:
        if not isinstance(item, dict) or item.get("metric") not in METRICS:
            return f"names a metric other than lm-eval's built-in {', '.join(sorted(METRICS))}"
        for key, v in item.items():
            if key == "metric" or (key == "aggregation" and v == "mean"):
                continue
            if key == "higher_is_better" and isinstance(v, bool):
                continue
            if key in EXACT_MATCH_OPTIONS and isinstance(v, bool):
                continue
            return f"has {key}: {v!r:.40} (only aggregation: mean and exact_match's options)"
    return None


def _plain(value: Any) -> str | None:
    ok = isinstance(value, dict) and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in value.values()
    )
    return None if ok else "is not a mapping of plain values"


def _any_text(value: Any) -> str | None:
    return _text(value)


def _local(value: Any) -> str | None:
    if value == "json":
        return None
    return f"is {value!r:.60}: only `json` over committed data_files is read (no download)"


def _output_type(value: Any) -> str | None:
    if value in OUTPUT_TYPES:
        return None
    return f"is {value!r:.40}, not one of {', '.join(sorted(OUTPUT_TYPES))}"


RULES: dict[str, Callable[[Any], str | None]] = {
    "task": _any_text,
    "include": _any_text,
    "dataset_path": _local,
    "dataset_kwargs": _dataset_kwargs,
    "training_split": _any_text,
    "validation_split": _any_text,
    "test_split": _any_text,
    "fewshot_split": _any_text,
    "output_type": _output_type,
    "doc_to_text": _template,
    "doc_to_target": _template,
    "doc_to_choice": _template,
    "description": _any_text,
    "target_delimiter": _any_text,
    "fewshot_delimiter": _any_text,
    "num_fewshot": _count(0, 64),
    "generation_kwargs": _generation,
    "metric_list": _metrics,
    "metadata": _plain,
}
