"""Hash-level checks of one document: record ↔ files ↔ lock ↔ dvc.lock.

Invariants:
- Every check compares a recomputed value with a recorded one. A record that is missing,
  unreadable or unknown is a failed check, never a pass.
- Nothing here trains or loads a model, and nothing reads pickle: adapter and base
  tensors are read through the safetensors header parser in `dlm_git.hashing`.
- Each check has a stable name (docs/verify.md lists them) so a failure says which
  check caught it.
- A base is machine-local and shared: the documents of one run read each base directory
  once (`BaseReads`), and each document's checks still compare against what was read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.dvcfiles import dir_listing, dir_md5, lock_outs, md5_file
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import MAX_RECORD_BYTES, read_regular
from dlm_git.hashing import (
    TextForm,
    canonical_json_sha256,
    digest_safetensors,
    digest_text,
)
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME
from dlm_git.manifest.records import ADAPTER_CONFIG, ADAPTER_WEIGHTS, adapter_record
from dlm_git.manifest.schema import Manifest
from dlm_git.safeparse import load_json
from dlm_git.safetensors_header import read_safetensors_header

if TYPE_CHECKING:
    from dlm_git.base.resolve import BaseIdentity


class Outcome(StrEnum):
    """What a check found, set where the check runs; verdicts are computed from these
    states only, never from a check's detail text (which may hold names a commit chose)."""

    OK = "ok"  # the recomputed value equals the recorded one
    FAILED = "failed"  # it differs, or the record is missing or malformed
    ABSENT = "absent"  # what it needs is not on this machine (cache object, base): no comparison


MARKS = {Outcome.OK: "ok  ", Outcome.FAILED: "FAIL", Outcome.ABSENT: "n/a "}
"""How the text report marks each state (`n/a`: nothing was compared)."""


@dataclass(frozen=True)
class Check:
    name: str
    state: Outcome
    detail: str

    @property
    def ok(self) -> bool:
        return self.state is Outcome.OK

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "state": self.state.value, "detail": self.detail}


def passed(name: str, detail: str) -> Check:
    return Check(name, Outcome.OK, detail)


def failed(name: str, detail: str) -> Check:
    return Check(name, Outcome.FAILED, detail)


def absent(name: str, detail: str) -> Check:
    return Check(name, Outcome.ABSENT, detail)


def judged(name: str, ok: bool, detail: str) -> Check:
    """A check that compared: passed or failed."""
    return Check(name, Outcome.OK if ok else Outcome.FAILED, detail)


@dataclass
class Checks:
    items: list[Check] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        """A check that compared (ok or failed)."""
        self.items.append(judged(name, ok, detail))
        return ok

    def absent(self, name: str, detail: str) -> bool:
        """A check that could not compare: what it needs is not on this machine."""
        self.items.append(absent(name, detail))
        return False

    def run(self, name: str, fn: Callable[[], str]) -> bool:
        """Run `fn`; its return value is the pass detail, a `CheckFailed` the failure, a
        `CheckAbsent` the absence of what it needs."""
        try:
            return self.add(name, True, fn())
        except CheckAbsent as exc:
            return self.absent(name, str(exc))
        except CheckFailed as exc:
            return self.add(name, False, str(exc))
        except DlmGitError as exc:
            return self.add(name, False, exc.one_line())

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(c.ok for c in self.items)


class CheckFailed(Exception):
    """A recomputed value differs from the recorded one (message says which and how)."""


class CheckAbsent(Exception):
    """What the check needs (a DVC cache object, the base) is not on this machine: the
    check cannot compare, which is never a pass and never a failure."""


def _short(h: str | None) -> str:
    return "none" if h is None else h[:16]


def expect_equal(what: str, recorded: Any, actual: Any) -> None:
    if recorded is None:
        raise CheckFailed(f"{what}: nothing recorded")
    if recorded != actual:
        if isinstance(recorded, str) and isinstance(actual, str):
            raise CheckFailed(f"{what}: recorded {_short(recorded)} but found {_short(actual)}")
        raise CheckFailed(f"{what}: recorded {recorded!r} but found {actual!r}")


