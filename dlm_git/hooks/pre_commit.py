"""The pre-commit hook: refuse commits that break the determinism contract.

Documents are found from one `ls-files -z` of the whole index (`dlm_git.docset`):
params.yaml's `documents:`, every `.dlm` beside records (dlm.lock / manifest.json) and
every dlm.lock, listed or not, and every staged `.dlm`. For every document the staged
change concerns (a staged path in its directory or its source directories, or a staged
dvc.lock that records its adapter differently from HEAD's), as the *index* has it (git
sets `GIT_INDEX_FILE` for `git commit -a` / `git commit <path>`, and every read here goes
through git's plumbing, which honours it):
0. pipeline        a document with records that params.yaml's `documents:` leaves out
                   (dropped from the pipeline), a listed directory without a .dlm, and,
                   when params.yaml is staged, its own problems: ERROR
1. lock drift      staged dlm.lock vs HEAD's, by the shared policy table (lock/policy.py);
                   ERROR unless `supersedes` is the sha256 of HEAD's lock
2. adapter sha     staged manifest.json's adapter hashes vs the adapter the staged dvc.lock
                   names (DVC cache), and manifest.lock_sha256 vs the staged lock
3. stale record    staged .dlm / sources vs the staged manifest (dlm_sha256, sources root);
                   the sources are re-expanded from the index only when something that
                   can change their root differs from HEAD (see `sources_unchanged`)
4. determinism     same inputs as HEAD's manifest but another adapter: ERROR when the
                   numerical setup is the same and its profile promises bits (class
                   `strong` by this dlm-git's profile table), else WARN naming the cause
5. base            staged lock.base_model / manifest base.spec vs the staged .dlm's
                   frontmatter `base_model`: ERROR
6. signature       a staged dlm.sig judged as `verify` will judge the commit
                   (`dlm_git.sign.judge`): not signing the staged records, malformed, or
                   failing a trusted key: ERROR, requireSignature or not; missing or by an
                   untrusted key: ERROR only with `dlm-git.requireSignature`
The pre-merge-commit hook runs the same checks on a merge's result (`run(action="merge")`).
Strict mode (`DLM_GIT_STRICT=1` or `git config dlm-git.strict true`) makes WARN an ERROR.
Never imports torch, transformers, peft or dvc.
"""

from __future__ import annotations

import os
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlm_git import gitio, numerics
from dlm_git.doc.peek import outside_sources, peek_base_model, peek_frontmatter, source_dirs
from dlm_git.docset import (
    FIX_PARAMS,
    PARAMS_NAME,
    Params,
    Tree,
    assess,
    documents,
    read_params,
)
from dlm_git.dvcfiles import DvcRecordError, cache_object, dir_listing, find_out_in, stages_naming
from dlm_git.errors import DlmGitError, EnvironmentFailure
from dlm_git.hashing import digest_text, sha256_bytes
from dlm_git.hooks.findings import (
    HookFinding,
    Level,
    emit,
    require_signature,
    strict_mode,
    strict_upgrade,
)
from dlm_git.hooks.hashcache import HashCache
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME
from dlm_git.lock.decision import judge
from dlm_git.lock.io import parse_lock_json
from dlm_git.output import error_line
from dlm_git.safeparse import MAX_DEPTH, TooDeep, load_json

RETRAIN = "run `dvc repro` (or `dlm-git train`) and stage the results"
ACCEPT = (
    "if intended, re-train with `--update-lock` (pipeline: lock_mode: update)"
    " to record `supersedes`"
)
LOCK_TUPLE = (
    "pinned_versions",
    "hardware_tier",
    "determinism_flags",
    "seed",
    "cuda_version",
    "rocm_version",
)


@dataclass
class DocState:
    rel: str
    dlm_name: str | None
    dlm: bytes | None
    lock: bytes | None
    manifest: bytes | None
    head_lock: bytes | None
    head_manifest: bytes | None
    source_dirs: list[str]
    head_dlm: bytes | None = None
    """HEAD's bytes of the same .dlm path (None: no HEAD, or the file is new)."""
    signature: bytes | None = None
    """The staged dlm.sig (None: none)."""


