"""Scores as a history command reads them: each side's `eval.json`, and what changed.

Invariants:
- A commit's `eval.json` is hostile bytes: it is parsed through `safeparse` (strict,
  finite JSON) and its shape is checked before any value is used. A record that is not
  what `docs/eval.md` describes (`eval_version` 1; every loss and score a finite number
  whose `*_hex` bits, where the record gives them, are the same float) is one problem
  line, never an exception; a side without the file is `not_evaluated`.
- The numbers compared are the record's own (from the JSON number; its bits agree):
  nothing is recomputed, rounded or made up for a side that lacks one (None).
- Probes are matched by section id (content-derived: an edited pair is a removed and an
  added probe); an honest record holds each section id once.
- Nothing heavy is imported (`log` reads these): no torch, no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from dlm_git.eval.record import EVAL_VERSION, MODES
from dlm_git.hashing import parse_float_hex
from dlm_git.history.records import json_object
from dlm_git.layout import EVAL_NAME, MANIFEST_NAME

State = Literal["evaluated", "not_evaluated", "malformed"]
ProbeStatus = Literal["added", "removed", "compared"]
VAL_KEYS = ("overall", *MODES)


class Malformed(ValueError):
    """What is wrong with a record (one line)."""


class Loss(NamedTuple):
    loss: float
    perplexity: float


class ProbeScore(NamedTuple):
    section_id: str
    question: str
    generated: str
    exact_match: bool


class Scores(NamedTuple):
    """One `eval.json`, as far as a comparison reads it."""

    val: dict[str, Loss | None] | None
    """None: no held-out split; else overall and per mode (None: no rows of that mode)."""
    probes: list[ProbeScore]
    tasks: dict[str, dict[str, float]]
    """Task name -> `<metric>,<filter>` -> value."""
    adapter_sha256: str | None = None
    """The adapter weights the record says it scored (None: it names none)."""

    @property
    def matched(self) -> int:
        return sum(1 for p in self.probes if p.exact_match)


class Side(NamedTuple):
    state: State
    scores: Scores | None = None
    problem: str | None = None


def read_side(data: bytes | None) -> Side:
    """A side's `eval.json` bytes (None: absent) as a state with its scores or problem."""
    if data is None:
        return Side("not_evaluated")
    record = json_object(data)
    if record is None:
        return Side("malformed", problem=f"{EVAL_NAME} is not a JSON object")
    try:
        return Side("evaluated", scores=parse(record))
    except Malformed as exc:
        return Side("malformed", problem=f"{EVAL_NAME}: {exc}")


def parse(record: dict[str, Any]) -> Scores:
    version = record.get("eval_version")
    if type(version) is not int or version != EVAL_VERSION:
        raise Malformed(f"eval_version {_short(version)}: this dlm-git reads {EVAL_VERSION}")
    adapter = record.get("adapter_sha256")
    scored = adapter if isinstance(adapter, str) else None
    return Scores(_val(record.get("val")), _probes(record.get("probes")), _tasks(record), scored)


def _val(val: object) -> dict[str, Loss | None] | None:
    if val is None:
        return None
    if not isinstance(val, dict):
        raise Malformed("val is neither null nor an object")
    out: dict[str, Loss | None] = {}
    for key in VAL_KEYS:
        entry = val.get(key)
        if entry is None:
            out[key] = None
        elif isinstance(entry, dict):
            where = f"val.{key}"
            out[key] = Loss(_number(entry, "loss", where), _number(entry, "perplexity", where))
        else:
            raise Malformed(f"val.{key} is neither null nor an object")
    return out


