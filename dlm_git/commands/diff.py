"""`dlm-git diff [A] [B] [--doc PATH] [--fetch] [--json] [--forgetting [--tiny-dir DIR]]`:
what changed between two adapters, everything that made them and their scores (A defaults
to HEAD, B to the work tree)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from dlm_git.clidecl import Argument, Option
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:
    from dlm_git.docat import TreeAt
    from dlm_git.history.diff import DocDiff, TrainingDiff
    from dlm_git.history.scores import Move, ScoresDiff
    from dlm_git.history.tensors import GroupDelta
    from dlm_git.verify.fetch import FetchFrom

TOP_TENSORS = 8
TOP_GROUPS = 6


def diff(
    a: Annotated[str | None, Argument(metavar="A", help="A commit (default: HEAD).")] = None,
    b: Annotated[
        str | None, Argument(metavar="B", help="A commit (default: the work tree).")
    ] = None,
    doc: Annotated[
        Path | None, Option("--doc", help="Only this document (file or directory).")
    ] = None,
    fetch: Annotated[
        bool,
        Option("--fetch", help="Fetch adapters the DVC cache lacks from this work tree's remote."),
    ] = False,
    remote: Annotated[
        str | None,
        Option(
            "--remote",
            help="With --fetch: fetch from this remote of your own DVC config (.dvc/config.local,"
            " global or system), not the default the checked-out .dvc/config may set.",
        ),
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
    forgetting: Annotated[
        bool,
        Option(
            "--forgetting",
            help="Also score B's adapter on A's held-out rows beside A's (loads the models).",
        ),
    ] = False,
    tiny_dir: Annotated[
        Path | None,
        Option("--tiny-dir", help="With --forgetting: the built builtin:tiny base directory."),
    ] = None,
) -> None:
    """Show what changed for each document: inputs, lock, adapter tensors, training,
    scores (eval.json)."""
    from dlm_git.docat import doc_rel
    from dlm_git.errors import UsageError
    from dlm_git.gitio import toplevel
    from dlm_git.history.diff import diff_sides, to_json
    from dlm_git.history.sides import describe, resolve_side
    from dlm_git.verify.fetch import fetch_from

    if tiny_dir is not None and not forgetting:
        raise UsageError("diff", "--tiny-dir is for --forgetting", "add --forgetting")
    root = toplevel(Path.cwd())
    source = fetch_from(root, fetch, remote, "diff")
    with resolve_side(root, a or "HEAD") as side_a, resolve_side(root, b) as side_b:
        only = doc_rel(root, doc, "diff") if doc is not None else None
        if only is not None and only not in {*side_a.documents(), *side_b.documents()}:
            raise UsageError("diff", f"{doc}: no document on either side", "check --doc")
        diffs = diff_sides(side_a, side_b, only, source)
        if forgetting:
            _forgetting(side_a, side_b, diffs, source, tiny_dir)
        heading = f"diff {describe(side_a)} -> {describe(side_b)}"
        if as_json:
            emit_json(to_json(side_a, side_b, diffs))
            return
    echo(heading)
    for d in diffs:
        for line in render(d):
            echo(line)  # names, first lines and values are the commits' text


def _forgetting(
    a: TreeAt, b: TreeAt, diffs: list[DocDiff], source: FetchFrom | None, tiny: Path | None
) -> None:
    import tempfile

    from dlm_git.history.forgetting import Forgetting, forgetting

    for d in diffs:
        if d.status in ("added", "removed"):
            d.forgetting = Forgetting(skipped="the document is not on both sides")
            continue
        with tempfile.TemporaryDirectory(prefix="dlm-git-forgetting-") as tmp:
            d.forgetting = forgetting(a, b, d.doc, Path(tmp), source, tiny)


def render(d: DocDiff) -> list[str]:
    """A document's diff as terminal lines (the JSON form holds everything)."""
    lines = [f"{d.doc}: {d.status}"]
    if d.status == "unchanged":
        return lines
    lines += _inputs(d)
    lines += [
        f"  lock     {f.severity:<5} {f.field}: {_brief(f.old)} -> {_brief(f.new)}"
        for f in d.lock.findings
    ]
    lines += [f"  lock     ({why})" for why in d.lock.unavailable if d.status == "changed"]
    lines += _adapter(d)
    lines += _training(d)
    lines += scores_lines(d.scores)
    lines += _forgetting_lines(d)
    return lines


def _inputs(d: DocDiff) -> list[str]:
    from dlm_git.history.settings import origin_note

    i = d.inputs
    out = [f"  section  + {s.type:<11} {s.id}  {s.first_line}" for s in i.sections_added]
    out += [f"  section  - {s.type:<11} {s.id}  {s.first_line}" for s in i.sections_removed]
    out += [
        f"  section  ~ {e.type:<11} {e.from_id} -> {e.to_id}  {e.first_line}"
        for e in i.sections_edited
    ]
    out += [f"  source   + {p}" for p in i.sources_added]
    out += [f"  source   - {p}" for p in i.sources_removed]
    out += [f"  source   ~ {p}" for p in i.sources_changed]
    if i.base is not None:
        out.append(f"  base     {i.base.old} -> {i.base.new}")
    out += [f"  config   {c.key}: {c.old!r} -> {c.new!r}{origin_note(c)}" for c in i.config]
    out += [f"  config   (as written; a training refuses it: {why})" for why in i.refused]
    out += [f"  inputs   (not compared: {why})" for why in i.unavailable]
    return out


