"""The adapter's checks: its files and hashes (`adapter.files`, `adapter.sha256`), its
tensors and LoRA structure against the base (`adapter.tensors`, `adapter.structure`),
the base itself (`base.identity`) and `dvc.lock`'s record of it (`dvc.binding`).

Invariants:
- They judge the bytes where `DocAt.adapter` found them (`AdapterAt.files`: DVC cache
  objects, copies of them, or a directory on disk) against manifest `manifest`, a dict of the
  shape `shapes.manifest_problem` accepts. Nothing is unpickled: tensors are read
  through dlm-git's own safetensors header parser, and files through `fsutil` (a FIFO
  is one line, never a wait).
- `adapter.files` admits the names a training writes only (`layout.ADAPTER_FILES`; a
  record from before the card lacks `README.md`): any other file is refused even where
  the manifest and dvc.lock bind it (a signature signs the known names only).
- `adapter.files` and `adapter.sha256` are the pre-commit hook's too; the hook passes its
  stat-keyed hash cache as the hasher. The tensor, structure and base checks need more
  reading and run at the hash level of `verify`.
- A base is machine-local and shared: the documents of one run read each base directory
  once (`BaseReads`), and each document's checks still compare against what was read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.contract.outcome import CheckAbsent, CheckFailed, Checks, expect_equal, short
from dlm_git.docat import AdapterAt, prefix_of
from dlm_git.dvcfiles import dir_listing, dir_md5, lock_outs, md5_file
from dlm_git.fsutil import MAX_RECORD_BYTES, read_regular
from dlm_git.hashing import SafetensorsDigest, digest_safetensors, sha256_file
from dlm_git.layout import (
    ADAPTER_CONFIG,
    ADAPTER_DIR,
    ADAPTER_FILES,
    ADAPTER_WEIGHTS,
    MANIFEST_NAME,
)
from dlm_git.safeparse import dig, load_json

if TYPE_CHECKING:
    from dlm_git.base.resolve import BaseIdentity

FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16"})


def file_checks(
    checks: Checks, manifest: dict[str, Any], adapter: AdapterAt, sha256: Callable[[str, Path], str]
) -> bool:
    """`adapter.files`, then `adapter.sha256` (`sha256(name, path)` hashes a file); whether
    the files are the ones recorded (the other adapter checks need them)."""
    recorded = manifest["adapter"]["files"]

    def files() -> str:
        names, expected = sorted(adapter.files), sorted(recorded)
        if names != expected:
            extra = sorted(set(names) - set(expected))
            missing = sorted(set(expected) - set(names))
            raise CheckFailed(
                f"adapter files {names} differ from {MANIFEST_NAME}'s {expected}"
                f" (extra: {extra}, missing: {missing})"
            )
        unknown = sorted(set(names) - set(ADAPTER_FILES))
        if unknown:
            raise CheckFailed(
                f"adapter file {unknown[0]!r:.60} is none a training writes"
                f" ({', '.join(ADAPTER_FILES)}): refused, though {MANIFEST_NAME} records it"
            )
        return f"{len(names)} files"

    def hashes() -> str:
        if ADAPTER_WEIGHTS not in adapter.files:
            raise CheckFailed(f"no {ADAPTER_WEIGHTS} in the adapter")
        folders = sorted(name for name, path in adapter.files.items() if path.is_dir())
        if folders:
            raise CheckFailed(f"unexpected directory inside the adapter: {folders[0]}")
        for name, entry in recorded.items():
            path = adapter.files[name]
            try:
                digest = sha256(name, path)  # a FIFO there is one line, never a wait
                size = os.stat(path).st_size
            except OSError:
                raise CheckFailed(f"adapter file {name} is missing from the DVC cache") from None
            if size != entry["size"]:
                raise CheckFailed(f"{name} size {size} is not {MANIFEST_NAME}'s {entry['size']}")
            if digest != entry["sha256"]:
                raise CheckFailed(
                    f"{name} sha256 {digest[:16]} is not {MANIFEST_NAME}'s {short(entry['sha256'])}"
                )
        weights = dig(recorded, ADAPTER_WEIGHTS, "sha256", kind=str)
        return f"{ADAPTER_WEIGHTS} {short(weights)}" if weights else f"{len(recorded)} files"

    if not checks.run("adapter.files", files):
        return False
    checks.run("adapter.sha256", hashes)
    return True


def adapter_checks(checks: Checks, manifest: dict[str, Any], adapter: AdapterAt) -> bool:
    """`adapter.files`, `adapter.sha256` and `adapter.tensors` (the weights read once);
    whether the files are the ones recorded."""
    weights: dict[str, SafetensorsDigest] = {}

    def sha256(name: str, path: Path) -> str:
        if name != ADAPTER_WEIGHTS:
            return sha256_file(path)
        weights[name] = digest_safetensors(path)
        return weights[name].file_sha256

    if not file_checks(checks, manifest, adapter, sha256):
        return False
    checks.run("adapter.tensors", lambda: _tensors(manifest, adapter, weights.get(ADAPTER_WEIGHTS)))
    return True


def _tensors(manifest: dict[str, Any], adapter: AdapterAt, digest: SafetensorsDigest | None) -> str:
    recorded = manifest["adapter"]
    path = adapter.files.get(ADAPTER_WEIGHTS)
    if path is None or not path.is_file():
        raise CheckFailed(f"no {ADAPTER_WEIGHTS} in the adapter")
    digest = digest or digest_safetensors(path)  # adapter.sha256 failed before reading it
    # names are unique on both sides (the header parser's and the shape's `keyed` rule), so
    # neither mapping hides an entry
    actual = {t.name: (t.dtype, list(t.shape), t.digest) for t in digest.tensors}
    expected = {t["name"]: (t["dtype"], t["shape"], t["digest"]) for t in recorded["tensors"]}
    if set(actual) != set(expected):
        extra = sorted(set(actual) - set(expected))
        missing = sorted(set(expected) - set(actual))
        raise CheckFailed(f"tensor names differ (extra: {extra[:3]}, missing: {missing[:3]})")
    for name in sorted(expected):
        if actual[name] != expected[name]:
            got, want = actual[name], expected[name]
            what = "dtype" if got[0] != want[0] else "shape" if got[1] != want[1] else "bytes"
            raise CheckFailed(f"tensor {name}: {what} differ from the manifest")
    expect_equal("tensor root", recorded["tensor_root"], digest.tensor_root)
    return f"{len(actual)} tensors, root {digest.tensor_root[:16]}"


def structure_check(
    checks: Checks,
    manifest: dict[str, Any],
    adapter: AdapterAt | None,
    base_dir: Path | None,
    bases: BaseReads | None = None,
    base_missing: str | None = None,
) -> None:
    """`adapter.structure`: every lora_A/lora_B pair is shaped by r and a targeted linear
    module of the base. `bases`: the run's reads of its bases (else the base is read here);
    `base_missing`: why `base_dir` is None (where it was looked for)."""

    def structure() -> str:
        if adapter is None:
            raise CheckAbsent("adapter not available")
        config = _adapter_config(adapter)
        rank, targets = _config_agrees(manifest["training_config"], config)
        weights = adapter.files.get(ADAPTER_WEIGHTS)
        if weights is None or not weights.is_file():
            raise CheckFailed(f"no {ADAPTER_WEIGHTS} in the adapter")
        from dlm_git.safetensors_header import read_safetensors_header  # verify only

        header, _ = read_safetensors_header(weights)
        shapes = (bases or BaseReads()).linear_shapes(base_dir) if base_dir is not None else None
        if base_dir is None and base_missing is not None:
            raise CheckAbsent(f"cannot check LoRA shapes: {base_missing}")
        if shapes is None:
            raise CheckAbsent("base weights not available to check LoRA shapes against")
        pairs = sum(_lora_pair(name, info, rank, targets, shapes) for name, info in header.items())
        if pairs == 0:
            raise CheckFailed("no LoRA tensors in the adapter")
        return f"{pairs // 2} LoRA pairs consistent with r={rank}"

    checks.run("adapter.structure", structure)


def _adapter_config(adapter: AdapterAt) -> dict[str, Any]:
    path = adapter.files.get(ADAPTER_CONFIG)
    try:
        if path is None:
            raise FileNotFoundError(ADAPTER_CONFIG)
        config = load_json(read_regular(path, MAX_RECORD_BYTES))
    except (OSError, ValueError) as exc:
        raise CheckFailed(f"{ADAPTER_CONFIG} cannot be read: {type(exc).__name__}") from None
    if not isinstance(config, dict):
        raise CheckFailed(f"{ADAPTER_CONFIG} is not a JSON object")
    return config


def _config_agrees(cfg: dict[str, Any], config: dict[str, Any]) -> tuple[int, set[str]]:
    """`r`, `lora_alpha` and `target_modules` of adapter_config.json = the training config's."""
    expect_equal("adapter_config r", cfg.get("lora_r"), config.get("r"))
    expect_equal(
        "adapter_config lora_alpha",
        float(cfg.get("lora_alpha", 0)),
        float(config.get("lora_alpha", -1)),
    )
    expect_equal(
        "adapter_config target_modules",
        sorted(cfg.get("target_modules") or []),
        sorted(config.get("target_modules") or []),
    )
    return int(config["r"]), set(config.get("target_modules") or [])


