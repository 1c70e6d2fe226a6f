"""Resolve a base spec to a directory on this machine, and compute the base's identity.

Invariants:
- Nothing here touches the network: `hf:` bases come from the local Hugging Face cache
  (`HF_HUB_CACHE`, `HF_HOME/hub`, or `~/.cache/huggingface/hub`) only.
- A base's identity is (revision, tensor root of its safetensors weights, sha256 of
  every file transformers' tokenizer loader reads, sha256 of its `config.json`). The
  tensor root covers every tensor of every `*.safetensors` file; weights in pickle
  formats are refused, never loaded. The config is part of it because it changes the
  model as much as a weight does (an activation, a norm epsilon, a rope setting).
- `locate_base` never builds or loads anything (cheap, used by `show`);
  `resolve_base` builds the tiny base if needed; the weights are hashed on first use of
  `ResolvedBase.identity` (training, verify) — once per weight file while its stat is
  unchanged (`base/digests.py`) — and the tokenizer files on first use of
  `ResolvedBase.tokenizer_sha256` (tokenizing needs nothing more).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from dlm_git.base.errors import BaseModelError, BaseNotAvailableError
from dlm_git.base.spec import REV_RE, BaseSpec, parse_base_spec
from dlm_git.base.tiny import (
    SPEC_FILE,
    ensure_tiny_base,
    ensure_tiny_dir,
    tiny_dir,
    tiny_spec_hash,
)
from dlm_git.errors import missing_stack_module
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, read_regular
from dlm_git.hashing import (
    TensorDigest,
    canonical_json_sha256,
    sha256_file,
    tensor_root,
)
from dlm_git.paths import utf8_name
from dlm_git.safeparse import load_json

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
CHAT_TEMPLATE_DIR = "additional_chat_templates"
"""transformers' folder of named chat templates: it reads every `*.jinja` entry there on
load (`default.jinja` replaces tokenizer_config.json's template), so each is a tokenizer
file too, named `additional_chat_templates/<name>` in the digest."""


CONFIG_FILE = "config.json"


class BaseIdentity(NamedTuple):
    revision: str | None
    tensor_root: str
    tokenizer_sha256: str
    weight_files: tuple[str, ...]
    config_sha256: str | None = None
    """sha256 of `config.json` (None: the base has none)."""
    tokenizer_sha256_untemplated: str | None = None
    """The tokenizer digest without `CHAT_TEMPLATE_DIR` (the rule before it was hashed);
    None: the base has no template there, and the two digests are one."""


class LocatedBase(NamedTuple):
    spec: BaseSpec
    path: Path | None
    """Where the weights are (or would be built, for builtin); None if unknown."""
    available: bool
    revision: str | None
    note: str


@dataclass(frozen=True)
class ResolvedBase:
    spec: BaseSpec
    path: Path
    revision: str | None

    @functools.cached_property
    def tokenizer(self) -> TokenizerDigest:
        """Hashes the tokenizer files only: all that tokenizing (and its cache) depends on."""
        return tokenizer_digest(self.path)

    @property
    def tokenizer_sha256(self) -> str:
        return self.tokenizer.sha256

    @functools.cached_property
    def identity(self) -> BaseIdentity:
        """Hashes every weight tensor (seconds to minutes for a real base), so it is computed
        on first use: by training and verify, never by tokenizing."""
        return base_identity(self.path, self.revision, self.tokenizer)


def hf_cache_root() -> Path:
    return hf_cache_setting()[0]


def hf_cache_setting() -> tuple[Path, str]:
    """The Hugging Face cache root and the setting it came from (for messages)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]), "HF_HUB_CACHE"
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub", "HF_HOME/hub"
    default = Path.home() / ".cache" / "huggingface" / "hub"
    return default, "the default (neither HF_HUB_CACHE nor HF_HOME is set)"


def _hf_repo_dir(repo_id: str) -> Path:
    return hf_cache_root() / ("models--" + repo_id.replace("/", "--"))


