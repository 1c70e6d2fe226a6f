"""`diff`: what changed for each document between two sides (commits or the work tree).

Invariants:
- Per document, five independent parts, each computed from what both sides hold and
  each saying what it could not compare instead of failing the others:
  inputs (sections by id, sources by relpath, base, config keys), lock (every changed
  field with its severity from the one lock table, `dlm_git.lock.policy.classify`),
  adapter (identical by the recorded sha256, else per-tensor deltas), training (steps,
  final loss, the loss curves), scores (each side's `eval.json`: `history.scores`).
- Settings are each side's effective ones, each marked with where it is set (frontmatter
  or params.yaml's `docs.<doc>.training`, read as a training reads them:
  `history.settings`); the settings each adapter was trained with are its manifest's.
- Sections are compared by their content-derived ids: a removed and an added section of
  the same type with the same first line are one edited section; the rest are added or
  removed. Source files are compared by relpath and sha256.
- Inputs are read from the documents themselves (a commit's materialized into a temp
  directory), so an edit not trained yet shows; the records (lock, manifest, metrics,
  loss) are read as each side holds them.
- Read-only: nothing in the work tree, the index or the DVC cache is modified (`--fetch`
  only adds missing objects to the cache).
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from dlm_git.docat import DocAt, TreeAt, prefix_of
from dlm_git.history.records import json_object, recorded_adapter_sha
from dlm_git.history.scores import ScoresDiff, diff_scores, scores_json
from dlm_git.history.settings import Change, Settings, changes, effective, trained_changes
from dlm_git.history.sides import adapter_weights, commit_of, describe, load
from dlm_git.history.tensors import AdapterDelta, GroupDelta, compare, read_scale, read_tensors
from dlm_git.layout import EVAL_NAME, LOCK_NAME, LOSS_NAME, MANIFEST_NAME, METRICS_NAME
from dlm_git.lock.policy import Finding, classify

if TYPE_CHECKING:
    from dlm_git.doc.load import LoadedDocument
    from dlm_git.history.forgetting import Forgetting
    from dlm_git.verify.fetch import FetchFrom

Status = Literal["added", "removed", "changed", "unchanged"]


class SectionRef(NamedTuple):
    id: str
    type: str
    first_line: str


class SectionEdit(NamedTuple):
    type: str
    first_line: str
    from_id: str
    to_id: str


@dataclass
class InputsDiff:
    sections_added: list[SectionRef] = field(default_factory=list)
    sections_removed: list[SectionRef] = field(default_factory=list)
    sections_edited: list[SectionEdit] = field(default_factory=list)
    sources_added: list[str] = field(default_factory=list)
    sources_removed: list[str] = field(default_factory=list)
    sources_changed: list[str] = field(default_factory=list)
    base: Change | None = None
    config: list[Change] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Why a training refuses a side's params.yaml entry (its settings: as written)."""
    unavailable: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        parts = (self.sections_added, self.sections_removed, self.sections_edited)
        files = (self.sources_added, self.sources_removed, self.sources_changed)
        return any(parts) or any(files) or self.base is not None or bool(self.config)


@dataclass
class LockDiff:
    findings: list[Finding] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)


@dataclass
class AdapterDiff:
    from_sha256: str | None = None
    to_sha256: str | None = None
    identical: bool | None = None
    """None: not known (an adapter unavailable on a side)."""
    delta: AdapterDelta | None = None
    unavailable: list[str] = field(default_factory=list)


@dataclass
class TrainingDiff:
    steps: tuple[int | None, int | None] = (None, None)
    final_loss: tuple[float | None, float | None] = (None, None)
    common_steps: int = 0
    max_abs_delta: float | None = None
    first_divergent_step: int | None = None
    settings: list[Change] = field(default_factory=list)
    """The settings the two manifests record differently (`training_config`)."""


@dataclass
class DocDiff:
    doc: str
    status: Status
    inputs: InputsDiff
    lock: LockDiff
    adapter: AdapterDiff
    training: TrainingDiff
    scores: ScoresDiff = field(default_factory=lambda: ScoresDiff(("not_evaluated",) * 2))
    forgetting: Forgetting | None = None
    """`--forgetting` only (`history.forgetting`)."""


