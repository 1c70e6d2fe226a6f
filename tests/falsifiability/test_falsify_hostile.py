"""Hostile commits: forgeries that attack how verify reads the commit, not what it
records. A file name that splits git's object requests (item 1) and a dvc.lock md5 or
`.dir` listing that steers verify to files outside the DVC cache (item 2): each must fail
`dlm-git verify`, naming the check that caught it, and the pre-push hook must refuse it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.verdicts import assert_caught
from tests.support.verified import ADAPTER_OUT, CONFIG, DOC

pytestmark = pytest.mark.slow

ZERO = "0" * 40


def pre_push(forge: Any, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The pre-push hook on HEAD, in-process: (exit code, stderr)."""
    from dlm_git.hooks.pre_push import run

    sha = forge.git("rev-parse", "HEAD").strip()
    capfd.readouterr()
    code = run(forge.root, f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    return code, capfd.readouterr().err


def test_newline_in_a_name_cannot_swap_objects(
    forge: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """A source file edited after training, plus a file named `<prefix>\\n<blob id of the
    original bytes>` sorted just before it. Read by name, one per line, the name splits
    into two requests and the edited file is answered with the original bytes; read by
    object id, the edit and the extra file are both seen."""
    notes = forge.root / DOC / "notes"
    target = sorted((p for p in notes.iterdir() if p.is_file()), key=lambda p: p.name)[-1]
    original = target.read_bytes()
    oid = forge.git("hash-object", str(target)).strip()
    target.write_bytes(original + b"\nA line written after training.\n")
    forged = notes / (target.name[:-1] + "\n" + oid)
    forged.write_bytes(b"decoy\n")
    forge.commit("swap by file name")
    listed = forge.git("ls-files", "-z", f"{DOC}/notes").split("\0")
    rel = f"{DOC}/notes/"
    assert listed.index(rel + target.name) == listed.index(rel + forged.name) + 1
    result = forge.verify("HEAD")
    assert_caught(result, "sources.root")
    assert target.name in result.first_failure["detail"]
    code, err = pre_push(forge, capfd)
    assert code == 1 and "sources.root" in err and "push refused" in err, err


def outside_listing(forge: Any, directory: Path, entries: dict[str, str]) -> Path:
    """A DVC `.dir` listing written outside the repository (and its DVC cache)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "adapter.dir"
    listing = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(entries.items())]
    path.write_text(json.dumps(listing), "utf-8")
    return path


def test_dvc_lock_md5_naming_a_path_outside_the_cache(
    forge: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """dvc.lock's adapter md5 is `ab/<absolute path>.dir`: joined into a cache path it
    names a file outside the cache, here a listing of the genuine adapter objects, so
    without validation verify reads it and passes."""
    listing = forge.listing(forge.out_md5())
    outside = outside_listing(forge, tmp_path / "outside", listing)
    forged = "ab" + str(outside)
    forge.set_out_md5(ADAPTER_OUT, forged, None, None)
    forge.commit("dvc.lock md5 is a path")
    result = forge.verify("HEAD")
    assert_caught(result, "dvc.binding")
    detail = result.first_failure["detail"]
    assert "dvc.lock" in detail and ".md5" in detail and "32 lowercase hex" in detail, detail
    code, err = pre_push(forge, capfd)
    assert code == 1 and "dvc.binding" in err and "push refused" in err, err


@pytest.mark.parametrize("field", ["relpath", "md5"])
def test_dir_listing_entry_naming_a_path_outside_the_cache(
    forge: Any, tmp_path: Path, field: str
) -> None:
    """A `.dir` listing in the cache whose entry escapes: a relpath with `..`, or an md5
    `ab/<absolute path>` that names a file outside the cache holding the genuine
    adapter_config.json bytes."""
    listing = forge.listing(forge.out_md5())
    decoy = tmp_path / "outside" / "config"
    decoy.parent.mkdir(parents=True)
    decoy.write_bytes(forge.cache_path(listing[CONFIG]).read_bytes())
    if field == "md5":
        listing[CONFIG] = "ab" + str(decoy)
    else:
        listing["../" + CONFIG] = listing.pop(CONFIG)
    entries = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(listing.items())]
    data = json.dumps(entries).encode()
    name = forge.put_object(data) + ".dir"
    forge.cache_path(name).parent.mkdir(parents=True, exist_ok=True)
    forge.cache_path(name).write_bytes(data)
    forge.set_out_md5(ADAPTER_OUT, name, None, None)
    forge.commit(f"listing entry {field} escapes")
    result = forge.verify("HEAD")
    assert_caught(result, "dvc.binding")
    detail = result.first_failure["detail"]
    assert "malformed record" in detail and field in detail and name in detail, detail
