"""The pre-commit hook: the contract's check list on what is staged.

What is staged is read from the two listings the checks take anyway (`staged_in`: the
index's `ls-files -s -z` against HEAD's `ls-tree -r`, the paths `git diff-index --cached`
names), so the hook's git children are `rev-parse`, the two listings, one `cat-file
--batch` and the configuration it needs (issue 28).

Documents are found from one `ls-files -s -z` of the whole index (`docat.TreeAt`, by the
one `dlm_git.docset` rule): params.yaml's `documents:`, every `.dlm` beside records and
every dlm.lock, listed or not, and every staged `.dlm`. Every document the staged change
concerns (a staged path in its directory or its source directories, or a staged dvc.lock
that records its adapter differently from HEAD's) is read as the *index* has it (git sets
`GIT_INDEX_FILE` for `git commit -a` / `git commit <path>`, and every read here goes
through git's plumbing, which honours it) and judged by the check list of
`dlm_git.contract` (each check with its stable id and its severity:
`contract.table.TABLE`, docs/hooks.md), through `hooks.staged.StagedChecks`; plus
`pipeline.documents` for the documents concerned (and params.yaml's own problems when it
is staged), and `docset.dlm_id` over every `.dlm` of the index when a `.dlm` is
staged. The pre-merge-commit hook runs the same checks on a merge's result
(`run(action="merge")`). Each finding is one line naming its check id
(`hooks.findings`). Strict mode (`DLM_GIT_STRICT=1` or `git config dlm-git.strict true`)
makes every WARN an ERROR by its one rule (`Severity.strict`), once, over all findings,
after the severities a user set per check (`git config dlm-git.<check id>
error|warn|ignore`). Never imports torch, transformers, peft or dvc.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import yaml

from dlm_git import gitio, statedir
from dlm_git.contract.outcome import Check, Outcome
from dlm_git.docat import DocAt, Rev, TreeAt, prefix_of
from dlm_git.docset import CHECK, FIX_PARAMS, PARAMS_NAME, assess
from dlm_git.dvcfiles import find_out_in, stages_naming
from dlm_git.hooks.entry import run_hook
from dlm_git.hooks.findings import (
    HookFinding,
    configure,
    configured,
    emit,
    finding_of,
    has_pipeline,
    strict_mode,
)
from dlm_git.hooks.staged import StagedChecks, within
from dlm_git.layout import ADAPTER_DIR, EVAL_NAME
from dlm_git.severity import Severity


def discover(index: TreeAt, staged: list[str]) -> list[str]:
    """Document directories, as the index has them (`TreeAt.documents`), then every
    directory with a staged `.dlm`."""
    new = [posixpath.dirname(p) or "." for p in staged if p.endswith(".dlm")]
    return list(dict.fromkeys([*index.documents(), *new]))


def touched(
    doc: DocAt,
    staged: list[str],
    record_changed: Callable[[DocAt], bool] | None = None,
    params_changed: Callable[[DocAt], bool] | None = None,
) -> bool:
    """Whether the staged change concerns the document: a staged path in its directory or
    its source directories, a staged dvc.lock (when `record_changed` is given: only if
    the dvc.lock record of its adapter changed), or a staged params.yaml that changed
    its `docs.<doc>` entry (`params_changed`), or a staged path that is, holds or lies
    under a task file its staged `eval.json` names (a task shared from outside its
    directory: `eval.binding` binds it)."""
    if any(within(p, d) for d in [doc.rel, *doc.source_dirs] for p in staged):
        return True
    if params_changed is not None and PARAMS_NAME in staged and params_changed(doc):
        return True
    if "dvc.lock" in staged and (record_changed is None or record_changed(doc)):
        return True
    return any(within(p, t) or within(t, p) for t in _task_paths(doc) for p in staged)


def _task_paths(doc: DocAt) -> list[str]:
    """The repository paths the document's `eval.json` (in its tree) has its tasks name."""
    from dlm_git.verify.evalbinding import named_paths

    name = doc.prefix + EVAL_NAME
    data = doc.tree.read([name]).get(name)
    return named_paths(data) if data is not None else []


def doc_params_changed(index: TreeAt, head: TreeAt | None) -> Callable[[DocAt], bool]:
    """Whether the index's params.yaml sets a document's `docs.<doc>` (its training
    overrides, check `params.training`) otherwise than HEAD's."""

    def changed(doc: DocAt) -> bool:
        before = head.params.docs if head is not None else {}
        return bool(index.params.docs.get(doc.rel) != before.get(doc.rel))

    return changed


def adapter_record_changed(index: bytes | None, head: bytes | None) -> Callable[[DocAt], bool]:
    """Whether the staged dvc.lock (`index`) records a document's adapter differently from
    HEAD's: the same stage text is not parsed at all."""

    def changed(doc: DocAt) -> bool:
        if index is None or head is None:
            return index is not head
        path = prefix_of(doc.rel) + ADAPTER_DIR
        try:
            stages = stages_naming(index, path)
            if stages and stages == stages_naming(head, path):
                return False  # the same text records it: nothing to parse
            return find_out_in(index, path) != find_out_in(head, path)
        except (ValueError, yaml.YAMLError, UnicodeDecodeError):
            return True  # let the check say what is wrong with it

    return changed