def diff_sides(a: TreeAt, b: TreeAt, only: str | None, fetch: FetchFrom | None) -> list[DocDiff]:
    """Every document of either side (or just `only`), in name order."""
    in_a, in_b = set(a.documents()), set(b.documents())
    names = sorted(in_a | in_b) if only is None else [only]
    with tempfile.TemporaryDirectory(prefix="dlm-git-diff-") as tmp:
        return [
            diff_document(a, b, doc, (doc in in_a, doc in in_b), Path(tmp) / str(i), fetch)
            for i, doc in enumerate(names)
        ]


def diff_document(
    a: TreeAt, b: TreeAt, doc: str, present: tuple[bool, bool], work: Path, fetch: FetchFrom | None
) -> DocDiff:
    prefix = prefix_of(doc)
    records = (LOCK_NAME, MANIFEST_NAME, METRICS_NAME, LOSS_NAME, EVAL_NAME)
    names = [f"{prefix}{n}" for n in records]
    ra, rb = a.read(names), b.read(names)
    lock_a, man_a, met_a, loss_a, eval_a = (ra[n] for n in names)
    lock_b, man_b, met_b, loss_b, eval_b = (rb[n] for n in names)
    da, db = a.doc(doc), b.doc(doc)
    inputs = diff_inputs(da, db, present, work)
    lock = diff_locks(lock_a, lock_b)
    manifests = (json_object(man_a), json_object(man_b))
    adapter = diff_adapters(da, db, manifests, work, fetch)
    training = diff_training((json_object(met_a), json_object(met_b)), (loss_a, loss_b))
    training.settings = trained_changes(manifests)
    adapters = (recorded_adapter_sha(manifests[0]), recorded_adapter_sha(manifests[1]))
    scores = diff_scores(eval_a, eval_b, adapters)
    status: Status
    if not present[0]:
        status = "added"
    elif not present[1]:
        status = "removed"
    elif inputs.changed or lock.findings or adapter.identical is False or ra != rb:
        status = "changed"
    else:
        status = "unchanged"
    return DocDiff(doc, status, inputs, lock, adapter, training, scores)


# --------------------------------------------------------------------------- inputs


def diff_inputs(a: DocAt, b: DocAt, present: tuple[bool, bool], work: Path) -> InputsDiff:
    out = InputsDiff()
    loaded: list[Any] = []
    settings: list[Settings | None] = []
    for side, here, sub in ((a, present[0], "a"), (b, present[1], "b")):
        got = load(side, work / sub) if here else None
        if isinstance(got, str):
            out.unavailable.append(f"{describe(side.tree)}: {got}")
            got = None
        loaded.append(got)
        settings.append(None if got is None else _settings(out, side, got))
    la, lb = loaded
    if la is None and lb is None:
        return out
    _diff_sections(out, _sections(la), _sections(lb))
    fa, fb = _sources(la), _sources(lb)
    out.sources_added = sorted(set(fb) - set(fa))
    out.sources_removed = sorted(set(fa) - set(fb))
    out.sources_changed = sorted(p for p in set(fa) & set(fb) if fa[p] != fb[p])
    config = changes(settings[0], settings[1])
    out.base = next((c for c in config if c.key == "base_model"), None)
    out.config = [c for c in config if c.key != "base_model"]
    return out


def _settings(out: InputsDiff, side: DocAt, loaded: LoadedDocument) -> Settings:
    found, why = effective(loaded)
    if why is not None:
        out.refused.append(f"{describe(side.tree)}: {why}")
    return found


def _sections(loaded: Any) -> list[SectionRef]:
    if loaded is None:
        return []
    return [
        SectionRef(s.section_id, s.type_name, s.first_line[:120])
        for s in loaded.doc.sections
        if s.source_path is None
    ]


