"""The pre-commit hook: refuse commits that break the determinism contract.

For every document directory touched by the staged change (the *index*: git sets
`GIT_INDEX_FILE` for `git commit -a` / `git commit <path>`, and every read here goes
through git's plumbing, which honours it):
1. lock drift      staged dlm.lock vs HEAD's, by the shared policy table (lock/policy.py);
                   ERROR unless `supersedes` is the sha256 of HEAD's lock
2. adapter sha     staged manifest.json's adapter hashes vs the adapter the staged dvc.lock
                   names (DVC cache), and manifest.lock_sha256 vs the staged lock
3. stale record    staged .dlm / sources vs the staged manifest (dlm_sha256, sources root)
4. determinism     same inputs as HEAD's manifest but another adapter: ERROR if `strong`
Strict mode (`DLM_GIT_STRICT=1` or `git config dlm-git.strict true`) makes WARN an ERROR.
Never imports torch, transformers, peft or dvc.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlm_git import gitio
from dlm_git.doc.peek import source_dirs
from dlm_git.dvcfiles import cache_object, dir_listing, find_out, parse_dvc_lock
from dlm_git.errors import DlmGitError
from dlm_git.hashing import sha256_bytes
from dlm_git.hooks.findings import HookFinding, strict_upgrade, summary
from dlm_git.hooks.hashcache import HashCache
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME
from dlm_git.lock.io import parse_lock_json
from dlm_git.lock.policy import apply_strict, by_severity, classify

RETRAIN = "run `dvc repro` (or `dlm-git train`) and stage the results"
ACCEPT = "if intended, re-train with `--update-lock` (pipeline: lock_mode: update) to record `supersedes`"
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


def discover(root: Path, staged: list[str]) -> list[str]:
    """Document directories: those params.yaml lists (index) plus any with a staged .dlm."""
    docs: list[str] = []
    params = gitio.cat_files([":params.yaml"], root).get(":params.yaml")
    if params:
        try:
            listed = (yaml.safe_load(params.decode("utf-8")) or {}).get("documents") or []
        except (yaml.YAMLError, UnicodeDecodeError, AttributeError):
            listed = []
        docs.extend(posixpath.normpath(str(d)) for d in listed if isinstance(d, str))
    for path in staged:
        if path.endswith(".dlm"):
            docs.append(posixpath.dirname(path) or ".")
    return list(dict.fromkeys(docs))


def _in(path: str, directory: str) -> bool:
    return directory in ("", ".") or path == directory or path.startswith(directory + "/")


def load_state(root: Path, rel: str) -> DocState:
    prefix = "" if rel == "." else rel + "/"
    listed = gitio.ls_files([rel], root)
    dlms = [p for p in listed if p.endswith(".dlm") and "/" not in p[len(prefix) :]]
    dlm_name = dlms[0] if len(dlms) == 1 else None
    names = [f":{prefix}{LOCK_NAME}", f":{prefix}{MANIFEST_NAME}"]
    names += [f"HEAD:{prefix}{LOCK_NAME}", f"HEAD:{prefix}{MANIFEST_NAME}"]
    if dlm_name:
        names.append(f":{dlm_name}")
    has_head = gitio.resolve_commit("HEAD", root) is not None
    blobs = gitio.cat_files([n for n in names if has_head or not n.startswith("HEAD:")], root)
    dlm = blobs.get(f":{dlm_name}") if dlm_name else None
    return DocState(
        rel=rel,
        dlm_name=dlm_name,
        dlm=dlm,
        lock=blobs.get(f":{prefix}{LOCK_NAME}"),
        manifest=blobs.get(f":{prefix}{MANIFEST_NAME}"),
        head_lock=blobs.get(f"HEAD:{prefix}{LOCK_NAME}"),
        head_manifest=blobs.get(f"HEAD:{prefix}{MANIFEST_NAME}"),
        source_dirs=source_dirs(rel, dlm) if dlm else [],
    )


def touched(state: DocState, staged: list[str]) -> bool:
    dirs = [state.rel, *state.source_dirs]
    return any(p == "dvc.lock" or any(_in(p, d) for d in dirs) for p in staged)


class Checker:
    def __init__(self, root: Path, strict: bool) -> None:
        self.root = root
        self.strict = strict
        self.findings: list[HookFinding] = []
        self.hashes = HashCache(root)
        self._dvc_lock: dict[str, Any] | None | bool = False

    def add(self, level: str, doc: str, check: str, what: str, fix: str) -> None:
        self.findings.append(HookFinding(level, doc, check, what, fix))  # type: ignore[arg-type]

    def dvc_lock(self) -> dict[str, Any] | None:
        if self._dvc_lock is False:
            data = gitio.cat_files([":dvc.lock"], self.root).get(":dvc.lock")
            try:
                self._dvc_lock = parse_dvc_lock(data) if data is not None else None
            except (ValueError, yaml.YAMLError, UnicodeDecodeError):
                self._dvc_lock = {"__unreadable__": True}
        return self._dvc_lock  # type: ignore[return-value]

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
            return
        lock = self.check_lock(s)
        manifest = self.parse_manifest(s)
        if manifest is None or lock is None:
            return
        self.check_binding(s, manifest)
        self.check_stale(s, manifest)
        self.check_drift(s, manifest, lock)

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
        findings = apply_strict(classify(head, lock), self.strict)
        accepted = lock.get("supersedes") == sha256_bytes(s.head_lock)
        for f in by_severity(findings, "ERROR"):
            if accepted:
                continue
            self.add("ERROR", s.rel, "lock.drift", f"lock drift: {f.describe()}", ACCEPT)
        for f in by_severity(findings, "WARN"):
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
            manifest = json.loads(s.manifest.decode("utf-8"))
            manifest["adapter"]["files"]  # noqa: B018 (shape check)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
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
        dvc = self.dvc_lock()
        adapter_rel = ADAPTER_DIR if s.rel == "." else f"{s.rel}/{ADAPTER_DIR}"
        if dvc is None:
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
        elif dvc.get("__unreadable__"):
            self.add(
                "ERROR",
                s.rel,
                "adapter.binding",
                "dvc.lock does not parse",
                "restore it or run `dvc repro`",
            )
            return
        else:
            out = find_out(dvc, adapter_rel)
            if out is None:
                self.add(
                    "ERROR", s.rel, "adapter.binding", f"dvc.lock records no {adapter_rel}", RETRAIN
                )
                return
            listing = dir_listing(self.root, out.md5)
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
            if digest != recorded[name].get("sha256"):
                self.add(
                    "ERROR",
                    s.rel,
                    "adapter.sha",
                    f"{name} sha256 {digest[:16]} is not manifest.json's {str(recorded[name].get('sha256'))[:16]}",
                    RETRAIN,
                )

    def check_stale(self, s: DocState, m: dict[str, Any]) -> None:
        if m.get("dlm_sha256") != sha256_bytes(s.dlm or b""):
            self.add(
                "ERROR",
                s.rel,
                "stale",
                f"{s.dlm_name} changed since it was trained (manifest.json is stale)",
                RETRAIN,
            )
            return
        root = self.sources_root(s)
        if isinstance(root, str) and root != (m.get("sources") or {}).get("merkle_root"):
            self.add(
                "ERROR",
                s.rel,
                "stale",
                "staged sources differ from those manifest.json was trained on",
                RETRAIN,
            )
        elif isinstance(root, HookFinding):
            self.findings.append(root)

    def sources_root(self, s: DocState) -> str | HookFinding | None:
        """The sources Merkle root of the *staged* tree (materialized in a temp dir)."""
        if not s.source_dirs:
            # No directives: the expansion is empty; nothing to materialize.
            from dlm_git.manifest.records import sources_record

            return sources_record([]).merkle_root
        from dlm_git.doc.parser import parse_document
        from dlm_git.doc.sources import expand_sources
        from dlm_git.manifest.records import sources_record

        with tempfile.TemporaryDirectory(prefix="dlm-git-hook-") as tmp:
            dest = Path(tmp)
            (dest / ".git").mkdir()  # marks the repository root for the strict-policy check
            gitio.materialize([s.rel, *s.source_dirs], dest, self.root)
            try:
                doc = parse_document(dest / (s.dlm_name or ""))
                expanded = expand_sources(doc, dest)
            except DlmGitError as exc:
                return HookFinding(
                    "ERROR",
                    s.rel,
                    "stale",
                    f"staged document does not load: {exc.message}",
                    "fix it, then re-train",
                )
            return sources_record((f.relpath, f.sha256, f.size) for f in expanded.files).merkle_root

    def check_drift(self, s: DocState, m: dict[str, Any], lock: dict[str, Any]) -> None:
        if s.head_manifest is None or s.head_lock is None:
            return
        try:
            hm = json.loads(s.head_manifest.decode("utf-8"))
            hl = json.loads(s.head_lock.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return
        same_inputs = (
            hm.get("dlm_sha256") == m.get("dlm_sha256")
            and (hm.get("sources") or {}).get("merkle_root")
            == (m.get("sources") or {}).get("merkle_root")
            and hm.get("config_sha256") == m.get("config_sha256")
            and (hm.get("base") or {}).get("tensor_root")
            == (m.get("base") or {}).get("tensor_root")
            and all(hl.get(k) == lock.get(k) for k in LOCK_TUPLE)
        )
        old = (hm.get("adapter") or {}).get("tensor_root")
        new = (m.get("adapter") or {}).get("tensor_root")
        if same_inputs and old != new:
            level = "ERROR" if lock.get("determinism_class") == "strong" else "WARN"
            self.add(
                level,
                s.rel,
                "determinism",
                f"same inputs as HEAD but a different adapter ({str(old)[:16]} -> {str(new)[:16]}) under class {lock.get('determinism_class')}",
                "investigate nondeterminism: compare `dlm-git doctor` with the lock; see docs/hooks.md",
            )


def run(cwd: Path) -> int:
    root = gitio.toplevel(cwd)
    staged = gitio.staged_paths(root)
    if not staged:
        return 0
    strict = gitio.env_flag("DLM_GIT_STRICT") or (
        gitio.config_get("dlm-git.strict", root) or ""
    ).lower() in ("1", "true", "yes", "on")
    checker = Checker(root, strict)
    checked = 0
    for rel in discover(root, staged):
        state = load_state(root, rel)
        if not touched(state, staged):
            continue
        checked += 1
        checker.check(state)
    checker.hashes.save()
    if not checked:
        return 0
    findings = strict_upgrade(checker.findings, strict)
    for f in findings:
        sys.stderr.write(f.line() + "\n")
    if findings:
        sys.stderr.write(summary(findings, checked) + "\n")
    return 1 if any(f.level == "ERROR" for f in findings) else 0


def main() -> int:
    try:
        return run(Path(os.getcwd()))
    except DlmGitError as exc:
        sys.stderr.write(f"dlm-git: ERROR {exc.one_line()}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
