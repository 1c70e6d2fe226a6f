"""`dlm-git base build|show`: the built-in tiny base as a pipeline output, and base identity."""

from __future__ import annotations

from pathlib import Path

import typer

from dlm_git.output import emit_json

base_app = typer.Typer(
    help="Build the built-in tiny base or show a base's identity.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@base_app.command("build")
def build(
    out: Path = typer.Option(..., "--out", help="Directory to build the tiny base into."),
) -> None:
    """Build builtin:tiny into OUT; a no-op if OUT already holds the current spec's build."""
    from dlm_git.base.errors import BaseNotAvailableError
    from dlm_git.base.tiny import build_tiny_base, check_tiny_dir

    try:
        check_tiny_dir(out)
        typer.echo(f"{out}: tiny base up to date")
        return
    except BaseNotAvailableError:
        pass
    build_tiny_base(out)
    typer.echo(f"{out}: built tiny base")


@base_app.command("show")
def show(
    spec: str = typer.Argument("builtin:tiny", metavar="SPEC", help="A base_model value."),
    tiny_dir: Path = typer.Option(None, "--tiny-dir", help="Built tiny base directory."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Resolve SPEC and print its identity (revision, tensor root, tokenizer sha256)."""
    from dlm_git.base.resolve import resolve_base

    resolved = resolve_base(spec, Path.cwd(), Path.cwd(), tiny_dir)
    ident = resolved.identity
    report = {
        "spec": spec,
        "path": str(resolved.path),
        "revision": ident.revision,
        "tensor_root": ident.tensor_root,
        "tokenizer_sha256": ident.tokenizer_sha256,
        "weight_files": list(ident.weight_files),
    }
    if as_json:
        emit_json(report)
        return
    for key, value in report.items():
        typer.echo(f"{key:<18}{value}")