@dataclass
class Discovery:
    """The documents a staged change may concern, and what was read to find them."""

    rels: list[str]
    """Document directories (see `discover`)."""
    params: Params | None
    """params.yaml's `documents:` as the index has it; None: it nests too deep to read."""
    tree: Tree
    entries: list[tuple[str, str, str]]
    """The whole index: (mode, object id, path) of every stage-0 file."""
    blobs: dict[str, bytes | None]
    """`:params.yaml`, `:dvc.lock` (and `HEAD:dvc.lock` when there is a HEAD)."""


def discover(
    root: Path, staged: list[str], reader: gitio.BlobReader | None = None, has_head: bool = False
) -> Discovery:
    """Document directories, as the index has them (`dlm_git.docset.documents`):
    params.yaml's `documents:` (every `.dlm`'s directory without one), every directory
    with records whether listed or not, and every directory with a staged `.dlm`. One
    `ls-files` of the whole index (NUL-separated: any byte in a name)."""
    if reader is None:
        with gitio.BlobReader(root) as own:
            return discover(root, staged, own, has_head)
    entries = gitio.index_entries([], root)
    ids = {path: oid for _, oid, path in entries}
    tree = Tree.from_paths(ids)
    names = (PARAMS_NAME, "dvc.lock")
    read = reader.read_blobs(ids[n] for n in names if n in ids)
    blobs = {f":{n}": read.get(ids[n]) if n in ids else None for n in names}
    if has_head:
        blobs.update(reader.read(["HEAD:dvc.lock"]))
    try:
        params: Params | None = read_params(blobs[f":{PARAMS_NAME}"])
    except TooDeep:
        params = None
    listed = documents(params or Params(None, []), tree)
    new = [posixpath.dirname(p) or "." for p in staged if p.endswith(".dlm")]
    return Discovery(list(dict.fromkeys([*listed, *new])), params, tree, entries, blobs)


def _field(obj: Any, *keys: str) -> Any:
    """`obj[k1][k2]...` where every level is a JSON object; None where one is not (a
    hostile manifest or lock may hold a list or a number anywhere)."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _recorded_sources(m: dict[str, Any]) -> list[tuple[str, str, int]] | None:
    """manifest.json's `sources.files` as (relpath, sha256, size); None if malformed."""
    files = _field(m, "sources", "files")
    if not isinstance(files, list):
        return None
    out = []
    for f in files:
        rel, sha, size = (_field(f, k) for k in ("relpath", "sha256", "size"))
        if not (isinstance(rel, str) and isinstance(sha, str) and type(size) is int):
            return None
        if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha) or size < 0:
            return None
        out.append((rel, sha, size))
    return out


def _in(path: str, directory: str) -> bool:
    return directory in ("", ".") or path == directory or path.startswith(directory + "/")


def _under_any(path: str, wanted: set[str]) -> bool:
    """`_in(path, d)` for some d in `wanted`, by walking up `path` (a set lookup per level)."""
    if "." in wanted or "" in wanted or path in wanted:
        return True
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in wanted:
            return True
    return False