def expect_text(what: str, recorded: str | None, data: bytes) -> str:
    """A recorded digest of a text input (`.dlm`, lock) against its bytes: of their
    canonical form (CRLF as LF, `hashing.canonical_text`, so an LF and a CRLF checkout
    agree), or, in a record made before that rule, of the raw bytes. The pass detail."""
    digest = digest_text(data)
    form = digest.form_of(recorded)
    if form is None:
        expect_equal(what, recorded, digest.sha256)  # raises: they differ
    if form is TextForm.RAW:
        return (
            f"{digest.raw_sha256[:16]} (of the raw bytes: a record from before CRLF was read as LF)"
        )
    return digest.sha256[:16]


def load_manifest(data: bytes | None, subject: str) -> Manifest:
    from dlm_git.manifest.records import read_manifest_bytes

    if data is None:
        raise CheckFailed(f"{subject}: missing")
    return read_manifest_bytes(data, subject)


@dataclass
class DocFiles:
    """The recorded side of one document: raw bytes of its committed files."""

    doc_rel: str  # repo-relative POSIX path of the document directory
    dlm_bytes: bytes | None
    lock_bytes: bytes | None
    manifest_bytes: bytes | None
    dvc_lock_bytes: bytes | None


def record_checks(checks: Checks, files: DocFiles) -> tuple[Manifest | None, dict[str, Any] | None]:
    """Parse manifest and lock and check that they bind to each other and to the .dlm."""
    manifest: Manifest | None = None
    lock: dict[str, Any] | None = None

    def parse_manifest() -> str:
        nonlocal manifest
        manifest = load_manifest(files.manifest_bytes, MANIFEST_NAME)
        return f"schema v{manifest.schema_version}"

    def parse_lock() -> str:
        nonlocal lock
        from dlm_git.lock.io import parse_lock as parse

        if files.lock_bytes is None:
            raise CheckFailed(f"{LOCK_NAME}: missing")
        lock = parse(files.lock_bytes, LOCK_NAME).model_dump(mode="json")
        return f"lock v{lock['lock_version']}, class {lock['determinism_class']}"

    checks.run("manifest.parse", parse_manifest)
    checks.run("lock.parse", parse_lock)
    if manifest is None or lock is None:
        return manifest, lock
    m, lk, lock_bytes = manifest, lock, files.lock_bytes or b""

    def lock_binding() -> str:
        return expect_text("manifest.lock_sha256 vs sha256(dlm.lock)", m.lock_sha256, lock_bytes)

    def lock_fields() -> str:
        expect_equal("lock.dlm_id vs manifest", lk["dlm_id"], m.dlm_id)
        expect_equal("lock.dlm_sha256 vs manifest", lk["dlm_sha256"], m.dlm_sha256)
        expect_equal(
            "lock.base_model_sha256 vs manifest", lk["base_model_sha256"], m.base.tensor_root
        )
        if lk["base_model_revision"] != m.base.revision:  # None for a local directory base
            raise CheckFailed(
                f"lock.base_model_revision vs manifest: recorded {lk['base_model_revision']!r}"
                f" but found {m.base.revision!r}"
            )
        expect_equal("lock.base_model vs manifest", lk["base_model"], m.base.spec)
        expect_equal("lock.seed vs manifest config", lk["seed"], m.training_config.get("seed"))
        return "dlm_id, dlm_sha256, base, seed agree"

    def doc_sha() -> str:
        if files.dlm_bytes is None:
            raise CheckFailed("the .dlm document is missing")
        return expect_text("manifest.dlm_sha256 vs sha256(.dlm)", m.dlm_sha256, files.dlm_bytes)

    def doc_base_model() -> str:
        from dlm_git.doc.peek import peek_base_model

        if files.dlm_bytes is None:
            raise CheckFailed("the .dlm document is missing")
        written = peek_base_model(files.dlm_bytes)
        if written is None:
            raise CheckFailed("the .dlm's frontmatter does not give base_model as a string")
        expect_equal("lock.base_model vs the .dlm's base_model", lk["base_model"], written)
        expect_equal("manifest.base.spec vs the .dlm's base_model", m.base.spec, written)
        return written

    def config_digest() -> str:
        expect_equal("config_sha256", m.config_sha256, canonical_json_sha256(m.training_config))
        return m.config_sha256[:16]

    def lock_versions() -> str:
        versions = lk.get("pinned_versions") or {}
        torch_v = versions.get("torch")
        if not isinstance(torch_v, str) or not version_major(torch_v).isdigit():
            raise CheckFailed(f"pinned_versions.torch: {torch_v!r} is not a torch version")
        if m.base.kind == "builtin":
            # The builtin base's revision names the library versions that built it, which
            # are the versions that trained the adapter: the lock must agree with it.
            derived = builtin_revision(versions)
            if derived != lk["base_model_revision"]:
                raise CheckFailed(
                    f"pinned_versions (torch {torch_v}, transformers "
                    f"{versions.get('transformers')}, tokenizers {versions.get('tokenizers')}) "
                    f"did not build base revision {lk['base_model_revision']} (they give "
                    f"{derived}): the lock does not record the environment that trained this"
                )
            return f"torch {torch_v}; versions agree with base {derived}"
        return f"torch {torch_v}"

    checks.run("lock.binding", lock_binding)
    checks.run("lock.fields", lock_fields)
    checks.run("lock.versions", lock_versions)
    checks.run("doc.sha256", doc_sha)
    checks.run("doc.base_model", doc_base_model)
    checks.run("config.digest", config_digest)
    return manifest, lock


