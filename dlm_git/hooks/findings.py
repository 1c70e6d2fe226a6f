"""Hook findings: one line each, `dlm-git: ERROR <doc>: <check id>: <what> (<how to fix>)`.

Invariants:
- A finding is a check of the contract that did not pass, read through the check table
  (`finding_of`): its level is the row's severity for its state (or the one the check
  set), its fix the row's (or the check's own); a check at `IGNORE` says nothing.
- Every finding's line names its check by the table's stable id, as git fsck names its
  message ids (`error in commit X: badDate: ...`), so the key a user sets is read from
  the very line they meet.
- A user may set a check's commit-time severity as git fsck's are set:
  `git config dlm-git.<check id> error|warn|ignore` (`configured`, read once per run and
  only when there is a finding). Then strict mode turns every WARN into an ERROR by its
  one rule (`Severity.strict`, `dlm_git.severity`), once per hook run, over all findings
  (`pre_commit.run`). Neither touches `verify`, whose verdict comes from the checks'
  states alone.
- A hook writes to stderr only through `dlm_git.output.error_line`, so a document name,
  file name or value from the commit reaches the terminal escaped (`printable`), one
  finding per line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dlm_git import gitio
from dlm_git.contract.outcome import Check
from dlm_git.contract.table import RETRAIN, RULES, retrain_fix, rule, severity_of
from dlm_git.errors import DlmGitError
from dlm_git.output import error_line
from dlm_git.severity import Severity

DVC_YAML = "dvc.yaml"


@dataclass(frozen=True)
class HookFinding:
    level: Severity
    """ERROR or WARN (a check at IGNORE makes no finding)."""
    doc: str
    check: str
    """The check's stable id (a row of `contract.table.TABLE`)."""
    what: str
    fix: str

    def line(self) -> str:
        return f"dlm-git: {self.level} {self.doc}: {self.check}: {self.what} ({self.fix})"


def finding_of(doc: str, check: Check, pipeline: bool = True) -> HookFinding | None:
    """What a commit-time reader says of `check` of document `doc` (None: nothing);
    `pipeline`: the repository has a DVC pipeline (`has_pipeline`), which decides how a
    record is brought up to date (`contract.table.retrain_fix`)."""
    severity = severity_of(check)
    if severity is None or severity is Severity.IGNORE:
        return None
    fix = check.fix or _fix(check.name, doc, pipeline)
    return HookFinding(severity, doc, check.name, check.detail, fix)


def has_pipeline(root: Path) -> bool:
    """The repository has a DVC pipeline: a `dvc.yaml` at its root."""
    return (root / DVC_YAML).is_file()


def _fix(check: str, doc: str, pipeline: bool) -> str:
    if check.startswith("signature."):
        from dlm_git.sign.judge import fix_for

        return fix_for(check, doc)
    fix = rule(check).fix
    return retrain_fix(doc, pipeline) if fix == RETRAIN else fix


def configured(root: Path) -> dict[str, Severity]:
    """The severities set by `git config dlm-git.<check id> error|warn|ignore` (one git
    process); a value that is none of those is one line naming the key."""
    out = gitio.git(["config", "--get-regexp", r"^dlm-git\."], root, check=False)
    severities: dict[str, Severity] = {}
    for line in out.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        check = key.removeprefix("dlm-git.")
        if check not in RULES:
            continue  # another setting (strict, trustedKeys, ...)
        if value.strip().upper() not in Severity.__members__:
            raise DlmGitError(
                f"git config {key}",
                f"{value!r} is not error, warn or ignore",
                f"git config {key} error|warn|ignore",
            )
        severities[check] = Severity[value.strip().upper()]
    return severities


def configure(findings: list[HookFinding], severities: dict[str, Severity]) -> list[HookFinding]:
    """The findings at the severities the user set for their checks (IGNORE: dropped)."""
    out = []
    for f in findings:
        set_to = severities.get(f.check, f.level)
        if set_to is not Severity.IGNORE:
            out.append(replace(f, level=set_to))
    return out


def summary(findings: list[HookFinding], docs: int, action: str = "commit") -> str:
    """The last line: counts, and `<action> refused` when there is an ERROR."""
    errors = sum(1 for f in findings if f.level is Severity.ERROR)
    warns = sum(1 for f in findings if f.level is Severity.WARN)
    verdict = f"{action} refused" if errors else "ok"
    return f"dlm-git: {errors} error(s), {warns} warning(s) in {docs} document(s): {verdict}"


def emit(findings: list[HookFinding], docs: int, action: str = "commit") -> None:
    """Every finding, then the summary line (when there is a finding), to stderr."""
    for f in findings:
        error_line(f.line())
    if findings:
        error_line(summary(findings, docs, action))


def require_signature(root: Path) -> bool:
    """`git config dlm-git.requireSignature true`: hooks refuse unsigned, stale or
    untrusted signatures (docs/signing.md). Read as git reads a boolean."""
    return gitio.config_bool("dlm-git.requireSignature", root) is True


def strict_mode(root: Path) -> bool:
    """`DLM_GIT_STRICT=1` in the environment, or `git config dlm-git.strict true`."""
    if gitio.env_flag("DLM_GIT_STRICT"):
        return True
    return gitio.config_bool("dlm-git.strict", root) is True
