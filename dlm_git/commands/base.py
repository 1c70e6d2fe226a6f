"""`dlm-git base build|list|resolve|show`: build a base (builtin:tiny, or a published
architecture with random weights) offline, and resolve and show any base's identity."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Argument, Group, Option
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.output import echo, emit_json

base_app = Group(
    help=(
        "Bases: build one offline (builtin:tiny, or a published architecture such as"
        " smollm2-135m, with random weights: `base list`), and"
        " resolve or show the identity of any base (builtin:tiny, hf:<org>/<name>@<rev>,"
        " a registry key, a local directory)."
    ),
)


@base_app.command("build")
def build(
    name: Annotated[
        str, Argument(metavar="NAME", help="tiny (default) or an architecture from `base list`.")
    ] = "tiny",
    out: Annotated[Path | None, Option("--out", help="Directory to build the base into.")] = None,
    hf_cache: Annotated[
        Path | None,
        Option(
            "--hf-cache",
            help="Also install it into this Hugging Face cache root (models--org--name/...).",
        ),
    ] = None,
    repo_id: Annotated[
        str | None,
        Option("--repo-id", help="org/name in the cache (default: dlm-git-random/NAME)."),
    ] = None,
    layers: Annotated[
        int | None, Option("--layers", help="Fewer decoder layers (a quick shape).")
    ] = None,
    vocab: Annotated[
        int | None, Option("--vocab", help="Another config vocab_size (a quick shape).")
    ] = None,
) -> None:
    """Build a base deterministically: builtin:tiny, or a published architecture with
    random weights (see `base list`); a no-op where the destination holds this build."""
    if name == "tiny":
        if out is None or hf_cache is not None or repo_id or layers or vocab:
            raise UsageError(
                "base build", "the tiny base takes --out DIR only", "dlm-git base build --out DIR"
            )
        _build_tiny(out, from_cache=False)
        return
    if out is None and hf_cache is None:
        raise UsageError(
            "base build", "nothing to build into", "give --out DIR and/or --hf-cache ROOT"
        )
    if repo_id is not None and hf_cache is None:
        raise UsageError("base build", "--repo-id names a repository in --hf-cache ROOT")
    _pin_numerics()
    from dlm_git.base.build import Shape, build_base, family_named

    built = build_base(family_named(name), Shape(layers, vocab), out, hf_cache, repo_id)
    if built.out is not None:
        echo(f"{built.out}: {name} (revision {built.revision})")
    if built.snapshot is not None:
        echo(f"{built.snapshot}: hf:{built.repo_id}@{built.revision}")


def _build_tiny(out: Path, *, from_cache: bool) -> None:
    """The tiny base into `out`: the pipeline's stage (`from_cache`) copies the base cache's
    build (`install_tiny_dir`); `base build` builds it here, a check of that cache."""
    from dlm_git.base.errors import BaseNotAvailableError
    from dlm_git.base.tiny import build_tiny_base, check_tiny_dir, install_tiny_dir

    try:
        check_tiny_dir(out)
        echo(f"{out}: tiny base up to date")
        return
    except BaseNotAvailableError:
        pass
    from dlm_git.base.build import check_replaceable

    check_replaceable(out)
    _pin_numerics()
    (install_tiny_dir if from_cache else build_tiny_base)(out)
    echo(f"{out}: built tiny base")


def _pin_numerics() -> None:
    """Draw the random weights in the kernels this machine's default profile pins (the
    same draw on every x86-64 machine), when torch has not started yet."""
    from dlm_git.numerics.activate import activate, can_run_in_process
    from dlm_git.numerics.plan import plan

    try:
        env = plan("cpu").env
    except DlmGitError:  # no profile runs here: the build is still deterministic here
        return
    if can_run_in_process(env):
        activate(env)


@base_app.command("list")
def list_families(
    as_json: Annotated[bool, Option("--json", help="Machine-readable.")] = False,
) -> None:
    """The architectures `base build` makes, with their published shapes."""
    from dlm_git.base.families import FAMILIES

    rows = [
        {
            "name": f.name,
            "source": f.source,
            "model_type": f.model_type,
            "layers": f.config["num_hidden_layers"],
            "hidden_size": f.config["hidden_size"],
            "vocab_size": f.config["vocab_size"],
            "chat_template": f.chat_template is not None,
            "notes": f.notes,
        }
        for f in FAMILIES.values()
    ]
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        echo(
            f"{r['name']:<20}{r['model_type']:<10}{r['layers']:>3} layers"
            f"  hidden {r['hidden_size']:<5} vocab {r['vocab_size']:<7} {r['source']}"
        )


@base_app.command("resolve")
def resolve(
    doc: Annotated[Path, Argument(metavar="DOC", help="The .dlm file, or its directory.")],
    tiny_dir: Annotated[
        Path | None, Option("--tiny-dir", help="Build builtin:tiny here if the document uses it.")
    ] = None,
) -> None:
    """Resolve DOC's base (building builtin:tiny only if DOC uses it) and write its identity
    to base.json beside DOC: the pipeline's dependency on the base."""
    from dlm_git.base.resolve import resolve_base
    from dlm_git.base.spec import parse_base_spec
    from dlm_git.doc.load import load_document
    from dlm_git.fsutil import atomic_write_bytes
    from dlm_git.hashing import canonical_json

    loaded = load_document(doc)
    spec = loaded.doc.frontmatter.base_model
    where = loaded.base_model_at
    if parse_base_spec(spec, where).kind == "builtin" and tiny_dir is not None:
        _build_tiny(tiny_dir, from_cache=True)
    resolved = resolve_base(spec, loaded.doc.directory, loaded.repo_root, tiny_dir, where=where)
    ident = resolved.identity
    record = canonical_json(
        {
            "spec": spec,
            "kind": resolved.spec.kind,
            "revision": ident.revision,
            "tensor_root": ident.tensor_root,
            "tokenizer_sha256": ident.tokenizer_sha256,
            "config_sha256": ident.config_sha256,
            "weight_files": list(ident.weight_files),
        }
    )
    path = loaded.layout.base_record
    if not path.is_file() or path.read_bytes() != record:
        atomic_write_bytes(path, record)
    echo(f"{path}: {spec} ({ident.revision or 'no revision'}, {ident.tensor_root[:16]})")


@base_app.command("show")
def show(
    spec: Annotated[str, Argument(metavar="SPEC", help="A base_model value.")] = "builtin:tiny",
    tiny_dir: Annotated[
        Path | None, Option("--tiny-dir", help="Built tiny base directory.")
    ] = None,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
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
        "config_sha256": ident.config_sha256,
        "weight_files": list(ident.weight_files),
    }
    if as_json:
        emit_json(report)
        return
    for key, value in report.items():
        echo(f"{key:<18}{value}")
