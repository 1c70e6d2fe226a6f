"""The built-in tiny base (`builtin:tiny`): a byte-level BPE tokenizer and a small Llama.

Invariant: building it twice, in any process, on any machine with the same pinned library
versions, gives byte-identical files. Everything that goes into it (corpus text shipped in
the package, tokenizer and model hyperparameters, init seed, library versions) is part of
`tiny_spec()`, whose hash names the cache directory; nothing else (time, paths, thread
count, hash seed) can reach the bytes. Built into a temp directory and renamed into place,
so a reader never sees a half-built base.

A directory the pipeline names (`--tiny-dir bases/tiny`) is filled from the base cache
(`install_tiny_dir`): the cache's build of this spec, built there once, is copied when it
holds exactly a build's files (`TINY_FILES`) and this spec's spec file. The copy is the
bytes a build here would write, by the invariant above, and costs no torch start; the
cache is trusted as every command that uses `builtin:tiny` without `--tiny-dir` trusts it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlm_git.fsutil import (
    FILE_MODE,
    MAX_RECORD_BYTES,
    NotRegularFile,
    atomic_write_bytes,
    copy_regular,
    read_regular,
    replacing_dir,
)
from dlm_git.hashing import canonical_json, sha256_bytes

TINY_SPEC_VERSION = 1
SPEC_FILE = "dlm_git_base.json"
TINY_FILES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        SPEC_FILE,
    }
)
"""Every file a build writes, and nothing else: what a cached build must hold to be copied."""
EOS = "<|endoftext|>"
PAD = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (EOS, PAD, IM_START, IM_END)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
MODEL_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "initializer_range": 0.02,
}
TOKENIZER_CONFIG: dict[str, Any] = {"vocab_size": 512, "min_frequency": 2}
INIT_SEED = 20241121


def corpus_text() -> str:
    from importlib import resources  # only a build or a spec reads the corpus

    return resources.files("dlm_git.base").joinpath("data/tiny_corpus.txt").read_text("utf-8")


@functools.cache
def _dist_version(name: str) -> str:
    """A library's installed version, read from its metadata: importing torch and
    transformers just to name the cache directory would cost `show` seconds."""
    from importlib import import_module, metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return str(import_module(name).__version__)


def installed_versions() -> dict[str, str]:
    """The versions of the libraries that build the tiny base, as installed here (raises
    `ModuleNotFoundError` on a core install, which has none of them)."""
    return {
        "tokenizers": _dist_version("tokenizers"),
        "torch": _dist_version("torch").split("+")[0],
        "transformers": _dist_version("transformers"),
    }


def tiny_spec(versions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything that determines the tiny base's bytes; `versions`: the library versions
    that build it (default: the installed ones)."""
    return {
        "name": "builtin:tiny",
        "spec_version": TINY_SPEC_VERSION,
        "corpus_sha256": sha256_bytes(corpus_text().encode("utf-8")),
        "tokenizer": {**TOKENIZER_CONFIG, "special_tokens": list(SPECIAL_TOKENS)},
        "chat_template": CHAT_TEMPLATE,
        "model": {"architecture": "LlamaForCausalLM", **MODEL_CONFIG},
        "init_seed": INIT_SEED,
        "versions": dict(versions) if versions is not None else installed_versions(),
    }


@functools.cache
def tiny_spec_json() -> bytes:
    """`canonical_json(tiny_spec())`, once per process: the spec reads package metadata,
    which does not change while a process runs."""
    return canonical_json(tiny_spec())


def tiny_spec_hash() -> str:
    return sha256_bytes(tiny_spec_json())[:16]


def built_revision(directory: Path) -> str | None:
    """The revision (`tiny-<16 hex>`) of the tiny base built in `directory`, read from its
    spec file (None: no build there). Needs none of the libraries that build it: this is
    how a core install finds the base a commit names (its manifest's `base.revision`)."""
    try:
        data = read_regular(Path(directory) / SPEC_FILE, MAX_RECORD_BYTES)
    except (OSError, NotRegularFile):
        return None
    return f"tiny-{sha256_bytes(data)[:16]}"


