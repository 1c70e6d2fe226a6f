"""`dlm-git doctor [--json]`: the numerics profile, what it pins, whether this machine can
run it, and what a training run here would record in dlm.lock."""

from __future__ import annotations

from typing import Annotated, Any

from dlm_git.clidecl import Exit, Option
from dlm_git.output import echo, emit_json


def doctor(
    device: Annotated[str, Option("--device", help="auto, cpu, cuda or mps.")] = "auto",
    threads: Annotated[
        int | None, Option("--threads", help="CPU threads (default: DLM_GIT_THREADS or 2).")
    ] = None,
    numerics_name: Annotated[
        str | None,
        Option("--numerics", help="The profile to check (default: the device's default)."),
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the numerics profile, its pins, whether it runs here, and the lock it records."""
    from dlm_git.numerics.plan import plan
    from dlm_git.numerics.prepare import prepare
    from dlm_git.numerics.probe import describe, diagnosis
    from dlm_git.numerics.table import PROFILES, NumericsError
    from dlm_git.versions import pinned_versions

    report: dict[str, Any] = {"machine": diagnosis()}
    try:  # first: the profile's variables must be set before torch is imported
        env = prepare(0, plan(device, numerics_name), threads)
    except NumericsError as exc:
        report["error"] = exc.one_line()
        report["profiles"] = [describe(p) for p in PROFILES.values()]
        _show(report, as_json)
        raise Exit(1) from None
    report["profiles"] = [describe(p) for p in PROFILES.values()]
    report.update(
        {
            "numerics": describe(env.profile),
            "hardware_tier": env.hardware.tier,
            "determinism_class": env.klass,
            "determinism_flags": env.flags,
            "hardware": env.hardware.details,
            "pinned_versions": pinned_versions(),
        }
    )
    _show(report, as_json)


def _show(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(report)
        return
    if "numerics" in report:
        p = report["numerics"]
        echo(f"numerics profile    {p['name']}: {p['summary']}")
        for key, value in sorted(p["pins"].items()):
            echo(f"  pins {key:<21}{value}")
        echo(f"hardware tier       {report['hardware_tier']}")
        echo(f"determinism class   {report['determinism_class']}")
    echo("profiles on this machine")
    for p in report["profiles"]:
        state = "runs here" if p["runnable_here"] else f"cannot run here: {p['why_not']}"
        portable = "portable" if p["portable"] else "this machine only"
        echo(f"  {p['name']:<12}{p['device']:<6}{portable:<19}{state}")
    echo("machine (diagnosis, not drift under a pinned profile)")
    for key, value in sorted(report["machine"].items()):
        echo(f"  {key:<26}{value}")
    if "error" in report:
        echo(f"error: {report['error']}", err=True)
        return
    echo("determinism flags (recorded in dlm.lock)")
    for key, value in sorted(report["determinism_flags"].items()):
        echo(f"  {key:<26}{value}")
    echo("versions")
    for key, value in sorted(report["pinned_versions"].items()):
        echo(f"  {key:<26}{value}")