def _number(entry: dict[str, Any], key: str, where: str, bits_key: str = "") -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Malformed(f"{where}.{key} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise Malformed(f"{where}.{key} is not a finite number")
    bits = entry.get(bits_key or f"{key}_hex")
    if bits is not None and parse_float_hex(bits, 64) != number:
        raise Malformed(f"{where}.{key} and its hex bits are different numbers")
    return number


def _probes(probes: object) -> list[ProbeScore]:
    if probes is None:
        return []
    if not isinstance(probes, list):
        raise Malformed("probes is not a list")
    out: list[ProbeScore] = []
    for i, p in enumerate(probes):
        if not isinstance(p, dict):
            raise Malformed(f"probes[{i}] is not an object")
        sid, question, generated, match = (
            p.get(k) for k in ("section_id", "question", "generated", "exact_match")
        )
        if not (isinstance(sid, str) and isinstance(question, str) and isinstance(generated, str)):
            raise Malformed(f"probes[{i}]: section_id, question or generated is not text")
        if not isinstance(match, bool):
            raise Malformed(f"probes[{i}].exact_match is not true or false")
        if any(q.section_id == sid for q in out):
            raise Malformed(f"probes[{i}]: section {_short(sid)} is probed twice")
        out.append(ProbeScore(sid, question, generated, match))
    return out


def _tasks(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    tasks = record.get("tasks")
    if tasks is None:
        return {}
    if not isinstance(tasks, dict):
        raise Malformed("tasks is not an object")
    out: dict[str, dict[str, float]] = {}
    for name, entry in sorted(tasks.items()):
        metrics = entry.get("metrics") if isinstance(entry, dict) else None
        if not isinstance(metrics, dict):
            raise Malformed(f"tasks.{_short(name)}.metrics is not an object")
        where = f"tasks.{_short(name)}.metrics"
        out[name] = {}
        for metric, score in sorted(metrics.items()):
            if not isinstance(score, dict):
                raise Malformed(f"{where}.{_short(metric)} is not an object")
            out[name][metric] = _number(score, "value", f"{where}.{_short(metric)}", "hex")
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- changes


class Move(NamedTuple):
    """A number on each side (None: that side has none)."""

    old: float | None
    new: float | None

    @property
    def change(self) -> float | None:
        """None where a side has none, or where two finite numbers overflow (no number)."""
        if self.old is None or self.new is None:
            return None
        change = self.new - self.old
        return change if math.isfinite(change) else None


class ValMove(NamedTuple):
    key: str
    """`overall` or a mode."""
    loss: Move
    perplexity: Move


class ProbeMove(NamedTuple):
    section_id: str
    question: str
    status: ProbeStatus
    exact_match: tuple[bool | None, bool | None]
    generated_changed: bool | None
    """None unless the probe is on both sides."""


class TaskMove(NamedTuple):
    task: str
    metric: str
    value: Move


@dataclass
class ScoresDiff:
    states: tuple[State, State]
    problems: list[str] = field(default_factory=list)
    """One line per malformed side: `A: eval.json: ...`."""
    stale: list[str] = field(default_factory=list)
    """One line per side whose record scored another adapter than its manifest records."""
    val: list[ValMove] = field(default_factory=list)
    probes: list[ProbeMove] = field(default_factory=list)
    tasks: list[TaskMove] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return (
            self.states[0] != self.states[1] or bool(self.problems or self.stale) or self._moved()
        )

    def _moved(self) -> bool:
        nums = [m.loss for m in self.val] + [m.perplexity for m in self.val]
        nums += [t.value for t in self.tasks]
        probes = any(
            p.status != "compared" or p.generated_changed or p.exact_match[0] != p.exact_match[1]
            for p in self.probes
        )
        return probes or any(n.old != n.new for n in nums)


def diff_scores(
    a: bytes | None, b: bytes | None, adapters: tuple[str | None, str | None]
) -> ScoresDiff:
    """What changed between two sides' `eval.json` bytes (None: absent); `adapters`: the
    adapter sha256 each side's manifest records."""
    sa, sb = read_side(a), read_side(b)
    out = ScoresDiff((sa.state, sb.state))
    out.problems = [f"{w}: {s.problem}" for w, s in (("A", sa), ("B", sb)) if s.problem]
    for what, side, recorded in (("A", sa, adapters[0]), ("B", sb, adapters[1])):
        note = None if side.scores is None else stale_note(side.scores.adapter_sha256, recorded)
        if note is not None:
            out.stale.append(f"{what}: {note}")
    if sa.scores is None and sb.scores is None:
        return out
    out.val = _val_moves(sa.scores, sb.scores)
    out.probes = _probe_moves(sa.scores, sb.scores)
    out.tasks = _task_moves(sa.scores, sb.scores)
    return out


def _val_moves(a: Scores | None, b: Scores | None) -> list[ValMove]:
    va = a.val if a is not None else None
    vb = b.val if b is not None else None
    if va is None and vb is None:
        return []
    out = []
    for key in VAL_KEYS:
        la, lb = (va or {}).get(key), (vb or {}).get(key)
        if la is None and lb is None:
            continue
        loss = Move(None if la is None else la.loss, None if lb is None else lb.loss)
        ppl = Move(None if la is None else la.perplexity, None if lb is None else lb.perplexity)
        out.append(ValMove(key, loss, ppl))
    return out


def _probe_moves(a: Scores | None, b: Scores | None) -> list[ProbeMove]:
    pa = {p.section_id: p for p in (a.probes if a else [])}
    pb = {p.section_id: p for p in (b.probes if b else [])}
    out = []
    for p in pa.values():
        q = pb.get(p.section_id)
        if q is None:
            out.append(ProbeMove(p.section_id, p.question, "removed", (p.exact_match, None), None))
        else:
            changed = p.generated != q.generated
            matches = (p.exact_match, q.exact_match)
            out.append(ProbeMove(p.section_id, q.question, "compared", matches, changed))
    out += [
        ProbeMove(q.section_id, q.question, "added", (None, q.exact_match), None)
        for q in pb.values()
        if q.section_id not in pa
    ]
    return out


def _task_moves(a: Scores | None, b: Scores | None) -> list[TaskMove]:
    ta, tb = (a.tasks if a else {}), (b.tasks if b else {})
    out = []
    for task in sorted(set(ta) | set(tb)):
        ma, mb = ta.get(task, {}), tb.get(task, {})
        out += [TaskMove(task, m, Move(ma.get(m), mb.get(m))) for m in sorted(set(ma) | set(mb))]
    return out


def stale_note(scored: str | None, recorded: str | None) -> str | None:
    """Why a record that scored adapter `scored` does not score the one its manifest
    records (`recorded`), if it does not."""
    if scored == recorded:
        return None
    named = (scored or "none named")[:16]
    return f"{EVAL_NAME} scores adapter {named}, not the one {MANIFEST_NAME} records"


# --------------------------------------------------------------------------- headline


class Headline(NamedTuple):
    """What `log` shows of an entry's `eval.json`: val overall loss, probes matched."""

    state: State
    val_loss: float | None = None
    matched: int | None = None
    probes: int | None = None
    problem: str | None = None
    adapter_sha256: str | None = None
    """The adapter the record says it scored."""


def headline(data: bytes | None) -> Headline:
    side = read_side(data)
    s = side.scores
    if s is None:
        return Headline(side.state, problem=side.problem)
    overall = s.val.get("overall") if s.val is not None else None
    loss = overall.loss if overall is not None else None
    return Headline(side.state, loss, s.matched, len(s.probes), None, s.adapter_sha256)


# --------------------------------------------------------------------------- JSON form


def move_json(m: Move) -> dict[str, float | None]:
    return {"from": m.old, "to": m.new, "change": m.change}


def scores_json(d: ScoresDiff) -> dict[str, Any]:
    """`scores` of a document in `diff --json` (docs/history.md documents every key)."""
    return {
        "from": d.states[0],
        "to": d.states[1],
        "problems": d.problems,
        "stale": d.stale,
        "val": [
            {"key": v.key, "loss": move_json(v.loss), "perplexity": move_json(v.perplexity)}
            for v in d.val
        ],
        "probes": [
            {
                "section_id": p.section_id,
                "question": p.question,
                "status": p.status,
                "exact_match": {"from": p.exact_match[0], "to": p.exact_match[1]},
                "generated_changed": p.generated_changed,
            }
            for p in d.probes
        ],
        "tasks": [{"task": t.task, "metric": t.metric, **move_json(t.value)} for t in d.tasks],
    }
