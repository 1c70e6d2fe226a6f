"""Real architectures with random weights, built locally: bases shaped like the published
models users train on (SmolLM2, Qwen2.5, Pythia), for a machine that cannot download them.

Invariants:
- A build is a pure function of its spec (`build_spec`): the family's published config
  values (with any shape override named in the spec), the tokenizer recipe, the built-in
  corpus, the init seed and the library versions. The same spec gives byte-identical
  files in any process on any x86-64 machine (the weights are drawn under the seed in the
  kernels the `x86-64-v3` profile pins; `dlm-git base build` pins them before torch).
- The tokenizer is a byte-level BPE trained locally on the built-in corpus to at most
  `TOKENIZER_VOCAB` tokens (the corpus is small); `config.json` keeps the published
  `vocab_size`, so the embedding and the LM head have the published shape (rows past the
  tokenizer are never indexed, as with Qwen2.5's own padded vocabulary). The family's
  special tokens come first, so SmolLM2's `<|endoftext|>`/`<|im_start|>`/`<|im_end|>`
  keep their published ids 0/1/2.
- Written into a temp directory and renamed into place (its files moved, not copied,
  where one file system holds both and no later step reads them); the Hugging Face
  cache layout (`models--org--name/{blobs,snapshots/<rev>,refs/main}`) gets
  content-addressed blobs, a snapshot of relative symlinks and `refs/main` last, each
  step atomic. The revision
  is the first 40 hex of the spec's sha256: the same spec names the same snapshot.
- Only safetensors are written and nothing is ever loaded from a pickle.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.base.errors import BaseModelError
from dlm_git.base.families import FAMILIES, Family
from dlm_git.fsutil import (
    FILE_MODE,
    MAX_RECORD_BYTES,
    NotRegularFile,
    atomic_write_bytes,
    read_regular,
    replacing_dir,
)
from dlm_git.hashing import canonical_json, sha256_bytes, sha256_file
from dlm_git.safeparse import load_json

BUILD_SPEC_VERSION = 1
SPEC_FILE = "dlm_git_base.json"
TOKENIZER_VOCAB = 1024
INIT_SEED = 20261123
REPO_ID_PREFIX = "dlm-git-random"


@dataclass(frozen=True)
class Shape:
    """Overrides of a family's published shape (fewer layers, a smaller vocabulary) for
    quick runs; named in the spec, so they name another base."""

    layers: int | None = None
    vocab: int | None = None

    def overrides(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.layers is not None:
            out["num_hidden_layers"] = self.layers
        if self.vocab is not None:
            out["vocab_size"] = self.vocab
        return out


def family_named(name: str) -> Family:
    family = FAMILIES.get(name)
    if family is None:
        raise BaseModelError(
            "base build",
            f"unknown architecture '{name}'",
            "one of: tiny, " + ", ".join(sorted(FAMILIES)) + " (dlm-git base list)",
        )
    return family


def _check_shape(family: Family, shape: Shape) -> None:
    if shape.layers is not None and not 1 <= shape.layers <= 256:
        raise BaseModelError("base build", f"--layers {shape.layers} is out of range 1-256")
    if shape.vocab is not None and not TOKENIZER_VOCAB <= shape.vocab <= 1 << 20:
        raise BaseModelError(
            "base build",
            f"--vocab {shape.vocab} is out of range {TOKENIZER_VOCAB}-{1 << 20}",
            f"the tokenizer alone has up to {TOKENIZER_VOCAB} tokens",
        )


def build_spec(family: Family, shape: Shape, versions: Mapping[str, str] | None = None) -> bytes:
    """Everything that determines the build's bytes, as canonical JSON."""
    from dlm_git.base.tiny import corpus_text, installed_versions

    _check_shape(family, shape)
    spec = {
        "name": family.name,
        "spec_version": BUILD_SPEC_VERSION,
        "source": family.source,
        "model_type": family.model_type,
        "config": {**family.config, **shape.overrides()},
        "shape_overrides": shape.overrides(),
        "tokenizer": {
            "kind": "byte-level-bpe",
            "vocab_size": TOKENIZER_VOCAB,
            "min_frequency": 2,
            "special_tokens": list(family.special_tokens),
            "bos": family.bos,
            "eos": family.eos,
            "pad": family.pad,
        },
        "chat_template": family.chat_template,
        "corpus_sha256": sha256_bytes(corpus_text().encode("utf-8")),
        "init_seed": INIT_SEED,
        "versions": dict(versions) if versions is not None else installed_versions(),
    }
    return canonical_json(spec)


def spec_revision(spec: bytes) -> str:
    """The snapshot revision a spec names (40 hex, like a Hugging Face commit id)."""
    return sha256_bytes(spec)[:40]


def default_repo_id(family: Family, shape: Shape) -> str:
    layers = f"-L{shape.layers}" if shape.layers is not None else ""
    vocab = f"-V{shape.vocab}" if shape.vocab is not None else ""
    return f"{REPO_ID_PREFIX}/{family.name}{layers}{vocab}"


@dataclass(frozen=True)
class Built:
    spec: bytes
    revision: str
    out: Path | None
    snapshot: Path | None
    repo_id: str | None


