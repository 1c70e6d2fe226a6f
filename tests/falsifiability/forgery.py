"""Build a verified dlm-git repository once, copy it per test, and forge things in it.

Used by `tests/falsifiability/` (through conftest.py) and `tests/integration/test_verify.py`
(loaded by path, see `load_forgery` in those files), so the trained repository is built
once per test session however the suite is selected.

The repository is built the way a user builds one: `git init`, `dlm-git init --doc demo
--no-hooks`, a small training config, `dvc repro` (subprocess, the venv's bin first on
PATH), `git add -A && git commit`. Forgeries then change something and either commit it
(`git commit --no-verify`, so no hook interferes) or change the DVC cache object that the
commit points to; helpers recompute hashes with `dlm_git.hashing` / `dlm_git.manifest` so
that a forgery can be made consistent up to any chosen layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DOC = "demo"
ADAPTER_OUT = f"{DOC}/adapter"
SEGMENTS_OUT = f"{DOC}/segments"
WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"
TRAIN_STAGE = f"train@{DOC}"

# Two Q/A pairs so that reordering sections is possible; a tiny training run.
EXTRA_QA = """
### Q
Which file binds inputs to outputs?

### A
manifest.json binds the document, the sources, the base and every adapter tensor by hash.
"""
FIRST_QA = """### Q
What is this document for?

### A
It trains a small LoRA adapter whose bytes are reproducible from this commit.
"""

_BUILT: dict[str, Path] = {}


def venv_env() -> dict[str, str]:
    """The current (hermetic) environment with this interpreter's bin dir first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["DVC_NO_ANALYTICS"] = "1"
    env.pop("GIT_DIR", None)
    env.pop("GIT_INDEX_FILE", None)
    return env