def _lora_pair(
    name: str, info: Any, rank: int, targets: set[str], base: dict[str, tuple[int, int]]
) -> int:
    """1 for a well-shaped LoRA tensor, 0 for the metadata; `CheckFailed` otherwise."""
    if name == "__metadata__":
        return 0
    if info["dtype"] not in FLOAT_DTYPES:
        raise CheckFailed(f"{name}: dtype {info['dtype']} is not a floating-point type")
    if ".lora_A." not in name and ".lora_B." not in name:
        raise CheckFailed(f"{name}: not a LoRA tensor")
    module = name.split(".lora_")[0]
    leaf = module.rsplit(".", 1)[-1]
    if leaf not in targets:
        raise CheckFailed(f"{name}: module '{leaf}' is not a target module")
    base_name = module.removeprefix("base_model.model.") + ".weight"
    if base_name not in base:
        raise CheckFailed(f"{name}: no base weight {base_name}")
    out_f, in_f = base[base_name]
    want = [rank, in_f] if ".lora_A." in name else [out_f, rank]
    if list(info["shape"]) != want:
        raise CheckFailed(f"{name}: shape {list(info['shape'])}, expected {want} (r={rank})")
    return 1


def _base_linear_shapes(base_dir: Path) -> dict[str, tuple[int, int]] | None:
    from dlm_git.safetensors_header import read_safetensors_header  # verify only: not hooks

    shapes: dict[str, tuple[int, int]] = {}
    files = sorted(base_dir.glob("*.safetensors"))
    if not files:
        return None
    for weights in files:
        header, _ = read_safetensors_header(weights)
        for name, info in header.items():
            if name != "__metadata__" and len(info["shape"]) == 2:
                shapes[name] = (int(info["shape"][0]), int(info["shape"][1]))
    return shapes