def locate_base(
    value: str, doc_dir: Path, repo_root: Path | None = None, where: str = "base_model"
) -> LocatedBase:
    """Where `value`'s weights are; `where` names the value in errors (`path:line:col`)."""
    spec = parse_base_spec(value, where)
    if spec.kind == "builtin":
        try:
            path = tiny_dir()
        except ModuleNotFoundError as exc:  # a core install: no tokenizers/torch/transformers
            module = missing_stack_module(exc)
            if module is None:
                raise
            note = f"needs the training stack to build or name it ({module} is not installed)"
            return LocatedBase(spec, None, False, None, note)
        built = (path / SPEC_FILE).is_file()
        note = "built" if built else "built on first use (deterministic, ~10 s)"
        return LocatedBase(spec, path, True, f"tiny-{tiny_spec_hash()}", note)
    if spec.kind == "hf":
        repo_dir = _hf_repo_dir(spec.name)
        revision = spec.revision
        if revision is None:
            ref = repo_dir / "refs" / "main"
            revision = _read_ref(ref)
            if revision is not None and not REV_RE.fullmatch(revision):
                note = f"{ref} does not hold a 40-hex commit revision"
                return LocatedBase(spec, None, False, None, note)
        if revision is None:
            return LocatedBase(
                spec, None, False, None, f"not in the local Hugging Face cache ({repo_dir})"
            )
        snap = repo_dir / "snapshots" / revision
        if snap.is_dir():
            return LocatedBase(spec, snap, True, revision, "in the local Hugging Face cache")
        return LocatedBase(
            spec, snap, False, revision, f"revision {revision} not in the local cache ({snap})"
        )
    candidates = [doc_dir / spec.name]
    if repo_root is not None:
        candidates.append(repo_root / spec.name)
    for cand in candidates:
        if cand.is_dir():
            return LocatedBase(spec, cand, True, None, "local directory")
    return LocatedBase(spec, candidates[0], False, None, "local directory does not exist")


def resolve_base(
    value: str,
    doc_dir: Path,
    repo_root: Path | None = None,
    tiny_dir: Path | None = None,
    local_dir: Path | None = None,
    where: str = "base_model",
) -> ResolvedBase:
    """The base `value` names. `tiny_dir`: the built builtin:tiny to use; `local_dir`: the
    directory a local-directory base is at (a replay trains in a temp tree, while the
    base, never part of the commit, stays beside the real work tree); `where`: the
    subject of an error about the value (a document's `path:line:col`)."""
    located = locate_base(value, doc_dir, repo_root, where)
    spec = located.spec
    if spec.kind == "builtin" and tiny_dir is not None:
        ensure_tiny_dir(tiny_dir)
        path = tiny_dir
    elif spec.kind == "local" and local_dir is not None:
        path = local_dir
    elif spec.kind == "builtin":
        path = ensure_tiny_base()
    elif not located.available or located.path is None:
        raise BaseNotAvailableError(where, _missing_message(located), _fetch_hint(located))
    else:
        path = located.path
    weight_files(path)  # a base without safetensors weights is refused now, not at first use
    return ResolvedBase(spec, path, located.revision)


def _missing_message(located: LocatedBase) -> str:
    return f"base '{located.spec.raw}' is not available: {located.note}"


def _fetch_hint(located: LocatedBase) -> str:
    spec = located.spec
    if spec.kind == "hf":
        return (
            f"on a machine with network run `{_download_command(located)}` and copy the "
            "cache here (or set HF_HUB_CACHE to a cache that has it), or point base_model "
            "at a local directory"
        )
    return "fix the path (relative to the document's directory or the repository root)"


def _download_command(located: LocatedBase) -> str:
    """The download that fits the spec's form: an `hf:` spec and a pinned registry key name
    their revision; an unpinned registry key takes the cache's `refs/main`, so no revision."""
    spec = located.spec
    revision = spec.revision or located.revision
    if revision is None:
        return f"hf download {spec.name}"
    return f"hf download {spec.name} --revision {revision}"


def weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in path.glob("*.bin")) + sorted(
            p.name for p in path.glob("*.pt")
        )
        what = f" (found {', '.join(pickles)})" if pickles else ""
        raise BaseModelError(
            str(path),
            f"no *.safetensors weights{what}",
            "dlm-git never loads pickle weights; convert the base to safetensors",
        )
    return files


class TokenizerDigest(NamedTuple):
    sha256: str
    """sha256 over every tokenizer file, by name (`TOKENIZER_FILES`, `CHAT_TEMPLATE_DIR`)."""
    untemplated: str | None
    """The same without `CHAT_TEMPLATE_DIR` (None: the base has no template there)."""


def tokenizer_digest(path: Path) -> TokenizerDigest:
    """The digests of the tokenizer's serialized state: every tokenizer file, by name.
    A base with no `CHAT_TEMPLATE_DIR` templates has the digest it had before they were
    hashed, so no record or token cache of one changes."""
    present = {
        name: sha256_file(path / name) for name in TOKENIZER_FILES if (path / name).is_file()
    }
    if not present:
        raise BaseModelError(str(path), "no tokenizer files (tokenizer.json, ...)")
    templates = _template_files(path)
    if not templates:
        return TokenizerDigest(canonical_json_sha256(present), None)
    return TokenizerDigest(
        canonical_json_sha256({**present, **templates}), canonical_json_sha256(present)
    )


def tokenizer_sha256(path: Path) -> str:
    return tokenizer_digest(path).sha256