def load_states(
    root: Path,
    rels: list[str],
    has_head: bool | None = None,
    symlinks: list[str] | None = None,
    reader: gitio.BlobReader | None = None,
    keep: Callable[[DocState], bool] | None = None,
    entries: list[tuple[str, str, str]] | None = None,
) -> list[DocState]:
    """The staged and HEAD versions of every document's files: one `ls-files` (none when
    `entries`, the whole index's `(mode, object id, path)`, is given) and one
    `cat-file --batch` process for all documents together (a git process costs
    milliseconds). The .dlm files are read first; documents `keep` turns down (it sees
    `rel`, `dlm_name`, `dlm`, `head_dlm` and `source_dirs`) are dropped before their
    lock and manifest are read. Symlinks found in the index under `rels` are appended to
    `symlinks` when given."""
    if not rels:
        return []
    if reader is None:
        with gitio.BlobReader(root) as own:
            return load_states(root, rels, has_head, symlinks, own, keep, entries)
    if entries is None:
        entries = gitio.index_entries(rels, root)
    else:
        wanted = set(rels)
        entries = [e for e in entries if _under_any(e[2], wanted)]
    dlms_in: dict[str, list[str]] = {}
    index: dict[str, str] = {}  # path -> object id of the staged file
    for mode, oid, path in entries:
        index[path] = oid
        if path.endswith(".dlm"):
            dlms_in.setdefault(posixpath.dirname(path) or ".", []).append(path)
        if symlinks is not None and mode == gitio.SYMLINK_MODE:
            symlinks.append(path)
    if has_head is None:
        has_head = gitio.resolve_commit("HEAD", root) is not None

    def read(paths: list[str]) -> dict[str, bytes | None]:
        """`:path` and `HEAD:path` of every path; the staged ones by the ids listed above."""
        staged = reader.read_blobs(index[p] for p in paths if p in index)
        blobs = {f":{p}": staged.get(index[p]) if p in index else None for p in paths}
        if has_head:
            blobs.update(reader.read(f"HEAD:{p}" for p in paths))
        return blobs

    blobs = read([dlms[0] for dlms in (dlms_in.get(rel, []) for rel in rels) if len(dlms) == 1])
    states = []
    for rel in rels:
        dlms = dlms_in.get(rel, [])
        dlm_name = dlms[0] if len(dlms) == 1 else None
        dlm = blobs.get(f":{dlm_name}") if dlm_name else None
        state = DocState(
            rel=rel,
            dlm_name=dlm_name,
            dlm=dlm,
            lock=None,
            manifest=None,
            head_lock=None,
            head_manifest=None,
            source_dirs=source_dirs(rel, dlm) if dlm else [],
            head_dlm=blobs.get(f"HEAD:{dlm_name}") if dlm_name else None,
        )
        if keep is None or keep(state):
            states.append(state)
    paths = []
    for state in states:
        prefix = "" if state.rel == "." else state.rel + "/"
        paths += [f"{prefix}{LOCK_NAME}", f"{prefix}{MANIFEST_NAME}", f"{prefix}{SIGNATURE_NAME}"]
    blobs = read(paths)
    for state in states:
        prefix = "" if state.rel == "." else state.rel + "/"
        state.lock = blobs.get(f":{prefix}{LOCK_NAME}")
        state.manifest = blobs.get(f":{prefix}{MANIFEST_NAME}")
        state.head_lock = blobs.get(f"HEAD:{prefix}{LOCK_NAME}")
        state.head_manifest = blobs.get(f"HEAD:{prefix}{MANIFEST_NAME}")
        state.signature = blobs.get(f":{prefix}{SIGNATURE_NAME}")
    return states


def sources_spec(dlm: bytes | None) -> tuple[Any, Any] | None:
    """What decides which files a document's `training.sources` take (None: unreadable)."""
    training = peek_frontmatter(dlm or b"").get("training") if dlm else None
    if not isinstance(training, dict):
        return None
    return training.get("sources"), training.get("sources_policy")


def touched(
    state: DocState, staged: list[str], record_changed: Callable[[DocState], bool] | None = None
) -> bool:
    """Whether the staged change concerns the document: a staged path in its directory or
    its source directories, or a staged dvc.lock (when `record_changed` is given: only if
    the dvc.lock record of its adapter changed)."""
    dirs = [state.rel, *state.source_dirs]
    if any(_in(p, d) for d in dirs for p in staged):
        return True
    return "dvc.lock" in staged and (record_changed is None or record_changed(state))


def adapter_path(rel: str) -> str:
    return ADAPTER_DIR if rel == "." else f"{rel}/{ADAPTER_DIR}"