class BaseReads:
    """What the checks read from the machine-local bases during one run, read once per
    base directory (by its real path): its identity (`base_identity`, per revision) and the
    shapes of its linear weights. A run verifies the documents of one commit, which mostly
    share a base; nothing is kept past the run, so a base changed between runs is read
    afresh. A read that raises is not remembered: every check that needs it fails alike."""

    def __init__(self) -> None:
        self._identities: dict[tuple[str, str | None], BaseIdentity] = {}
        self._shapes: dict[str, dict[str, tuple[int, int]] | None] = {}

    def identity(self, base_dir: Path, revision: str | None) -> BaseIdentity:
        from dlm_git.base.resolve import base_identity

        key = (os.path.realpath(base_dir), revision)
        if key not in self._identities:
            self._identities[key] = base_identity(base_dir, revision)
        return self._identities[key]

    def linear_shapes(self, base_dir: Path) -> dict[str, tuple[int, int]] | None:
        """Weight name -> (out, in) of every 2-D tensor of the base's safetensors files
        (None: it has none)."""
        key = os.path.realpath(base_dir)
        if key not in self._shapes:
            self._shapes[key] = _base_linear_shapes(base_dir)
        return self._shapes[key]


def base_check(
    checks: Checks,
    manifest: dict[str, Any],
    base_dir: Path | None,
    bases: BaseReads | None = None,
    base_missing: str | None = None,
) -> None:
    """`base.identity`: the base on this machine is the one the manifest records (tensor
    root, tokenizer, config). `bases`: the run's reads of its bases (else read here);
    `base_missing`: why `base_dir` is None (where it was looked for)."""
    base = manifest["base"]

    def identity() -> str:
        if base_dir is None:
            raise CheckAbsent(base_missing or f"base {base['spec']} is not available here")
        ident = (bases or BaseReads()).identity(base_dir, base["revision"])
        expect_equal("base tensor root", base["tensor_root"], ident.tensor_root)
        untemplated = _expect_tokenizer(manifest["tokenizer_sha256"], ident)
        if base.get("config_sha256") is None:
            detail = f"tensor root {ident.tensor_root[:16]} (config.json not recorded)"
        else:
            expect_equal("base config.json sha256", base["config_sha256"], ident.config_sha256)
            detail = (
                f"tensor root {ident.tensor_root[:16]}, config {ident.config_sha256 or '-':.16}"
            )
        if untemplated:  # only once every other comparison passed: a failure is never hidden
            raise CheckAbsent(UNTEMPLATED)
        return detail

    checks.run("base.identity", identity)