def version_major(version: str) -> str:
    return version.split("+")[0].split(".")[0]


def builtin_revision(versions: dict[str, Any]) -> str:
    """The revision `builtin:tiny` has when built with these library versions."""
    from dlm_git.base.tiny import tiny_spec

    spec = tiny_spec(
        {
            "tokenizers": versions.get("tokenizers"),
            "torch": str(versions.get("torch")).split("+")[0],
            "transformers": versions.get("transformers"),
        }
    )
    return "tiny-" + canonical_json_sha256(spec)[:16]


def sources_checks(
    checks: Checks, manifest: Manifest, doc_path: Path, repo_root: Path, read_outside: bool = False
) -> None:
    """Re-expand the document's sources and sections and compare with the manifest
    (`doc.sources.compare_sources`). Sources outside the repository are read only with
    `read_outside` (the work tree: this machine's files are the inputs); a commit holds
    no copy of them, so for a commit they are absent: the files inside the repository
    and the record's own root are still compared, and a difference there fails."""
    from dlm_git.doc.parser import parse_document
    from dlm_git.doc.sources import Outside, SourcesComparison, compare_sources, expand_sources
    from dlm_git.manifest.records import sources_record

    state: dict[str, Any] = {}

    def sources() -> str:
        doc = parse_document(doc_path)
        outside = Outside.READ if read_outside else Outside.SKIP
        expanded = expand_sources(doc, repo_root, outside)
        recorded = [(f.relpath, f.sha256, f.size) for f in manifest.sources.files]
        found: SourcesComparison = compare_sources(doc, expanded, recorded)
        state["found"] = found
        if found.differs:
            raise CheckFailed(f"sources differ from the manifest ({found.describe()})")
        root = sources_record(recorded).merkle_root
        expect_equal(
            "sources merkle root vs the manifest's files", manifest.sources.merkle_root, root
        )
        old = f"; {found.legacy} recorded by their raw bytes (older record)" if found.legacy else ""
        if found.unread:
            raise CheckAbsent(
                f"{found.unread_files} files from outside the repository"
                f" ({', '.join(found.unread)}) are in no commit and were not checked;"
                f" the {len(recorded) - found.unread_files} inside it match{old}"
            )
        return f"{len(recorded)} files, root {root[:16]}{old}"

    def sections() -> str:
        found: SourcesComparison | None = state.get("found")
        if found is None:
            raise CheckFailed("sources could not be expanded")
        recorded = manifest.section_ids
        if not found.sections_match(recorded):
            expected = [i for i in found.section_ids if i is not None]
            if len(expected) == len(found.section_ids) and sorted(expected) == sorted(recorded):
                raise CheckFailed("section order differs from the manifest")
            raise CheckFailed(
                f"section ids differ from the manifest ({len(found.section_ids)} expected, "
                f"{len(recorded)} recorded)"
            )
        unread = found.section_ids.count(None)
        if unread:
            raise CheckAbsent(
                f"{unread} section ids of files outside the repository cannot be recomputed;"
                f" the other {len(recorded) - unread} are in order"
            )
        return f"{len(recorded)} sections in order"

    checks.run("sources.root", sources)
    checks.run("sections.order", sections)