def build_base(
    family: Family,
    shape: Shape,
    out: Path | None = None,
    hf_cache: Path | None = None,
    repo_id: str | None = None,
) -> Built:
    """Build `family` (with `shape`) into `out` and/or a Hugging Face cache at `hf_cache`
    (as `repo_id`); a destination that already holds this spec's build is left as is."""
    spec = build_spec(family, shape)
    revision = spec_revision(spec)
    if out is not None:
        check_replaceable(out)
    work = Path(tempfile.mkdtemp(prefix=".dlm-git-base."))
    try:
        made: Path | None = None

        def files() -> Path:
            nonlocal made
            if made is None:
                made = work / "files"
                made.mkdir()
                _write_files(made, family, shape, spec)
            return made

        if out is not None and not _holds(out, spec):
            install_tree(files, out, move=hf_cache is None)
        snapshot = None
        if hf_cache is not None:
            repo_id = repo_id or default_repo_id(family, shape)
            snapshot = install_hf_snapshot(files, hf_cache, repo_id, revision, spec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Built(spec, revision, out, snapshot, repo_id if hf_cache is not None else None)


def _holds(directory: Path, spec: bytes) -> bool:
    try:
        return read_regular(directory / SPEC_FILE, MAX_RECORD_BYTES) == spec
    except (OSError, NotRegularFile):
        return False


def check_replaceable(dest: Path) -> None:
    """Refuse to replace a directory that is not an earlier build (a user's own model)."""
    dest = Path(dest)
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise BaseModelError(str(dest), "exists and is not a directory", "choose another --out")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / SPEC_FILE).is_file():
        raise BaseModelError(
            str(dest),
            f"exists and holds no {SPEC_FILE}: not a base dlm-git built; refusing to replace it",
            "choose another --out, or remove the directory yourself",
        )


def install_tree(files: Callable[[], Path], dest: Path, *, move: bool = False) -> None:
    """Put the built files into `dest`, replacing it by rename: moved where `move` (no
    later step reads them) and the file system allows, else copied."""
    dest = Path(dest)
    check_replaceable(dest)
    with replacing_dir(dest) as tmp:
        for src in sorted(files().iterdir()):
            _place(src, tmp / src.name, move)
            os.chmod(tmp / src.name, FILE_MODE)


def hf_repo_dir(cache_root: Path, repo_id: str) -> Path:
    return Path(cache_root) / ("models--" + repo_id.replace("/", "--"))


def install_hf_snapshot(
    files: Callable[[], Path], cache_root: Path, repo_id: str, revision: str, spec: bytes
) -> Path:
    """Blobs by sha256, `snapshots/<revision>/` of relative symlinks, then `refs/main`.
    The built files are moved into the blobs where the file system allows (this is their
    last reader), else copied; each is synced before it is named."""
    from dlm_git.base.spec import HF_RE

    if HF_RE.match(f"hf:{repo_id}") is None or ".." in repo_id:
        raise BaseModelError("base build", f"--repo-id '{repo_id}' is not of the form org/name")
    repo = hf_repo_dir(cache_root, repo_id)
    snapshot = repo / "snapshots" / revision
    if not _holds(snapshot, spec):
        blobs = repo / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        with replacing_dir(snapshot) as tmp:
            for src in sorted(files().iterdir()):
                digest = sha256_file(src)
                blob = blobs / digest
                if not blob.is_file():
                    _place_atomic(src, blob)
                os.symlink(f"../../blobs/{digest}", tmp / src.name)
    atomic_write_bytes(repo / "refs" / "main", revision.encode("ascii"))
    return snapshot


def _place(src: Path, dest: Path, move: bool) -> None:
    """`src` at `dest`: renamed where `move` and both are on one file system, else copied."""
    if move:
        try:
            os.replace(src, dest)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    shutil.copyfile(src, dest)


def _place_atomic(src: Path, dest: Path) -> None:
    """`src`'s bytes at `dest`, whole or not at all: synced, then named (`src` is moved
    where one file system holds both)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        _place(src, Path(tmp), move=True)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_files(directory: Path, family: Family, shape: Shape, spec: bytes) -> None:
    from dlm_git.base.tiny import train_bpe

    tokenizer = train_bpe(TOKENIZER_VOCAB, family.special_tokens)
    atomic_write_bytes(directory / "tokenizer.json", tokenizer.to_str().encode("utf-8"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": family.bos,
        "eos_token": family.eos,
        "pad_token": family.pad,
        "unk_token": None,
        "model_max_length": family.config["max_position_embeddings"],
        "clean_up_tokenization_spaces": False,
        **({"chat_template": family.chat_template} if family.chat_template else {}),
    }
    atomic_write_bytes(directory / "tokenizer_config.json", canonical_json(config))
    _write_model(directory, family, shape, tokenizer)
    atomic_write_bytes(directory / SPEC_FILE, spec)


def _write_model(directory: Path, family: Family, shape: Shape, tokenizer: Any) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]

    def token_id(token: str | None) -> int | None:
        return None if token is None else int(tokenizer.token_to_id(token))

    config = AutoConfig.for_model(
        family.model_type,
        **{**family.config, **shape.overrides()},
        bos_token_id=token_id(family.bos),
        eos_token_id=token_id(family.eos),
        pad_token_id=token_id(family.pad),
    )
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(INIT_SEED)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)  # type: ignore[no-untyped-call]
    finally:
        torch.random.set_rng_state(state)
    model.save_pretrained(str(directory), safe_serialization=True)
    for path in directory.iterdir():
        os.chmod(path, FILE_MODE)


def built_here(directory: Path) -> str | None:
    """The family name when `directory` holds a build of this module (its spec file names
    one), else None. Such weights are dlm-git's own random draw: no model license applies."""
    try:
        data = load_json(read_regular(Path(directory) / SPEC_FILE, MAX_RECORD_BYTES))
    except (OSError, ValueError, NotRegularFile):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    ok = isinstance(name, str) and name in FAMILIES and "init_seed" in data
    return name if ok else None
