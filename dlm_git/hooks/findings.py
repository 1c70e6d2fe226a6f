"""Hook findings: one line each, `dlm-git: ERROR <doc>: <what> (<how to fix>)`.

Invariant: a hook writes to stderr only through `dlm_git.output.error_line`, so a
document name, file name or value from the commit reaches the terminal escaped
(`printable`), one finding per line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from dlm_git import gitio
from dlm_git.lock.policy import strict_severity
from dlm_git.output import error_line

Level = Literal["ERROR", "WARN"]


@dataclass(frozen=True)
class HookFinding:
    level: Level
    doc: str
    check: str
    what: str
    fix: str

    def line(self) -> str:
        return f"dlm-git: {self.level} {self.doc}: {self.what} ({self.fix})"


def strict_upgrade(findings: list[HookFinding], strict: bool) -> list[HookFinding]:
    """Strict mode over every finding, by the lock policy's one rule."""
    upgraded: list[HookFinding] = []
    for f in findings:
        level = strict_severity(f.level, strict)
        upgraded.append(replace(f, level="ERROR" if level == "ERROR" else "WARN"))
    return upgraded


def summary(findings: list[HookFinding], docs: int, action: str = "commit") -> str:
    """The last line: counts, and `<action> refused` when there is an ERROR."""
    errors = sum(1 for f in findings if f.level == "ERROR")
    warns = sum(1 for f in findings if f.level == "WARN")
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
    untrusted signatures (docs/signing.md)."""
    value = gitio.config_get("dlm-git.requireSignature", root) or ""
    return value.lower() in ("1", "true", "yes", "on")


def strict_mode(root: Path) -> bool:
    """`DLM_GIT_STRICT=1` in the environment, or `git config dlm-git.strict true`."""
    if gitio.env_flag("DLM_GIT_STRICT"):
        return True
    return (gitio.config_get("dlm-git.strict", root) or "").lower() in ("1", "true", "yes", "on")