def _diff_sections(out: InputsDiff, a: list[SectionRef], b: list[SectionRef]) -> None:
    left = Counter(s.id for s in a) - Counter(s.id for s in b)
    right = Counter(s.id for s in b) - Counter(s.id for s in a)
    removed = _take(a, left)
    added = _take(b, right)
    for gone in list(removed):
        twin = next(
            (s for s in added if s.type == gone.type and s.first_line == gone.first_line), None
        )
        if twin is not None:
            removed.remove(gone)
            added.remove(twin)
            out.sections_edited.append(SectionEdit(gone.type, gone.first_line, gone.id, twin.id))
    out.sections_removed, out.sections_added = removed, added


def _take(sections: list[SectionRef], counts: Counter[str]) -> list[SectionRef]:
    left = Counter(counts)
    taken = []
    for s in sections:
        if left[s.id] > 0:
            left[s.id] -= 1
            taken.append(s)
    return taken


def _sources(loaded: Any) -> dict[str, str]:
    if loaded is None:
        return {}
    return {f.relpath: f.sha256 for f in loaded.sources.files}


# --------------------------------------------------------------------------- records


def diff_locks(a: bytes | None, b: bytes | None) -> LockDiff:
    out = LockDiff()
    la, lb = json_object(a), json_object(b)
    for what, raw, parsed in (("A", a, la), ("B", b, lb)):
        if raw is None:
            out.unavailable.append(f"no {LOCK_NAME} on side {what}")
        elif parsed is None:
            out.unavailable.append(f"{LOCK_NAME} on side {what} is not a JSON object")
    if la is not None and lb is not None:
        out.findings = classify(la, lb)
    return out


def diff_adapters(
    a: DocAt,
    b: DocAt,
    manifests: tuple[dict[str, Any] | None, dict[str, Any] | None],
    work: Path,
    fetch: FetchFrom | None,
) -> AdapterDiff:
    out = AdapterDiff(recorded_adapter_sha(manifests[0]), recorded_adapter_sha(manifests[1]))
    if out.from_sha256 is not None and out.from_sha256 == out.to_sha256:
        out.identical = True
        return out
    tensors: list[dict[str, Any]] = []
    scales: list[float | str] = []
    for side, sub in ((a, "adapter-a"), (b, "adapter-b")):
        weights = adapter_weights(side, work / sub, fetch)
        got = read_tensors(weights) if isinstance(weights, Path) else weights
        if isinstance(got, str):
            out.unavailable.append(f"{describe(side.tree)}: {got}")
        else:
            tensors.append(got)
            scales.append(read_scale(weights) if isinstance(weights, Path) else weights)
    if len(tensors) == 2:
        out.delta = compare(tensors[0], tensors[1], (scales[0], scales[1]))
        out.identical = not (out.delta.added or out.delta.removed or out.delta.reshaped) and all(
            t.max_abs == 0 for t in out.delta.tensors
        )
    return out


def diff_training(
    metrics: tuple[dict[str, Any] | None, dict[str, Any] | None],
    losses: tuple[bytes | None, bytes | None],
) -> TrainingDiff:
    out = TrainingDiff(
        steps=(_int(metrics[0], "steps"), _int(metrics[1], "steps")),
        final_loss=(_float(metrics[0], "final_loss"), _float(metrics[1], "final_loss")),
    )
    ca, cb = _curve(losses[0]), _curve(losses[1])
    common = min(len(ca), len(cb))
    out.common_steps = common
    if common:
        deltas = [abs(x - y) for x, y in zip(ca[:common], cb[:common], strict=True)]
        out.max_abs_delta = max(deltas)
        out.first_divergent_step = next((i + 1 for i, d in enumerate(deltas) if d != 0), None)
    return out


def _curve(data: bytes | None) -> list[float]:
    if data is None:
        return []
    out: list[float] = []
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        parts = line.split("\t")
        try:
            value = float(parts[1])
        except (IndexError, ValueError):
            return out
        if not math.isfinite(value):
            return out  # a curve is read up to its first value JSON cannot carry
        out.append(value)
    return out


def _int(obj: dict[str, Any] | None, key: str) -> int | None:
    value = obj.get(key) if obj is not None else None
    return value if type(value) is int else None


def _float(obj: dict[str, Any] | None, key: str) -> float | None:
    value = obj.get(key) if obj is not None else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- JSON form


