"""`dlm-git doctor [--json]`: hardware tier, determinism class, flags and versions here."""

from __future__ import annotations

import typer

from dlm_git.output import emit_json


def doctor(
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or mps."),
    threads: int = typer.Option(
        0, "--threads", help="CPU threads (default: DLM_GIT_THREADS or 2)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show what a training run here would record in dlm.lock (tier, class, flags, versions)."""
    from dlm_git.determinism import prepare
    from dlm_git.train.run import pinned_versions

    env = prepare(0, device, threads or None)
    hw, flags, klass = env.hardware, env.flags, env.klass
    report = {
        "hardware_tier": hw.tier,
        "determinism_class": klass,
        "determinism_flags": flags,
        "hardware": hw.details,
        "pinned_versions": pinned_versions(),
    }
    if as_json:
        emit_json(report)
        return
    typer.echo(f"hardware tier       {hw.tier}")
    typer.echo(f"determinism class   {klass}")
    for key, value in sorted(hw.details.items()):
        typer.echo(f"  {key:<26}{value}")
    typer.echo("determinism flags")
    for key, value in sorted(flags.items()):
        typer.echo(f"  {key:<26}{value}")
    typer.echo("versions")
    for key, value in sorted(pinned_versions().items()):
        typer.echo(f"  {key:<26}{value}")