def _template_files(path: Path) -> dict[str, str]:
    """`CHAT_TEMPLATE_DIR/<name>` -> sha256 of each `*.jinja` file that transformers'
    loader reads there (a local directory's `glob("*.jinja")`; what is not a file it
    cannot read, and neither is hashed)."""
    folder = path / CHAT_TEMPLATE_DIR
    if not folder.is_dir():
        return {}
    found = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.endswith(".jinja") and entry.is_file():
            if not utf8_name(entry.name):
                raise BaseModelError(
                    os.fsencode(entry).decode("utf-8", "backslashreplace"),
                    "a chat template whose name is not valid UTF-8",
                    "rename it (or remove it)",
                )
            found[f"{CHAT_TEMPLATE_DIR}/{entry.name}"] = sha256_file(entry)
    return found


def base_identity(
    path: Path, revision: str | None, tokenizer: TokenizerDigest | None = None
) -> BaseIdentity:
    """The base's identity; `tokenizer` is its `tokenizer_digest` when already known."""
    from dlm_git.base.digests import DigestRecord
    from dlm_git.base.tiny import default_base_cache

    files = weight_files(path)
    record = DigestRecord(default_base_cache())
    digests: list[TensorDigest] = []
    for f in files:
        digests.extend(record.tensors(f))
    record.save()
    try:
        root = tensor_root(digests)
    except ValueError as exc:
        raise BaseModelError(str(path), f"weights are inconsistent: {exc}") from None
    config = path / CONFIG_FILE
    tokenizer = tokenizer or tokenizer_digest(path)
    return BaseIdentity(
        revision=revision,
        tensor_root=root,
        tokenizer_sha256=tokenizer.sha256,
        weight_files=tuple(f.name for f in files),
        config_sha256=sha256_file(config) if config.is_file() else None,
        tokenizer_sha256_untemplated=tokenizer.untemplated,
    )


def _read_ref(ref: Path) -> str | None:
    """A Hugging Face cache's `refs/<name>` (None: absent, or not a regular file)."""
    try:
        return read_regular(ref, MAX_RECORD_BYTES).decode("utf-8", "replace").strip()
    except (OSError, NotRegularFile):
        return None


def _json_object(path: Path) -> dict[str, Any]:
    """A base's JSON file as transformers reads it (a lone surrogate in some token's text
    is the base's business: it is hashed as bytes and shown through `repr` only)."""
    try:
        data = load_json(read_regular(path, MAX_RECORD_BYTES), text_only=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaseModelError(str(path), f"not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict):
        raise BaseModelError(str(path), "must hold a JSON object")
    return data


def _custom_code(data: dict[str, Any]) -> str:
    """The modules an `auto_map` would load, for the error line."""
    auto_map = data.get("auto_map")
    values = auto_map.values() if isinstance(auto_map, dict) else []
    mods = sorted({str(v).split(".")[0] + ".py" for v in values if isinstance(v, str)})
    return ", ".join(mods) or "auto_map"


def read_config(path: Path) -> dict[str, Any] | None:
    """The base's `config.json` as an object (None: there is none); a file transformers
    could not read is a one-line error here, before any loader sees it."""
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        return None
    data = _json_object(config_path)
    model_type = data.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise BaseModelError(str(config_path), f"model_type {model_type!r:.40} is not a string")
    return data


def check_native_model(path: Path) -> None:
    """Refuse a base whose architecture only code shipped with it provides: transformers
    must know its `model_type` natively (an `auto_map` beside a native type is ignored,
    since nothing is loaded with trust_remote_code)."""
    import transformers
    from transformers.models.auto.configuration_auto import (  # type: ignore[attr-defined]
        CONFIG_MAPPING_NAMES,
    )

    config_path = path / CONFIG_FILE
    data = read_config(path)
    if data is None:
        raise BaseModelError(str(path), "no config.json", "a base needs its model config")
    model_type = data.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING_NAMES:
        return
    version = transformers.__version__
    if "auto_map" in data:
        raise BaseModelError(
            str(config_path),
            f"architecture '{model_type}' exists only as code shipped with the base"
            f" ({_custom_code(data)}); dlm-git never runs a base's code",
            f"use a base whose model_type transformers {version} implements natively",
        )
    raise BaseModelError(
        str(config_path),
        f"model_type {model_type!r} is not implemented by transformers {version}",
        "use a base of an architecture transformers implements",
    )


def check_native_tokenizer(path: Path) -> None:
    """Refuse a tokenizer that only code shipped with the base provides."""
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    read_config(path)  # the tokenizer's loader reads the model config too
    config_path = path / "tokenizer_config.json"
    if not config_path.is_file():
        return
    data = _json_object(config_path)
    name = data.get("tokenizer_class")
    if "auto_map" not in data or not isinstance(name, str):
        return
    if tokenizer_class_from_name(name) is None and tokenizer_class_from_name(name + "Fast") is None:
        raise BaseModelError(
            str(config_path),
            f"tokenizer class '{name}' exists only as code shipped with the base"
            f" ({_custom_code(data)}); dlm-git never runs a base's code",
            "use a tokenizer transformers implements (tokenizer.json with PreTrainedTokenizerFast)",
        )