def pipeline_findings(
    index: TreeAt, rels: list[str], staged: list[str], concerned: set[str]
) -> list[HookFinding]:
    """`pipeline.documents` (see `dlm_git.docset`) as the index has it: params.yaml's own
    problems (only when it is staged) and, per document directory of `rels`, whether it
    agrees with the list (all of them when params.yaml is staged, else the `concerned`)."""
    params, out = index.params, []
    if PARAMS_NAME in staged and params.problems:
        what = "; ".join(p for _, p in params.problems)
        out.append(HookFinding(Severity.ERROR, PARAMS_NAME, CHECK, what, FIX_PARAMS))
    for rel in rels:
        if PARAMS_NAME not in staged and rel not in concerned:
            continue
        ok, detail, fix = assess(params, index.tree, rel)
        found = finding_of(rel, Check(CHECK, Outcome.OK if ok else Outcome.FAILED, detail, fix=fix))
        out += [found] if found is not None else []
    return out


def id_findings(index: TreeAt, staged: list[str]) -> list[HookFinding]:
    """`docset.dlm_id` over every `.dlm` of the index, only when a `.dlm` is staged:
    otherwise the ids are HEAD's, judged when HEAD was committed (`verify` and the
    pre-push hook judge every commit whole)."""
    if not any(p.endswith(".dlm") for p in staged):
        return []
    from dlm_git.contract.dlm_ids import id_check, shared_in

    shared = shared_in(index)
    found = [finding_of(rel, id_check(rel, shared)) for rel in sorted(shared)]
    return [f for f in found if f is not None]


@contextlib.contextmanager
def _trees(root: Path, head: str | None) -> Iterator[tuple[TreeAt, TreeAt | None]]:
    """The index and HEAD's tree (None before the first commit), each listed lazily."""
    with TreeAt(root, Rev.INDEX) as index:
        if head is None:
            yield index, None
            return
        with TreeAt(root, head, "HEAD", share=index) as at_head:
            yield index, at_head


def staged_in(index: TreeAt, at_head: TreeAt | None) -> list[str]:
    """The staged paths: every path whose index entry (mode, object id) differs from
    HEAD's or is on one side only (every index entry before the first commit), in git's
    order (by bytes). What `git diff-index --cached --name-only` names (`gitio.staged_paths`,
    which tests hold it to), read from the two listings the checks take anyway, so it
    costs no git process of its own. An unmerged path (index stages 1-3, which the
    listing leaves out) counts only where HEAD has it: git refuses such a commit before
    any hook runs. A listing git would not write (`TreeAt.in_git_order`: a tree or an
    index made by hand to name a path twice or out of order) adds git's own answer, so
    a path the commit rewrites is never missed."""
    theirs = at_head.entries if at_head is not None else {}
    paths = {p for p, _ in index.entries.items() ^ theirs.items()}  # on one side only
    if not all(tree.in_git_order for tree in (index, at_head) if tree is not None):
        head = str(at_head.where) if at_head is not None else None
        paths.update(gitio.staged_paths(index.root, head=head))
    return sorted(paths, key=lambda p: p.encode("utf-8", "surrogateescape"))


def collect(root: Path, head: str | None) -> tuple[list[HookFinding], int]:
    """Every finding about the staged change (strict mode not applied yet), and how many
    documents it concerns (nothing staged: none)."""
    with _trees(root, head) as (index, at_head):
        staged = staged_in(index, at_head)
        return judge(root, head, staged, index, at_head) if staged else ([], 0)


def judge(
    root: Path, head: str | None, staged: list[str], index: TreeAt, at_head: TreeAt | None
) -> tuple[list[HookFinding], int]:
    """`collect`, on the index and HEAD's tree (`_trees`) already open."""
    rels = discover(index, staged)
    changed = adapter_record_changed(index.dvc_lock, at_head.dvc_lock if at_head else None)
    moved = doc_params_changed(index, at_head)
    docs = index.docs(rels, keep=lambda d: touched(d, staged, changed, moved))
    heads = {d.rel: d for d in at_head.docs([d.rel for d in docs])} if at_head and docs else {}
    symlinks = index.symlinks([d for doc in docs for d in (doc.rel, *doc.source_dirs)])
    checker = StagedChecks(root, staged, symlinks, head)
    concerned = {d.rel for d in docs}
    findings = pipeline_findings(index, rels, staged, concerned)
    findings += id_findings(index, staged)
    pipeline = has_pipeline(root)
    for doc in docs:
        for check in checker.check(doc, heads.get(doc.rel)):
            found = finding_of(doc.rel, check, pipeline)
            findings += [found] if found is not None else []
    checker.hashes.save()
    return findings, len(concerned | {f.doc for f in findings if f.doc != PARAMS_NAME})


def run(cwd: Path, action: str = "commit") -> int:
    """Check the index against HEAD; `action` names what an ERROR refuses ("commit", or
    "merge" for the pre-merge-commit hook, where the index holds the merge result)."""
    root, head, state = gitio.toplevel_and_head(cwd, also=statedir.ASK)
    statedir.learn(root, cwd, state)  # the hash cache's directory: no git process of its own
    findings, counted = collect(root, head)
    if findings:  # the user's severities are read only when there is something to say
        findings = configure(findings, configured(root))
    if not counted and not findings:
        return 0
    if any(f.level is Severity.WARN for f in findings):  # strict mode: read when it matters
        on = strict_mode(root)
        findings = [replace(f, level=f.level.strict(on)) for f in findings]
    emit(findings, counted, action)
    return 1 if any(f.level is Severity.ERROR for f in findings) else 0


def main(action: str = "commit") -> int:
    return run_hook(lambda: run(Path(os.getcwd()), action))


if __name__ == "__main__":
    sys.exit(main())
