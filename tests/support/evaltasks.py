"""Small local lm-evaluation-harness tasks (task YAML + JSONL beside it), as a document
names them in `eval.tasks` (docs/eval.md, "Tasks"): a multiple-choice task scored by
accuracy and a generation task scored by exact match."""

from __future__ import annotations

import json
from pathlib import Path

TASK_DIR = "evals"
MC_TASK = "demo_mc"
GEN_TASK = "demo_gen"

MC_YAML = """\
task: demo_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1
"""

GEN_YAML = """\
task: demo_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Q: {{question}}\\nA:"
doc_to_target: answer
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
"""

MC_ROWS = [
    ("What does a lock file pin?", ["the dependencies", "the weather", "a song"], 0),
    ("What makes an adapter reproducible?", ["luck", "the same inputs", "a bigger GPU"], 1),
    ("Which tool versions the data?", ["DVC", "a hammer", "email"], 0),
    ("What does git store?", ["commits", "pizza", "noise"], 0),
    ("What is a LoRA adapter?", ["a small set of weights", "a cable", "a font"], 0),
    ("What does verify compare?", ["colours", "bits", "moods"], 1),
    ("Where is the manifest written?", ["on the moon", "nowhere", "beside the document"], 2),
    ("What is a seed?", ["a number that fixes randomness", "a plant", "a disk"], 0),
]
GEN_ROWS = [
    ("Say yes.", "yes"),
    ("Say no.", "no"),
    ("What is 2+2?", "4"),
    ("Name the tool.", "dlm-git"),
    ("Repeat: seed", "seed"),
    ("Repeat: lock", "lock"),
]


def jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)


def write_tasks(doc_dir: Path) -> list[str]:
    """The two tasks under `<doc_dir>/evals/`; their paths as `eval.tasks` names them."""
    where = doc_dir / TASK_DIR
    where.mkdir(parents=True, exist_ok=True)
    (where / "mc.yaml").write_text(MC_YAML, "utf-8")
    (where / "gen.yaml").write_text(GEN_YAML, "utf-8")
    mc = [{"question": q, "choices": c, "label": label} for q, c, label in MC_ROWS]
    (where / "mc.jsonl").write_text(jsonl(mc), "utf-8")
    (where / "gen.jsonl").write_text(jsonl([{"question": q, "answer": a} for q, a in GEN_ROWS]))
    return [f"{TASK_DIR}/mc.yaml", f"{TASK_DIR}/gen.yaml"]


def name_tasks(doc_file: Path, entries: list[str]) -> None:
    """Add `eval: {tasks: entries}` to a document's frontmatter (before its `training:`)."""
    text = doc_file.read_text("utf-8")
    block = "eval:\n  tasks:\n" + "".join(f"    - {e}\n" for e in entries)
    assert "\ntraining:\n" in text, "the document has no training: block"
    doc_file.write_text(text.replace("\ntraining:\n", f"\n{block}training:\n", 1), "utf-8")