def adapter_checks(checks: Checks, manifest: Manifest, adapter_dir: Path | None) -> None:
    recorded = manifest.adapter

    def files() -> str:
        if adapter_dir is None or not adapter_dir.is_dir():
            raise CheckAbsent("adapter directory is not available (run `dvc pull` or `dvc repro`)")
        names = sorted(p.name for p in adapter_dir.iterdir())
        expected = sorted(recorded.files)
        if names != expected:
            extra, missing = sorted(set(names) - set(expected)), sorted(set(expected) - set(names))
            raise CheckFailed(f"adapter files differ (extra: {extra}, missing: {missing})")
        return f"{len(names)} files"

    if not checks.run("adapter.files", files):
        return
    assert adapter_dir is not None

    computed: dict[str, Any] = {}

    def digests() -> str:
        try:
            record = computed["record"] = adapter_record(adapter_dir)
        except ValueError as exc:
            raise CheckFailed(str(exc)) from None
        for name, entry in recorded.files.items():
            actual = record.files[name]
            expect_equal(f"{name} size", entry.size, actual.size)
            expect_equal(f"{name} sha256", entry.sha256, actual.sha256)
        return f"{ADAPTER_WEIGHTS} {recorded.files[ADAPTER_WEIGHTS].sha256[:16]}"

    def tensors() -> str:
        if not (adapter_dir / ADAPTER_WEIGHTS).is_file():
            raise CheckFailed(f"no {ADAPTER_WEIGHTS} in the adapter")
        # adapter.sha256 already read every tensor (one pass); read again only if it failed
        digest = computed.get("record") or digest_safetensors(adapter_dir / ADAPTER_WEIGHTS)
        actual = {t.name: (t.dtype, list(t.shape), t.digest) for t in digest.tensors}
        expected = {t.name: (t.dtype, t.shape, t.digest) for t in recorded.tensors}
        if set(actual) != set(expected):
            extra, missing = (
                sorted(set(actual) - set(expected)),
                sorted(set(expected) - set(actual)),
            )
            raise CheckFailed(f"tensor names differ (extra: {extra[:3]}, missing: {missing[:3]})")
        for name in sorted(expected):
            if actual[name] != expected[name]:
                a, e = actual[name], expected[name]
                what = "dtype" if a[0] != e[0] else "shape" if a[1] != e[1] else "bytes"
                raise CheckFailed(f"tensor {name}: {what} differ from the manifest")
        expect_equal("tensor root", recorded.tensor_root, digest.tensor_root)
        return f"{len(actual)} tensors, root {digest.tensor_root[:16]}"

    checks.run("adapter.sha256", digests)
    checks.run("adapter.tensors", tensors)


FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16"})