def to_json(a: TreeAt, b: TreeAt, diffs: list[DocDiff]) -> dict[str, Any]:
    """The stable JSON form (docs/history.md documents every key)."""
    return {
        "schema": "dlm-git.diff/1",
        "a": _side_json(a),
        "b": _side_json(b),
        "documents": [_doc_json(d) for d in diffs],
    }


def _side_json(side: TreeAt) -> dict[str, Any]:
    return {"label": side.label, "commit": commit_of(side)}


def _doc_json(d: DocDiff) -> dict[str, Any]:
    return {
        "doc": d.doc,
        "status": d.status,
        "inputs": _inputs_json(d.inputs),
        "lock": _lock_json(d.lock),
        "adapter": _adapter_json(d.adapter),
        "training": _training_json(d.training),
        "scores": scores_json(d.scores),
        "forgetting": None if d.forgetting is None else d.forgetting.to_json(),
    }


def _inputs_json(i: InputsDiff) -> dict[str, Any]:
    return {
        "sections": {
            "added": [_section(s) for s in i.sections_added],
            "removed": [_section(s) for s in i.sections_removed],
            "edited": [
                {"type": e.type, "first_line": e.first_line, "from": e.from_id, "to": e.to_id}
                for e in i.sections_edited
            ],
        },
        "sources": {
            "added": i.sources_added,
            "removed": i.sources_removed,
            "changed": i.sources_changed,
        },
        "base": None if i.base is None else {"from": i.base.old, "to": i.base.new},
        "config": [
            {
                "key": c.key,
                "from": c.old,
                "to": c.new,
                "origin": {"from": c.origin[0], "to": c.origin[1]},
            }
            for c in i.config
        ],
        "refused": i.refused,
        "unavailable": i.unavailable,
    }


def _lock_json(lock: LockDiff) -> dict[str, Any]:
    return {
        "changes": [
            {"field": f.field, "severity": f.severity, "from": f.old, "to": f.new}
            for f in lock.findings
        ],
        "unavailable": lock.unavailable,
    }


def _adapter_json(ad: AdapterDiff) -> dict[str, Any]:
    delta = ad.delta
    return {
        "from_sha256": ad.from_sha256,
        "to_sha256": ad.to_sha256,
        "identical": ad.identical,
        "tensors": []
        if delta is None
        else [
            {"name": x.name, "rel_l2": _finite(x.rel_l2), "max_abs": _finite(x.max_abs)}
            for x in delta.tensors
        ],
        "added": [] if delta is None else delta.added,
        "removed": [] if delta is None else delta.removed,
        "reshaped": [] if delta is None else delta.reshaped,
        "modules": [] if delta is None else [_group(g) for g in delta.modules],
        "layers": [] if delta is None else [_group(g) for g in delta.layers],
        "not_comparable": []
        if delta is None
        else [{"module": n.module, "reason": n.reason} for n in delta.not_comparable],
        "unavailable": ad.unavailable,
    }


def _training_json(t: TrainingDiff) -> dict[str, Any]:
    return {
        "steps": {"from": t.steps[0], "to": t.steps[1]},
        "final_loss": {"from": t.final_loss[0], "to": t.final_loss[1]},
        "loss_curve": {
            "common_steps": t.common_steps,
            "max_abs_delta": t.max_abs_delta,
            "first_divergent_step": t.first_divergent_step,
        },
        "settings": [{"key": c.key, "from": c.old, "to": c.new} for c in t.settings],
    }


def _section(s: SectionRef) -> dict[str, str]:
    return {"id": s.id, "type": s.type, "first_line": s.first_line}


def _group(g: GroupDelta) -> dict[str, Any]:
    rel = None if g.rel_l2 is None else _finite(g.rel_l2)
    return {
        "name": g.group,
        "rel_l2": rel,
        "modules": g.modules,
        "not_comparable": g.not_comparable,
    }


def _finite(value: float) -> float | str:
    """JSON has no infinity or NaN: a tensor that was all zeros and is not any more says
    "inf"; one holding non-finite weights may say "nan"."""
    if math.isnan(value):
        return "nan"
    return "inf" if math.isinf(value) else value
