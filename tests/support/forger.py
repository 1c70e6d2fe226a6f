"""The forger: changes one copied verified repository (`tests/support/verified.py`) the way
an attacker would, and runs `dlm-git verify` on it.

A forgery changes something and either commits it (`Forge.commit`: `git commit
--no-verify`, so no hook interferes) or changes the DVC cache object the commit points to.
Its helpers recompute hashes with `dlm_git.hashing` / `dlm_git.manifest` and keep
dvc.lock current, so that a forgery can be made consistent up to any chosen layer: every
test then shows which check still catches it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.support.gitrepo import commit_all, git
from tests.support.tensorfiles import nudge, patch_tensor, tensor_names
from tests.support.verdicts import CallMain, Result, verify_cli
from tests.support.verified import ADAPTER_OUT, DOC, SEGMENTS_OUT

EVAL = f"{DOC}/eval.json"


class Forge:
    """Forgeries in one copied repository (`root`)."""

    def __init__(self, root: Path, call_main: CallMain) -> None:
        self.root = root
        self._call_main = call_main

    # ---- git / files
    def git(self, *args: str) -> str:
        return git(self.root, *args)

    def commit(self, message: str = "forgery") -> str:
        return commit_all(self.root, message)

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def write(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.chmod(0o644)
            path.unlink()
        path.write_bytes(data)

    def read_json(self, rel: str) -> dict[str, Any]:
        return json.loads(self.read(rel))

    def write_canonical(self, rel: str, obj: Any) -> bytes:
        from dlm_git.hashing import canonical_json

        data = canonical_json(obj)
        self.write(rel, data)
        return data

    # ---- records
    def manifest(self) -> dict[str, Any]:
        return self.read_json(f"{DOC}/manifest.json")

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        from dlm_git.manifest.schema import Manifest

        Manifest.model_validate(manifest)  # a forgery that still parses
        data = self.write_canonical(f"{DOC}/manifest.json", manifest)
        self.rebind_eval(data)
        self.sync_dvc_lock_files()

    def rebind_eval(self, manifest: bytes) -> None:
        """Re-bind eval.json (when there is one) to `manifest`'s bytes and adapter and the
        lock's numerics, and its metrics file to it (check `eval.binding`): a thorough
        forger's record."""
        from dlm_git.eval.record import metrics_of
        from dlm_git.hashing import sha256_bytes

        if not (self.root / EVAL).is_file():
            return
        record = self.read_json(EVAL)
        record["manifest_sha256"] = sha256_bytes(manifest)
        weights = json.loads(manifest)["adapter"]["files"].get("adapter_model.safetensors")
        record["adapter_sha256"] = weights["sha256"] if weights else "0" * 64
        flags = self.lock().get("determinism_flags") or {}
        for key, flag in (("profile", "numerics"), ("threads", "threads")):
            if flag in flags:  # evaluated under the lock's profile
                record["numerics"][key] = flags[flag]
        self.write_canonical(EVAL, record)
        self.write_canonical(f"{DOC}/eval_metrics.json", metrics_of(record))

    def lock(self) -> dict[str, Any]:
        return self.read_json(f"{DOC}/dlm.lock")

    def write_lock(self, lock: dict[str, Any], *, rebind: bool = True) -> None:
        """Write dlm.lock; with `rebind`, manifest.lock_sha256 is updated to match it."""
        from dlm_git.hashing import sha256_bytes

        data = self.write_canonical(f"{DOC}/dlm.lock", lock)
        if rebind:
            manifest = self.manifest()
            manifest["lock_sha256"] = sha256_bytes(data)
            self.write_manifest(manifest)
        self.sync_dvc_lock_files()

    def rebind_document(self, text: str) -> None:
        """Write the `.dlm` and re-bind `dlm_sha256` in lock and manifest (and with them
        `lock_sha256`): a thorough forger's edit of the document."""
        from dlm_git.hashing import sha256_bytes

        self.write(f"{DOC}/{DOC}.dlm", text.encode())
        digest = sha256_bytes(text.encode())
        lock = self.lock()
        lock["dlm_sha256"] = digest
        self.write_lock(lock)
        manifest = self.manifest()
        manifest["dlm_sha256"] = digest
        self.write_manifest(manifest)

    # ---- DVC
    def dvc_lock(self) -> dict[str, Any]:
        return yaml.safe_load(self.read("dvc.lock"))

    def write_dvc_lock(self, lock: dict[str, Any]) -> None:
        self.write("dvc.lock", yaml.safe_dump(lock, sort_keys=False).encode("utf-8"))

    def out_md5(self, path: str = ADAPTER_OUT) -> str:
        for body in self.dvc_lock()["stages"].values():
            for out in body.get("outs") or []:
                if out["path"] == path:
                    return str(out["md5"])
        raise KeyError(path)

    def set_out_md5(self, path: str, md5: str, size: int | None, nfiles: int | None) -> None:
        """Point every record of `path` in dvc.lock (outs and deps) at `md5`."""
        lock = self.dvc_lock()
        for body in lock["stages"].values():
            for entry in (body.get("outs") or []) + (body.get("deps") or []):
                if entry["path"] == path:
                    entry["md5"] = md5
                    if size is not None:
                        entry["size"] = size
                    if nfiles is not None:
                        entry["nfiles"] = nfiles
        self.write_dvc_lock(lock)

    def sync_dvc_lock_files(self) -> None:
        """A thorough forger keeps dvc.lock's md5 of the git-tracked outs current too."""
        lock = self.dvc_lock()
        changed = False
        for body in lock["stages"].values():
            for entry in (body.get("outs") or []) + (body.get("deps") or []):
                path = self.root / entry["path"]
                if str(entry.get("md5", "")).endswith(".dir") or not path.is_file():
                    continue
                md5 = hashlib.md5(path.read_bytes()).hexdigest()
                if entry.get("md5") != md5:
                    entry["md5"], entry["size"] = md5, path.stat().st_size
                    changed = True
        if changed:
            self.write_dvc_lock(lock)

    def cache_path(self, md5: str) -> Path:
        from dlm_git.dvcfiles import cache_object

        return cache_object(self.root, md5)

    def listing(self, dir_md5: str) -> dict[str, str]:
        from dlm_git.dvcfiles import dir_listing

        listing = dir_listing(self.root, dir_md5)
        assert listing is not None, f"{dir_md5} not in the cache"
        return listing

    def put_object(self, data: bytes) -> str:
        md5 = hashlib.md5(data).hexdigest()
        path = self.cache_path(md5)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return md5

    def overwrite_object(self, md5: str, data: bytes) -> None:
        """Change a cache object's bytes in place (its name no longer matches its md5)."""
        path = self.cache_path(md5)
        path.chmod(0o644)
        path.write_bytes(data)

    def put_listing(self, entries: dict[str, str]) -> str:
        """A DVC 3 `.dir` object (sorted relpath/md5 entries) in the cache; its `<md5>.dir`."""
        listing = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(entries.items())]
        data = json.dumps(listing, sort_keys=True).encode("utf-8")
        name = hashlib.md5(data).hexdigest() + ".dir"
        path = self.cache_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(data)
        return name

    # ---- adapter
    def adapter_files(self) -> dict[str, bytes]:
        """The adapter the commit records, read from the DVC cache."""
        return self.dir_files(ADAPTER_OUT)

    # ---- segments
    def forge_boundary(self, step: int, *, rechain: bool) -> None:
        """Change boundary `step`'s snapshot (one LoRA parameter moved). With `rechain`
        the forgery is made consistent: its `tensors_sha256`, every later boundary's
        `prev` and the manifest's `segments.chain_root` are recomputed, so only replaying
        a segment can catch it. Without, the stored tensors no longer match their hash."""
        from dlm_git.hashing import canonical_json, sha256_bytes

        files = self.dir_files(SEGMENTS_OUT)
        stem = f"boundary-{step:07d}"
        blob = files[f"{stem}.safetensors"]
        name = next(n for n in tensor_names(blob) if n.startswith("param/"))
        files[f"{stem}.safetensors"] = patch_tensor(blob, name, nudge)
        if rechain:
            steps = sorted(
                int(n[len("boundary-") : -len(".json")]) for n in files if n.endswith(".json")
            )
            prev: str | None = None
            for k in steps:
                key = f"boundary-{k:07d}.json"
                if k >= step:
                    meta = json.loads(files[key])
                    if k == step:
                        meta["tensors_sha256"] = sha256_bytes(files[f"{stem}.safetensors"])
                    else:
                        meta["prev"] = prev
                    files[key] = canonical_json(meta)
                prev = sha256_bytes(files[key])
            manifest = self.manifest()
            manifest["segments"]["chain_root"] = prev
            self.store_out(SEGMENTS_OUT, files)
            self.write_manifest(manifest)
        else:
            self.store_out(SEGMENTS_OUT, files)

    def dir_files(self, path: str) -> dict[str, bytes]:
        """A DVC directory out as the commit records it, read from the DVC cache."""
        listing = self.listing(self.out_md5(path))
        return {name: self.cache_path(md5).read_bytes() for name, md5 in listing.items()}

    def store_out(self, path: str, files: dict[str, bytes]) -> str:
        """Store `files` as DVC directory out `path`: cache objects, `.dir` listing, dvc.lock
        (outs and deps) and the work tree, all consistent. Returns the `<md5>.dir`."""
        entries = {name: self.put_object(data) for name, data in files.items()}
        dir_md5 = self.put_listing(entries)
        self.set_out_md5(path, dir_md5, sum(map(len, files.values())), len(files))
        directory = self.root / path
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir()
        for name, data in files.items():
            (directory / name).write_bytes(data)
        return dir_md5

    def store_adapter(self, files: dict[str, bytes], rebind: str = "none") -> str:
        """`store_out` for the adapter, then optionally re-record it in manifest.json:
        `rebind` "none" leaves the manifest alone; "files" re-records each file's sha256
        and size; "all" re-records the whole adapter record (file hashes, tensor
        names/dtypes/shapes/digests and the tensor root), as training would have."""
        from dlm_git.manifest.records import adapter_record

        dir_md5 = self.store_out(ADAPTER_OUT, files)
        adapter = self.root / ADAPTER_OUT
        if rebind != "none":
            manifest = self.manifest()
            if rebind == "files":
                for name, data in files.items():
                    manifest["adapter"]["files"][name] = {
                        "sha256": hashlib.sha256(data).hexdigest(),
                        "size": len(data),
                    }
            elif rebind == "all":
                manifest["adapter"] = adapter_record(adapter).model_dump(mode="json")
            else:
                raise ValueError(rebind)
            self.write_manifest(manifest)
        return dir_md5

    # ---- verify
    def verify(self, *args: str) -> Result:
        """`dlm-git verify ARGS --json` in-process, from the repository root."""
        return self._call_main(["verify", *args, "--json"])

    def verify_cli(self, *args: str, timeout: float = 600) -> Result:
        """`dlm-git verify ARGS --json` as a subprocess (replay and segments levels): for
        what needs its own process (another numerics profile, a bound on time that a hang
        must not outlast, the process's own output and exit)."""
        return verify_cli(self.root, *args, timeout=timeout)

    def verify_here(self, *args: str) -> Result:
        """`dlm-git verify ARGS --json` in this process, replay and segments levels too:
        the session's CPU profile is active here (tests/conftest.py), so a replay trains
        in process as `verify` runs it for a user whose torch is not yet loaded, without a
        fresh process importing torch, transformers and peft again (~4 s a call). For
        verdict logic; what needs a process of its own uses `verify_cli`."""
        return self.verify(*args)