def default_base_cache() -> Path:
    env = os.environ.get("DLM_GIT_BASE_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "dlm-git" / "bases"


def tiny_dir(cache_root: Path | None = None) -> Path:
    return (cache_root or default_base_cache()) / f"tiny-{tiny_spec_hash()}"


def check_tiny_dir(directory: Path) -> None:
    """Refuse a tiny-base directory built from another spec (or not built at all)."""
    from dlm_git.base.errors import BaseNotAvailableError

    spec_file = Path(directory) / SPEC_FILE
    hint = f"rebuild it: dlm-git base build --out {directory}"
    if not spec_file.is_file():
        raise BaseNotAvailableError(str(directory), "no built tiny base here", hint)
    if read_regular(spec_file, MAX_RECORD_BYTES) != tiny_spec_json():
        raise BaseNotAvailableError(
            str(directory), "tiny base was built from another spec (library versions?)", hint
        )


def ensure_tiny_dir(directory: Path) -> None:
    """Build the tiny base into `directory` if nothing is built there yet (deterministic,
    so whichever command needs it first builds the same files); then `check_tiny_dir`.
    No lock file (it would sit untracked in the work tree): two builders racing build the
    same bytes, and the loser of the final rename finds the winner's directory."""
    directory = Path(directory)
    if not (directory / SPEC_FILE).exists():
        try:
            install_tiny_dir(directory)
        except OSError:
            if not (directory / SPEC_FILE).exists():
                raise
    check_tiny_dir(directory)


def ensure_tiny_base(cache_root: Path | None = None) -> Path:
    """The tiny base's directory, building it first if it is not there yet."""
    from filelock import FileLock

    dest = tiny_dir(cache_root)
    if (dest / SPEC_FILE).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if not (dest / SPEC_FILE).is_file():
            build_tiny_base(dest)
    return dest


def install_tiny_dir(dest: Path) -> None:
    """Put the tiny base into `dest` (replaced atomically): a copy of the base cache's build,
    made there first if absent (`ensure_tiny_base`); built in `dest` itself where the cache
    cannot be written or holds anything but a build of this spec (see the module)."""
    dest = Path(dest)
    try:
        source: Path | None = ensure_tiny_base()
    except OSError:
        source = None
    if source is not None and source.absolute() == dest.absolute():
        return
    if source is None or not _copy_build(source, dest):
        build_tiny_base(dest)


def _copy_build(source: Path, dest: Path) -> bool:
    """Copy the build in `source` to `dest`; False (nothing written) if `source` holds
    other files than a build's, another spec's build, or cannot be read."""
    try:
        if {p.name for p in source.iterdir()} != TINY_FILES:
            return False
        if read_regular(source / SPEC_FILE, MAX_RECORD_BYTES) != tiny_spec_json():
            return False
        with replacing_dir(dest) as tmp:
            for name in sorted(TINY_FILES):
                copy_regular(source / name, tmp / name, follow_symlinks=False)
                os.chmod(tmp / name, FILE_MODE)
    except (OSError, NotRegularFile):
        return False
    return True


def build_tiny_base(dest: Path) -> Path:
    """Build the tiny base into `dest` (replaced atomically if it exists)."""
    dest = Path(dest)
    with replacing_dir(dest) as tmp:
        _write_tokenizer(tmp)
        _write_model(tmp)
        atomic_write_bytes(tmp / SPEC_FILE, tiny_spec_json())
    return dest


def train_bpe(vocab_size: int, special_tokens: tuple[str, ...], min_frequency: int = 2) -> Any:
    """A byte-level BPE trained on the built-in corpus; the special tokens take the first
    ids, in order. Deterministic: the corpus and these arguments are all it depends on."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [line for line in corpus_text().split("\n") if line.strip()]
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def _train_tokenizer() -> Any:
    return train_bpe(
        TOKENIZER_CONFIG["vocab_size"], SPECIAL_TOKENS, TOKENIZER_CONFIG["min_frequency"]
    )


def _write_tokenizer(directory: Path) -> None:
    tokenizer = _train_tokenizer()
    atomic_write_bytes(directory / "tokenizer.json", tokenizer.to_str().encode("utf-8"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "pad_token": PAD,
        "bos_token": None,
        "unk_token": None,
        "model_max_length": MODEL_CONFIG["max_position_embeddings"],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    atomic_write_bytes(directory / "tokenizer_config.json", canonical_json(config))


def _write_model(directory: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        eos_token_id=tok.token_to_id(EOS),
        pad_token_id=tok.token_to_id(PAD),
        bos_token_id=None,
        **MODEL_CONFIG,
    )
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(INIT_SEED)
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    model.save_pretrained(str(directory), safe_serialization=True)
    for path in directory.iterdir():
        os.chmod(path, FILE_MODE)
