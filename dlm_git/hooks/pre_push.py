"""The pre-push hook: hash-level `verify` of every commit tip being pushed.

git feeds `<local ref> <local sha> <remote ref> <remote sha>` lines on stdin (the
pre-commit framework instead sets `PRE_COMMIT_TO_REF` or `PRE_COMMIT_LOCAL_BRANCH`). A tip whose
verification FAILS refuses the push; one that CANNOT be verified here (adapter not in the
local DVC cache, base not available) warns, or refuses under strict mode
(`DLM_GIT_STRICT=1` / `git config dlm-git.strict true`, its one rule `Severity.strict`).
Never imports torch or dvc.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dlm_git import gitio
from dlm_git.errors import UsageError
from dlm_git.hooks.entry import run_hook
from dlm_git.hooks.findings import require_signature, strict_mode
from dlm_git.output import error_line
from dlm_git.severity import Severity

ZERO = "0" * 40


def pushed_tips(stdin: str) -> list[str]:
    tips = []
    for line in stdin.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] != ZERO and set(parts[1]) != {"0"}:
            tips.append(parts[1])
    return list(dict.fromkeys(tips))


FRAMEWORK_VARS = ("PRE_COMMIT_TO_REF", "PRE_COMMIT_LOCAL_BRANCH")


def framework_tips(root: Path) -> list[str]:
    """The commit being pushed when run by the pre-commit framework (`stages: [pre-push]`):
    it reads git's stdin itself and passes the local sha as `PRE_COMMIT_TO_REF`, or, for a
    push that carries the root commit, only the local ref as `PRE_COMMIT_LOCAL_BRANCH`."""
    to_ref = os.environ.get("PRE_COMMIT_TO_REF", "").strip()
    if to_ref:
        return [] if set(to_ref) == {"0"} else [to_ref]
    local = os.environ.get("PRE_COMMIT_LOCAL_BRANCH", "").strip()
    sha = gitio.resolve_commit(local, root) if local else None
    return [sha] if sha else []


def run(cwd: Path, stdin: str) -> int:
    from dlm_git.verify.commit import NoDocuments, is_params_report, verify_commit
    from dlm_git.verify.remote import adapter_objects
    from dlm_git.verify.report import Verdict

    root = gitio.toplevel(cwd)
    strict = strict_mode(root)
    signed = require_signature(root)
    errors = warnings = 0
    objects: dict[str, list[str]] = {}
    for sha in pushed_tips(stdin) or framework_tips(root):
        try:
            reports = verify_commit(root, sha, None, build_base=False, require_signature=signed)
        except NoDocuments:
            continue
        # a refused commit is refused already: only the ones that verify are asked after
        docs = [r.doc for r in reports if r.ok and not is_params_report(r)]
        for doc, md5s in adapter_objects(root, sha, docs).items():
            objects[f"{doc}@{sha[:12]}"] = md5s
        for r in reports:
            if r.ok:
                continue
            bad = r.first_failure()
            what = f"{bad.name}: {bad.detail}" if bad else r.verdict
            level = Severity.WARN if r.verdict == Verdict.CANNOT_VERIFY else Severity.ERROR
            level = level.strict(strict)
            errors += level is Severity.ERROR
            warnings += level is Severity.WARN
            error_line(
                f"dlm-git: {level} {r.doc}@{sha[:12]}: {r.verdict} ({what}) "
                f"(run `dlm-git verify {sha[:12]}` for details)"
            )
    e, w = check_remote(root, objects)
    errors, warnings = errors + e, warnings + w
    if errors or warnings:
        verdict = "push refused" if errors else "ok"
        error_line(f"dlm-git: {errors} error(s), {warnings} warning(s): {verdict}")
    return 1 if errors else 0


REMOTE_CHECK = "dlm-git.remoteCheck"
REMOTE_MODES = ("refuse", "warn", "off")


def check_remote(root: Path, objects: dict[str, list[str]]) -> tuple[int, int]:
    """(errors, warnings) of the remote check: a pushed commit whose adapter objects are not
    on the default DVC remote cannot be verified by anyone else. `git config
    dlm-git.remoteCheck refuse|warn|off` (default refuse); no DVC remote at all is a WARN."""
    mode = (gitio.config_get(REMOTE_CHECK, root) or "refuse").lower()
    if mode not in REMOTE_MODES:
        raise UsageError(f"git config {REMOTE_CHECK}", f"'{mode}' is not one of refuse, warn, off")
    if mode == "off" or not objects:
        return 0, 0
    from dlm_git.verify.remote import RemoteQueryError, default_remote, query_remote

    if default_remote(root) is None:
        error_line(
            "dlm-git: WARN no default DVC remote: the pushed adapters cannot be fetched by"
            " others (hint: dvc remote add -d NAME URL && dvc push)"
        )
        return 0, 1
    try:
        state = query_remote(root, objects)
    except RemoteQueryError as exc:  # not knowing is not "missing": say so, refuse nothing
        error_line(f"dlm-git: WARN {exc.one_line()}")
        return 0, 1
    level = "ERROR" if mode == "refuse" else "WARN"
    for where, md5s in state.missing.items():
        error_line(
            f"dlm-git: {level} {where}: {len(md5s)} adapter object(s) not on DVC remote"
            f" '{state.remote}' (hint: dvc push; or git config {REMOTE_CHECK} warn)"
        )
    n = len(state.missing)
    return (n, 0) if level == "ERROR" else (0, n)


def git_stdin() -> str:
    """git's ref lines. Ref names are bytes in any encoding (only the object ids are
    read), so they are decoded without failing; under the pre-commit framework stdin is
    not git's (it may be a terminal) and is not read."""
    if any(os.environ.get(name) for name in FRAMEWORK_VARS):
        return ""
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def main() -> int:
    return run_hook(lambda: run(Path(os.getcwd()), git_stdin()))


if __name__ == "__main__":
    sys.exit(main())