def adapter_record_changed(blobs: dict[str, bytes | None]) -> Callable[[DocState], bool]:
    """Whether the staged dvc.lock records a document's adapter differently from HEAD's."""

    def changed(state: DocState) -> bool:
        index, head = blobs.get(":dvc.lock"), blobs.get("HEAD:dvc.lock")
        if index is None or head is None:
            return index is not head
        path = adapter_path(state.rel)
        try:
            stages = stages_naming(index, path)
            if stages and stages == stages_naming(head, path):
                return False  # the same text records it: nothing to parse
            return find_out_in(index, path) != find_out_in(head, path)
        except (ValueError, yaml.YAMLError, UnicodeDecodeError):
            return True  # let the check say what is wrong with it

    return changed


class Checker:
    def __init__(
        self,
        root: Path,
        strict: bool | None,
        staged: list[str] | None = None,
        symlinks: list[str] | None = None,
        blobs: dict[str, bytes | None] | None = None,
    ) -> None:
        self.root = root
        self._strict = strict
        self.staged = staged
        """Paths whose index entry differs from HEAD; None: unknown (always re-expand)."""
        self.symlinks = symlinks or []
        """Symlinks in the index under the documents' source directories."""
        self.findings: list[HookFinding] = []
        self.hashes = HashCache(root)
        self.blobs = blobs or {}
        """Objects already read (`:dvc.lock`), so they are not read twice."""
        self._required: bool | None = None
        self._keys: list[Any] | None = None

    @property
    def strict(self) -> bool:
        """Strict mode; with `strict=None`, read (once) only when a WARN needs it, which
        spares a `git config` process on the common path."""
        if self._strict is None:
            self._strict = strict_mode(self.root)
        return self._strict

    def add(self, level: Level, doc: str, check: str, what: str, fix: str) -> None:
        self.findings.append(HookFinding(level, doc, check, what, fix))

    def check(self, s: DocState) -> None:
        doc = s.rel
        if s.dlm_name is None:
            if s.lock is not None or s.manifest is not None:
                self.add(
                    "ERROR",
                    doc,
                    "record",
                    "dlm.lock/manifest.json staged without exactly one .dlm",
                    "keep one .dlm per document directory",
                )
            return
        if s.manifest is None and s.lock is None:
            self.add(
                "WARN",
                doc,
                "record",
                "document not trained yet (no manifest.json, no dlm.lock)",
                RETRAIN,
            )
            if s.signature is not None:  # it signs records that are not there
                self.check_signature(s, None)
            return
        lock = self.check_lock(s)
        manifest = self.parse_manifest(s)
        if manifest is None or lock is None:
            return
        self.check_binding(s, manifest)
        self.check_base(s, manifest, lock)
        self.check_stale(s, manifest)
        self.check_drift(s, manifest, lock)
        self.check_signature(s, manifest)

    def signature_required(self) -> bool:
        """`dlm-git.requireSignature` (read once, only when a document needs it)."""
        if self._required is None:
            self._required = require_signature(self.root)
        return self._required

    def trusted_keys(self) -> list[Any]:
        """The keys that judge a staged signature, read once: the user's own and the
        policy of HEAD, the parent of the commit being made (as `verify` will judge it)."""
        if self._keys is None:
            from dlm_git.sign.trust import trusted_keys

            head = gitio.resolve_commit("HEAD", self.root)
            self._keys = trusted_keys(self.root, head)[0]
        return self._keys

    def check_signature(self, s: DocState, m: dict[str, Any] | None) -> None:
        """A staged `dlm.sig` is judged as `verify` will judge the commit
        (`dlm_git.sign.judge`, with `required` = `dlm-git.requireSignature`): one that no
        longer signs the staged records, or is malformed, or fails a trusted key is an
        ERROR whether or not a signature is required; a missing or untrusted one only when
        it is. No key is read and `cryptography` is not imported for an unsigned document."""
        if s.signature is None and not self.signature_required():
            return
        from dlm_git.sign.bundle import ADAPTER_FILES, signed_digests
        from dlm_git.sign.judge import fix_for, judge

        assert s.dlm_name is not None
        recorded = {n: _field(m, "adapter", "files", n, "sha256") for n in ADAPTER_FILES}
        name = posixpath.basename(s.dlm_name)
        expected = signed_digests(name, s.dlm, s.lock, s.manifest, recorded)
        keys = self.trusted_keys() if s.signature is not None else []
        decision = judge(s.signature, expected, keys, self.signature_required())
        for check, ok, detail in decision.checks:
            if ok:
                continue
            what = detail
            if check == "signature.binding":
                what = f"{SIGNATURE_NAME} does not sign the staged records: {detail}"
            self.add("ERROR", s.rel, check, what, fix_for(check, s.rel))

    def check_lock(self, s: DocState) -> dict[str, Any] | None:
        if s.lock is None:
            self.add("ERROR", s.rel, "lock", "manifest.json staged without dlm.lock", RETRAIN)
            return None
        try:
            lock = parse_lock_json(s.lock, f"{s.rel}/{LOCK_NAME}")
        except DlmGitError as exc:
            self.add(
                "ERROR",
                s.rel,
                "lock",
                f"dlm.lock does not parse: {exc.message}",
                "restore it or re-train with --update-lock",
            )
            return None
        if s.head_lock is None:
            return lock
        try:
            head = parse_lock_json(s.head_lock, f"HEAD:{s.rel}/{LOCK_NAME}")
        except DlmGitError:
            return lock  # HEAD's lock was already broken: nothing to compare against
        decision = judge(
            head, lock, strict=lambda: self.strict, prior_sha256=sha256_bytes(s.head_lock)
        )
        for f in decision.errors:
            self.add("ERROR", s.rel, "lock.drift", f"lock drift: {f.describe()}", ACCEPT)
        for f in decision.warnings:
            self.add(
                "WARN",
                s.rel,
                "lock.drift",
                f"lock drift: {f.describe()}",
                "allowed; set DLM_GIT_STRICT=1 to refuse",
            )
        return lock

    def parse_manifest(self, s: DocState) -> dict[str, Any] | None:
        if s.manifest is None:
            self.add("ERROR", s.rel, "manifest", "dlm.lock staged without manifest.json", RETRAIN)
            return None
        try:
            manifest = load_json(s.manifest.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            manifest = None
        files = _field(manifest, "adapter", "files")
        if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
            self.add("ERROR", s.rel, "manifest", "manifest.json does not parse", RETRAIN)
            return None
        return manifest  # type: ignore[no-any-return]

    def check_binding(self, s: DocState, m: dict[str, Any]) -> None:
        if m.get("lock_sha256") != sha256_bytes(s.lock or b""):
            self.add(
                "ERROR",
                s.rel,
                "adapter.binding",
                "manifest.json does not bind the staged dlm.lock (lock_sha256)",
                RETRAIN,
            )
        recorded: dict[str, dict[str, Any]] = m["adapter"]["files"]
        if ":dvc.lock" not in self.blobs:
            self.blobs.update(gitio.cat_files([":dvc.lock"], self.root))
        dvc_data = self.blobs.get(":dvc.lock")
        adapter_rel = adapter_path(s.rel)
        if dvc_data is None:
            workspace = self.root / adapter_rel
            if not workspace.is_dir():
                self.add(
                    "WARN",
                    s.rel,
                    "adapter.binding",
                    "no dvc.lock and no adapter/ here: adapter not checked",
                    "run `dvc repro`",
                )
                return
            actual = {p.name: p for p in workspace.iterdir() if p.is_file()}
        else:
            try:
                out = find_out_in(dvc_data, adapter_rel)
                listing = dir_listing(self.root, out.md5) if out is not None else None
            except DvcRecordError as exc:
                what = f"{exc.subject}: {exc.message}"
                self.add("ERROR", s.rel, "adapter.binding", what, exc.hint or RETRAIN)
                return
            if out is None:
                self.add(
                    "ERROR", s.rel, "adapter.binding", f"dvc.lock records no {adapter_rel}", RETRAIN
                )
                return
            if listing is None:
                self.add(
                    "ERROR",
                    s.rel,
                    "adapter.binding",
                    f"adapter {out.md5} named by dvc.lock is not in the DVC cache",
                    "run `dvc pull` or `dvc repro`",
                )
                return
            actual = {name: cache_object(self.root, md5) for name, md5 in listing.items()}
        if sorted(actual) != sorted(recorded):
            self.add(
                "ERROR",
                s.rel,
                "adapter.binding",
                f"adapter files {sorted(actual)} differ from manifest.json's {sorted(recorded)}",
                RETRAIN,
            )
            return
        for name, path in sorted(actual.items()):
            try:
                digest = self.hashes.sha256(path)
            except OSError:
                self.add(
                    "ERROR",
                    s.rel,
                    "adapter.binding",
                    f"adapter file {name} is missing from the DVC cache",
                    "run `dvc pull`",
                )
                return
            expected = str(recorded[name].get("sha256"))
            if digest != expected:
                self.add(
                    "ERROR",
                    s.rel,
                    "adapter.sha",
                    f"{name} sha256 {digest[:16]} is not manifest.json's {expected[:16]}",
                    RETRAIN,
                )

    def check_base(self, s: DocState, m: dict[str, Any], lock: dict[str, Any]) -> None:
        """The records name the base the staged .dlm's frontmatter names."""
        written = peek_base_model(s.dlm or b"")
        if written is None:
            self.add(
                "ERROR",
                s.rel,
                "base",
                f"{s.dlm_name}'s frontmatter does not give base_model as a string",
                "fix the frontmatter, then re-train",
            )
            return
        recorded = {
            "dlm.lock base_model": lock.get("base_model"),
            "manifest.json base.spec": _field(m, "base", "spec"),
        }
        wrong = [f"{name} {value!r}" for name, value in recorded.items() if value != written]
        if wrong:
            self.add(
                "ERROR",
                s.rel,
                "base",
                f"{s.dlm_name} trains on base_model {written!r} but its records name another"
                f" base: {' and '.join(wrong)}",
                RETRAIN,
            )

    def check_stale(self, s: DocState, m: dict[str, Any]) -> None:
        """The staged .dlm and sources are what the staged manifest was trained on (both
        hashed in the form git stores: `hashing.canonical_text`). Sources outside the
        repository are not in git: a WARN names them, and the files inside it are
        still compared."""
        if digest_text(s.dlm or b"").form_of(m.get("dlm_sha256")) is None:
            self.add(
                "ERROR",
                s.rel,
                "stale",
                f"{s.dlm_name} changed since it was trained (manifest.json is stale)",
                RETRAIN,
            )
            return
        outside = outside_sources(s.rel, s.dlm or b"")
        if outside:
            self.add(
                "WARN",
                s.rel,
                "stale",
                f"training.sources outside the repository ({', '.join(outside)}) are not in"
                " git: their part of the record is not checked",
                "keep sources inside the repository to have them checked",
            )
        if self.sources_unchanged(s, m):
            return
        found = self.staged_sources(s, m)
        if isinstance(found, HookFinding):
            self.findings.append(found)
        elif not found:
            self.add(
                "ERROR",
                s.rel,
                "stale",
                "staged sources differ from those manifest.json was trained on",
                RETRAIN,
            )

    def sources_unchanged(self, s: DocState, m: dict[str, Any]) -> bool:
        """True when the staged sources root is HEAD's without re-expanding them: the same
        .dlm path with the same `training.sources` / `sources_policy`, nothing staged under
        the source directories (so the index holds HEAD's files there), no symlinks there
        (their targets may lie elsewhere), and the staged manifest records HEAD's root.
        HEAD's record was checked when HEAD was committed (unless with --no-verify; the
        pre-push hook and `dlm-git verify COMMIT` re-expand from scratch)."""
        if self.staged is None or s.head_dlm is None or s.head_manifest is None:
            return False
        spec = sources_spec(s.dlm)
        if spec is None or spec != sources_spec(s.head_dlm):
            return False
        dirs = s.source_dirs
        if any(_in(p, d) for d in dirs for p in [*self.staged, *self.symlinks]):
            return False
        try:
            head_root = _field(load_json(s.head_manifest.decode("utf-8")), "sources", "merkle_root")
        except (ValueError, UnicodeDecodeError):
            return False
        return isinstance(head_root, str) and head_root == _field(m, "sources", "merkle_root")

    def staged_sources(self, s: DocState, m: dict[str, Any]) -> bool | HookFinding:
        """Whether the sources of the *staged* tree (materialized in a temp dir; those
        outside the repository not read) are the files manifest.json records, by
        `doc.sources.compare_sources`, and its root is the root of those files."""
        recorded = _recorded_sources(m)
        if recorded is None:
            return False
        if not s.source_dirs and not outside_sources(s.rel, s.dlm or b""):
            # No directives: the expansion is empty (the root of the empty tree, as
            # `sources_record([])` has it, without importing the pydantic records).
            from dlm_git.merkle import merkle_root

            return not recorded and _field(m, "sources", "merkle_root") == merkle_root([])
        import tempfile

        from dlm_git.doc.parser import parse_document
        from dlm_git.doc.sources import Outside, compare_sources, expand_sources
        from dlm_git.manifest.records import sources_record

        if sources_record(recorded).merkle_root != _field(m, "sources", "merkle_root"):
            return False
        with tempfile.TemporaryDirectory(prefix="dlm-git-hook-") as tmp:
            dest = Path(tmp)
            (dest / ".git").mkdir()  # marks the repository root for the strict-policy check
            gitio.materialize([s.rel, *s.source_dirs], dest, self.root)
            try:
                doc = parse_document(dest / (s.dlm_name or ""))
                expanded = expand_sources(doc, dest, Outside.SKIP)
            except DlmGitError as exc:
                return HookFinding(
                    "ERROR",
                    s.rel,
                    "stale",
                    f"staged document does not load: {exc.message}",
                    "fix it, then re-train",
                )
            return not compare_sources(doc, expanded, recorded).differs

    def check_drift(self, s: DocState, m: dict[str, Any], lock: dict[str, Any]) -> None:
        if s.head_manifest is None or s.head_lock is None:
            return
        try:
            hm = load_json(s.head_manifest.decode("utf-8"))
            hl = load_json(s.head_lock.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return
        same_inputs = (
            _field(hm, "dlm_sha256") == m.get("dlm_sha256")
            and _field(hm, "sources", "merkle_root") == _field(m, "sources", "merkle_root")
            and _field(hm, "config_sha256") == m.get("config_sha256")
            and _field(hm, "base", "tensor_root") == _field(m, "base", "tensor_root")
            and _field(hm, "base", "config_sha256") == _field(m, "base", "config_sha256")
        )
        old = _field(hm, "adapter", "tensor_root")
        new = _field(m, "adapter", "tensor_root")
        if not same_inputs or old == new:
            return
        moved = f"same inputs as HEAD but a different adapter ({str(old)[:16]} -> {str(new)[:16]})"
        causes = setup_changes(hl, lock)
        if causes:
            self.add(
                "WARN",
                s.rel,
                "determinism",
                f"{moved}, explained by a different setup: {'; '.join(causes)}",
                "expected when the numerics setup changes; keep one profile per document"
                " (training.numerics, --numerics) to keep one adapter; see docs/determinism.md",
            )
            return
        flags = lock.get("determinism_flags")
        flags = flags if isinstance(flags, dict) else {}
        klass = numerics.determinism_class(flags, str(lock.get("hardware_tier")))
        profile = flags.get("numerics", "none recorded")
        self.add(
            "ERROR" if klass == "strong" else "WARN",
            s.rel,
            "determinism",
            f"{moved} under the same numerics setup (profile {profile}, class {klass}):"
            " the training was not reproducible",
            "investigate nondeterminism: compare `dlm-git doctor` with the lock; see docs/hooks.md",
        )


def setup_changes(prior: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between two locks' numerical setups (profile, flags, versions, ...)."""
    out: list[str] = []
    for key in LOCK_TUPLE:
        a, b = prior.get(key), current.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += [
                f"{key}.{k} {a.get(k)!r} -> {b.get(k)!r}"
                for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)
            ]
        else:
            out.append(f"{key} {a!r} -> {b!r}")
    return out


def pipeline_findings(
    params: Params | None, tree: Tree, rels: list[str], staged: list[str]
) -> dict[str, HookFinding]:
    """Check `pipeline.documents` (see `dlm_git.docset`) as the index has it: per
    document directory in `rels`, plus params.yaml's own problems under the key
    `params.yaml` (only when params.yaml is staged). `params` None: params.yaml nests too
    deep to be read."""
    out: dict[str, HookFinding] = {}
    if params is None:
        if PARAMS_NAME in staged:
            what = f"does not parse: nested deeper than {MAX_DEPTH} levels"
            out[PARAMS_NAME] = HookFinding("ERROR", PARAMS_NAME, "pipeline", what, FIX_PARAMS)
        return out
    if PARAMS_NAME in staged and params.problems:
        what = "; ".join(p for _, p in params.problems)
        out[PARAMS_NAME] = HookFinding("ERROR", PARAMS_NAME, "pipeline", what, FIX_PARAMS)
    for rel in rels:
        ok, detail, fix = assess(params, tree, rel)
        if not ok:
            out[rel] = HookFinding("ERROR", rel, "pipeline", detail, fix)
    return out


def run(cwd: Path, action: str = "commit") -> int:
    """Check the index against HEAD; `action` names what an ERROR refuses ("commit", or
    "merge" for the pre-merge-commit hook, where the index holds the merge result)."""
    root, head = gitio.toplevel_and_head(cwd)
    staged = gitio.staged_paths(root, head=head)
    if not staged:
        return 0
    symlinks: list[str] = []
    with gitio.BlobReader(root) as reader:
        found = discover(root, staged, reader, has_head=head is not None)
        rels, blobs = found.rels, found.blobs
        changed = adapter_record_changed(blobs)
        states = load_states(
            root,
            rels,
            has_head=head is not None,
            symlinks=symlinks,
            reader=reader,
            keep=lambda s: touched(s, staged, changed),
            entries=found.entries,
        )
    outside = sorted({d for s in states for d in s.source_dirs if not any(_in(d, r) for r in rels)})
    if outside:
        symlinks += [p for mode, p in gitio.ls_index(outside, root) if mode == gitio.SYMLINK_MODE]
    checked_rels = {s.rel for s in states}
    pipeline = pipeline_findings(found.params, found.tree, rels, staged)
    if PARAMS_NAME not in staged:  # params.yaml is HEAD's: only the documents the change concerns
        pipeline = {k: f for k, f in pipeline.items() if k in checked_rels}
    checker = Checker(root, None, staged=staged, symlinks=symlinks, blobs=blobs)
    checker.findings.extend(pipeline.values())
    for state in states:
        checker.check(state)
    checker.hashes.save()
    checked = len(checked_rels | (set(pipeline) - {PARAMS_NAME}))
    findings = checker.findings
    if not checked and not findings:
        return 0
    if any(f.level == "WARN" for f in findings):
        findings = strict_upgrade(findings, checker.strict)
    emit(findings, checked, action)
    return 1 if any(f.level == "ERROR" for f in findings) else 0


def main(action: str = "commit") -> int:
    try:
        return run(Path(os.getcwd()), action)
    except DlmGitError as exc:
        error_line(f"dlm-git: ERROR {exc.one_line()}")
        return 1
    except OSError as exc:  # the machine refused (a file gone, permissions): one line
        error_line(f"dlm-git: ERROR {EnvironmentFailure.from_os_error(exc).one_line()}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