def _adapter(d: DocDiff) -> list[str]:
    ad = d.adapter
    if ad.identical:
        return [f"  adapter  identical ({(ad.to_sha256 or '')[:16]})"]
    out = [f"  adapter  {(ad.from_sha256 or '-')[:16]} -> {(ad.to_sha256 or '-')[:16]}"]
    out += [f"  adapter  (not compared: {why})" for why in ad.unavailable]
    delta = ad.delta
    if delta is None:
        return out
    for t in delta.tensors[:TOP_TENSORS]:
        out.append(f"    {_num(t.rel_l2)} rel L2  {t.max_abs:9.3g} max |d|  {short_name(t.name)}")
    if len(delta.tensors) > TOP_TENSORS:
        out.append(f"    ... {len(delta.tensors) - TOP_TENSORS} more tensors (--json has all)")
    out += [f"    + {short_name(n)}" for n in delta.added]
    out += [f"    - {short_name(n)}" for n in delta.removed]
    out += [f"    shape changed: {short_name(n)}" for n in delta.reshaped]
    if delta.modules:
        out.append(f"  by module  {_groups(delta.modules, '')}  (rel L2 of dW = alpha/r * B @ A)")
    if len(delta.layers) > 1:
        out.append(f"  by layer   {_groups(delta.layers, 'layer ')}")
    reasons = sorted({n.reason for n in delta.not_comparable})
    if reasons:
        n = len(delta.not_comparable)
        out.append(f"  not comparable  {n} module(s): {'; '.join(reasons[:3])}")
    return out


def _groups(groups: list[GroupDelta], prefix: str) -> str:
    """`q_proj 6.000e-01, ...`: a group's ΔW change, or "not comparable" (never a number
    made up for it)."""
    return ", ".join(
        f"{prefix}{g.group} {'not comparable' if g.rel_l2 is None else _num(g.rel_l2)}"
        for g in groups[:TOP_GROUPS]
    )


def _training(d: DocDiff) -> list[str]:
    """The recorded settings the inputs do not already show (derived or resolved values,
    a side whose inputs did not load), then steps and loss."""
    from dlm_git.history.settings import not_shown

    t = d.training
    said = [*d.inputs.config, *([d.inputs.base] if d.inputs.base else [])]
    out = [
        f"  trained  {c.key}: {_brief(c.old)} -> {_brief(c.new)}"
        for c in not_shown(t.settings, said)
    ]
    if t.steps == (None, None):
        return out
    out.append(f"  training steps {t.steps[0]} -> {t.steps[1]}, final loss {_loss(t)}")
    if t.common_steps and t.first_divergent_step is None:
        out.append(f"  loss     identical over {t.common_steps} common steps")
    elif t.common_steps:
        out.append(
            f"  loss     first differs at step {t.first_divergent_step};"
            f" max |d| {t.max_abs_delta:.4g} over {t.common_steps} common steps"
        )
    return out


_STATE = {"evaluated": "evaluated", "not_evaluated": "not evaluated", "malformed": "malformed"}
_PROBE = {"added": "+", "removed": "-"}


def scores_lines(s: ScoresDiff) -> list[str]:
    """Each side's `eval.json` against the other's: val by mode, probes, task metrics."""
    if s.states == ("not_evaluated", "not_evaluated"):
        return []
    out = []
    if s.states != ("evaluated", "evaluated"):
        out.append(f"  scores   A {_STATE[s.states[0]]}, B {_STATE[s.states[1]]}")
    out += [f"  scores   ({why})" for why in [*s.problems, *s.stale]]
    out += [
        f"  val      {v.key} loss {_move(v.loss)}, perplexity {_move(v.perplexity)}" for v in s.val
    ]
    for p in s.probes:
        match = f"exact match {_yes(p.exact_match[0])} -> {_yes(p.exact_match[1])}"
        if p.status == "compared":
            mark = "~" if p.generated_changed else "="
            answer = "answer changed" if p.generated_changed else "same answer"
            match += f", {answer}"
        else:
            mark = _PROBE[p.status]
        out.append(f"  probe    {mark} {p.section_id}  {match}  {_question(p.question)}")
    out += [f"  task     {t.task} {t.metric}: {_move(t.value)}" for t in s.tasks]
    return out


def _forgetting_lines(d: DocDiff) -> list[str]:
    """A's adapter against B's on A's held-out rows (`--forgetting` only)."""
    from dlm_git.history.scores import Move

    f = d.forgetting
    if f is None:
        return []
    if f.skipped is not None:
        return [f"  forgetting  (not scored: {f.skipped})"]
    shown = f.to_json()
    out = [
        f"  forgetting  A's held-out rows (val_fraction {shown['val_fraction']},"
        f" {shown['rows']} rows, {shown['tokens']} tokens): loss of A's adapter -> B's"
    ]
    for v in shown["val"]:
        loss = v["loss"]
        out.append(f"    {v['key']:<11} {_move(Move(loss['from'], loss['to']))}")
    return out


def _move(m: Move) -> str:
    change = m.change
    delta = "" if change is None else f" ({change:+.6f})"
    return f"{_float(m.old)} -> {_float(m.new)}{delta}"


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _question(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:57] + "..."


def _loss(t: TrainingDiff) -> str:
    a, b = t.final_loss
    return f"{_float(a)} -> {_float(b)}"


def _float(value: float | None) -> str:
    return "-" if value is None else f"{value:.6f}"


def _brief(value: object) -> str:
    """A lock value for a terminal: digests cut to 16 hex digits, long values to 60."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:16] + "…"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def short_name(name: str) -> str:
    """A tensor name for a terminal: peft's `base_model.model.` prefix and `.weight` off
    (the JSON form keeps the whole name)."""
    return name.removeprefix("base_model.model.").removesuffix(".weight")


def _num(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3e}"