UNTEMPLATED = (
    "base tokenizer sha256: the record covers this base's tokenizer files but not its"
    " additional_chat_templates/ (recorded before dlm-git hashed them, or with a base that"
    " had none); retrain to record them"
)


def _expect_tokenizer(recorded: Any, ident: BaseIdentity) -> bool:
    """The recorded tokenizer sha256 against this base's; True where the record equals the
    digest of this base's files without its `additional_chat_templates/`: it compares
    nothing about those templates (recorded before dlm-git hashed them, or from a base
    that had none, so the tokenizer differed). Which, the record cannot tell: not a pass,
    not a failure (`base_check` makes it ABSENT once everything else compared)."""
    if recorded is not None and recorded == ident.tokenizer_sha256_untemplated:
        return True
    expect_equal("base tokenizer sha256", recorded, ident.tokenizer_sha256)
    return False


def dvc_binding(
    checks: Checks, dvc_lock: bytes | None, rel: str, files: dict[str, Path] | None, root: Path
) -> None:
    """`dvc.binding`: dvc.lock's record of `<rel>/adapter` names exactly the adapter files
    in `files` (None: the adapter is not here). With no `.dir` listing in the cache (the
    adapter's bytes from a replay), the listing's md5 is recomputed as DVC names it."""

    def binding() -> str:
        # no binding is not a failed comparison: a document trained by hand, outside a
        # DVC pipeline, has none, and nothing then says where its adapter's bytes are
        if dvc_lock is None:
            raise CheckAbsent("no dvc.lock: nothing binds the adapter's bytes (not a DVC project)")
        out_path = prefix_of(rel) + ADAPTER_DIR
        out = lock_outs(dvc_lock).find(out_path)
        if out is None:
            raise CheckAbsent(f"dvc.lock records no out {out_path} (not trained by the pipeline)")
        listing = dir_listing(root, out.md5)
        if files is None:
            lacks = f"DVC cache lacks {out.md5} (run `dvc pull`)"
            raise CheckAbsent(lacks if listing is None else "adapter not available")
        actual = {name: md5_file(path) for name, path in sorted(files.items()) if path.is_file()}
        if listing is None:  # adapter bytes from a replay: recompute the listing's name
            if dir_md5(actual) != out.md5:
                raise CheckFailed(
                    f"dvc.lock ({out.stage}) records {out.md5}, the adapter's files make"
                    f" {dir_md5(actual)}"
                )
            return f"{out.stage} {out.md5[:16]} (listing recomputed; not in the DVC cache)"
        if listing != actual:
            diff = sorted(k for k in set(listing) | set(actual) if listing.get(k) != actual.get(k))
            raise CheckFailed(f"dvc.lock ({out.stage}) and adapter/ differ: {', '.join(diff)}")
        return f"{out.stage} {out.md5[:16]}"

    checks.run("dvc.binding", binding)
