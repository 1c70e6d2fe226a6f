"""Evaluation of a trained document: its adapter on its base, scored reproducibly.

Invariant: `dlm-git eval DOC` writes `<doc>/eval.json` (the record, `eval.record`) and
`<doc>/eval_metrics.json` (its numbers, for `dvc metrics`), and nothing else; the same
inputs under the same numerics profile give the same bytes (`docs/eval.md`).
"""