def lora_structure_check(
    checks: Checks,
    manifest: Manifest,
    adapter_dir: Path | None,
    base_dir: Path | None,
    bases: BaseReads | None = None,
) -> None:
    """Every lora_A/lora_B pair is shaped by r and a targeted linear module of the base.
    `bases`: the run's reads of its bases (else the base is read here)."""

    def structure() -> str:
        if adapter_dir is None:
            raise CheckAbsent("adapter not available")
        try:
            config = load_json(read_regular(adapter_dir / ADAPTER_CONFIG, MAX_RECORD_BYTES))
        except (OSError, ValueError) as exc:
            raise CheckFailed(f"{ADAPTER_CONFIG} cannot be read: {type(exc).__name__}") from None
        if not isinstance(config, dict):
            raise CheckFailed(f"{ADAPTER_CONFIG} is not a JSON object")
        cfg = manifest.training_config
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
        r = int(config["r"])
        targets = set(config.get("target_modules") or [])
        if not (adapter_dir / ADAPTER_WEIGHTS).is_file():
            raise CheckFailed(f"no {ADAPTER_WEIGHTS} in the adapter")
        header, _ = read_safetensors_header(adapter_dir / ADAPTER_WEIGHTS)
        base_shapes = None
        if base_dir is not None:
            base_shapes = (bases or BaseReads()).linear_shapes(base_dir)
        if base_shapes is None:
            raise CheckAbsent("base weights not available to check LoRA shapes against")
        pairs = 0
        for name, info in header.items():
            if name == "__metadata__":
                continue
            shape = list(info["shape"])
            if info["dtype"] not in FLOAT_DTYPES:
                raise CheckFailed(f"{name}: dtype {info['dtype']} is not a floating-point type")
            if ".lora_A." in name or ".lora_B." in name:
                module = name.split(".lora_")[0]
                leaf = module.rsplit(".", 1)[-1]
                if leaf not in targets:
                    raise CheckFailed(f"{name}: module '{leaf}' is not a target module")
                base_name = module.removeprefix("base_model.model.") + ".weight"
                if base_name not in base_shapes:
                    raise CheckFailed(f"{name}: no base weight {base_name}")
                out_f, in_f = base_shapes[base_name]
                want = [r, in_f] if ".lora_A." in name else [out_f, r]
                if shape != want:
                    raise CheckFailed(f"{name}: shape {shape}, expected {want} (r={r})")
                pairs += 1
            else:
                raise CheckFailed(f"{name}: not a LoRA tensor")
        if pairs == 0:
            raise CheckFailed("no LoRA tensors in the adapter")
        return f"{pairs // 2} LoRA pairs consistent with r={r}"

    checks.run("adapter.structure", structure)


def _base_linear_shapes(base_dir: Path) -> dict[str, tuple[int, int]] | None:
    shapes: dict[str, tuple[int, int]] = {}
    files = sorted(base_dir.glob("*.safetensors"))
    if not files:
        return None
    for f in files:
        header, _ = read_safetensors_header(f)
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
    manifest: Manifest,
    base_dir: Path | None,
    revision: str | None,
    bases: BaseReads | None = None,
) -> None:
    """The base on this machine is the one the manifest records (tensor root, tokenizer,
    config). `bases`: the run's reads of its bases (else the base is read here)."""

    def identity() -> str:
        if base_dir is None:
            raise CheckAbsent(f"base {manifest.base.spec} is not available here")
        ident = (bases or BaseReads()).identity(base_dir, revision)
        expect_equal("base tensor root", manifest.base.tensor_root, ident.tensor_root)
        expect_equal("base tokenizer sha256", manifest.tokenizer_sha256, ident.tokenizer_sha256)
        if manifest.base.config_sha256 is None:
            return f"tensor root {ident.tensor_root[:16]} (config.json not recorded)"
        expect_equal("base config.json sha256", manifest.base.config_sha256, ident.config_sha256)
        return f"tensor root {ident.tensor_root[:16]}, config {ident.config_sha256 or '-':.16}"

    checks.run("base.identity", identity)


def dvc_checks(checks: Checks, files: DocFiles, adapter_dir: Path | None, repo_root: Path) -> None:
    """dvc.lock's record of adapter/ names exactly the adapter files the manifest binds."""

    def binding() -> str:
        if files.dvc_lock_bytes is None:
            raise CheckFailed("dvc.lock is missing")
        out_path = (
            f"{files.doc_rel}/{ADAPTER_DIR}" if files.doc_rel not in ("", ".") else ADAPTER_DIR
        )
        out = lock_outs(files.dvc_lock_bytes).find(out_path)
        if out is None:
            raise CheckFailed(f"dvc.lock records no out {out_path}")
        listing = dir_listing(repo_root, out.md5)
        if listing is None and adapter_dir is None:
            raise CheckAbsent(f"DVC cache lacks {out.md5} (run `dvc pull`)")
        if adapter_dir is None:
            raise CheckAbsent("adapter not available")
        actual = {p.name: md5_file(p) for p in sorted(adapter_dir.iterdir()) if p.is_file()}
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