def run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=venv_env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def git(repo: Path, *args: str) -> str:
    return run(["git", *args], repo).stdout


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def build_verified_repo(parent: Path) -> Path:
    """A git repo with one trained, committed document `demo` (built once per session)."""
    key = str(parent)
    if key in _BUILT:
        return _BUILT[key]
    repo = parent / "verified-repo"
    ready = parent / "verified-repo.ready"
    if ready.is_file():
        _BUILT[key] = repo
        return repo
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "dlm-git tests")
    git(repo, "config", "user.email", "tests@dlm-git.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    run(["dlm-git", "init", "--doc", DOC, "--no-hooks"], repo)
    doc = repo / DOC / f"{DOC}.dlm"
    text = doc.read_text("utf-8")
    for key_, value in (("max_steps", "4"), ("sequence_len", "64")):
        text, n = re.subn(rf"(?m)^(  {key_}:) .*$", rf"\g<1> {value}", text)
        assert n == 1, f"starter document has no training.{key_}"
    assert FIRST_QA in text, "starter document changed: update FIRST_QA"
    doc.write_text(text.rstrip("\n") + "\n" + EXTRA_QA, "utf-8")
    run(["dvc", "repro"], repo)
    commit_all(repo, "train demo")
    install_tiny_base(repo)
    assert git(repo, "status", "--porcelain") == "", "training left the work tree dirty"
    ready.write_text("ok\n")
    _BUILT[key] = repo
    return repo


def install_tiny_base(repo: Path) -> None:
    """Put the pipeline's built tiny base into DLM_GIT_BASE_CACHE (byte-identical to what
    `ensure_tiny_base` would build, by the tiny base's invariant), so verify needn't build it."""
    from dlm_git.base.tiny import SPEC_FILE, tiny_dir

    dest = tiny_dir()
    if (dest / SPEC_FILE).is_file():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny.", dir=dest.parent))
    shutil.rmtree(tmp)
    shutil.copytree(repo / "bases" / "tiny", tmp)
    try:
        os.replace(tmp, dest)
    except OSError:  # someone else installed it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)


def copy_repo(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


# --------------------------------------------------------------------------- safetensors


def st_split(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """(header in file order, data buffer) of a safetensors file."""
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    return header, blob[8 + n :]


def st_join(header: dict[str, Any], data: bytes) -> bytes:
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + data


def tensor_names(blob: bytes) -> list[str]:
    header, _ = st_split(blob)
    return [k for k in header if k != "__metadata__"]


def pick_tensor(blob: bytes, needle: str = "q_proj.lora_A") -> str:
    return next(n for n in tensor_names(blob) if needle in n)


def patch_tensor(blob: bytes, name: str, fn: Callable[[Any], None]) -> bytes:
    """Apply `fn` to a float32 copy of tensor `name` and write its bytes back in place."""
    import numpy as np

    header, data = st_split(blob)
    info = header[name]
    assert info["dtype"] == "F32"
    begin, end = info["data_offsets"]
    arr = np.frombuffer(data[begin:end], dtype="<f4").copy().reshape(info["shape"])
    fn(arr)
    new = arr.astype("<f4").tobytes()
    assert len(new) == end - begin
    return blob[: len(blob) - len(data)] + data[:begin] + new + data[end:]


def edit_weight(blob: bytes) -> bytes:
    """A post-training edit: add 0.25 to one element of one tensor."""

    def fn(a: Any) -> None:
        a.flat[0] += 0.25

    return patch_tensor(blob, pick_tensor(blob), fn)


def flip_ulp(blob: bytes) -> bytes:
    """The smallest possible edit: one element moved by one ulp (numpy nextafter)."""
    import numpy as np

    def fn(a: Any) -> None:
        a.flat[0] = np.nextafter(a.flat[0], np.float32(np.inf), dtype=np.float32)

    out = patch_tensor(blob, pick_tensor(blob), fn)
    assert out != blob and len(out) == len(blob)
    return out


def rename_tensor(blob: bytes) -> bytes:
    """Same bytes, one key renamed (layer 0's q_proj A becomes a layer-9 tensor)."""
    header, data = st_split(blob)
    old = pick_tensor(blob)
    new = old.replace("layers.0.", "layers.9.")
    assert new != old and new not in header
    renamed = {(new if k == old else k): v for k, v in header.items()}
    return st_join(renamed, data)


def reshape_tensor(blob: bytes) -> bytes:
    """Same bytes, one tensor's shape transposed ([r, in] -> [in, r])."""
    header, data = st_split(blob)
    name = pick_tensor(blob)
    shape = header[name]["shape"]
    assert len(shape) == 2 and shape[0] != shape[1]
    header[name] = {**header[name], "shape": [shape[1], shape[0]]}
    return st_join(header, data)


def relabel_dtype(blob: bytes) -> bytes:
    """Same bytes, one F32 tensor relabelled I32."""
    header, data = st_split(blob)
    name = pick_tensor(blob)
    header[name] = {**header[name], "dtype": "I32"}
    return st_join(header, data)


MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "weight_edit": edit_weight,
    "ulp_flip": flip_ulp,
    "renamed_tensor": rename_tensor,
    "reshaped_tensor": reshape_tensor,
    "dtype_relabel": relabel_dtype,
}


# --------------------------------------------------------------------------- verify results


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def payload(self) -> dict[str, Any]:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"not JSON ({exc}):\n{self.stdout}\n{self.stderr}") from None

    @property
    def doc(self) -> dict[str, Any]:
        docs = self.payload["documents"]
        assert len(docs) == 1, docs
        return docs[0]

    @property
    def verdict(self) -> str:
        return str(self.doc["verdict"])

    @property
    def checks(self) -> list[dict[str, Any]]:
        return list(self.doc["checks"])

    @property
    def first_failure(self) -> dict[str, Any] | None:
        return next((c for c in self.checks if not c["ok"]), None)

    def check(self, name: str) -> dict[str, Any]:
        return next(c for c in self.checks if c["name"] == name)

    def explain(self) -> str:
        lines = [f"exit {self.code}"]
        try:
            lines.append(f"verdict {self.verdict}")
            lines += [
                f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in self.checks
            ]
            lines += [f"  note: {n}" for n in self.doc.get("notes", [])]
        except AssertionError:
            lines.append(self.stdout)
        lines.append(self.stderr)
        return "\n".join(lines)


# --------------------------------------------------------------------------- the forger


class Forge:
    """Forgeries in one copied repository (`root`)."""

    def __init__(self, root: Path, call_main: Callable[[list[str]], Result]) -> None:
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
        self.write_canonical(f"{DOC}/manifest.json", manifest)
        self.sync_dvc_lock_files()

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

        def nudge(a: Any) -> None:
            a.flat[0] += 0.25

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
        """`dlm-git verify ARGS --json` as a subprocess (replay and segments levels)."""
        proc = subprocess.run(
            ["dlm-git", "verify", *args, "--json"],
            cwd=self.root,
            env=venv_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)


def call_main_in(root: Path, capfd: Any) -> Callable[[list[str]], Result]:
    """A runner for `dlm_git.cli.main` with cwd = `root`, output captured by `capfd`."""

    def call(argv: list[str]) -> Result:
        from dlm_git.cli import main

        old = Path.cwd()
        capfd.readouterr()
        os.chdir(root)
        try:
            code = main(argv)
        finally:
            os.chdir(old)
        out, err = capfd.readouterr()
        return Result(code, out, err)

    return call


def assert_caught(result: Result, check: str, verdicts: tuple[str, ...] = ("FAILED",)) -> None:
    """Exit 1, a failing verdict, and `check` is the first check that failed."""
    why = result.explain()
    assert result.code == 1, why
    assert result.payload["verdict"] == "FAILED", why
    assert result.verdict in verdicts, why
    first = result.first_failure
    assert first is not None and first["name"] == check, why


def assert_verified(result: Result) -> None:
    why = result.explain()
    assert result.code == 0, why
    assert result.payload["verdict"] == "VERIFIED", why
    assert all(c["ok"] for c in result.checks), why
