"""`dlm-git fsck` as a specification, on a real repository trained by `dvc repro` and
committed (the falsifiability suite's, copied per test): a clean cache passes; a flipped
byte, a truncated `.dir` listing or a broken token-cache file fails and is named with
the commit and document that reference it; a deleted object is missing and an extra one
orphaned, both reported and neither a failure; `--repair` moves corrupted files into the
quarantine byte for byte and re-fetches them from a local DVC remote; an unchanged cache
is not re-hashed, while any change of a file's stat is; hostile records are notes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dlm_git.fsck.scan import RECORD_FORMAT
from dlm_git.statcache import RACY_NS
from tests.support.env import run
from tests.support.tensorfiles import edit_weight
from tests.support.verified import ADAPTER_OUT, CONFIG, DOC, SEGMENTS_OUT, WEIGHTS

pytestmark = pytest.mark.slow

STATE = ".git/dlm-git"  # machine-local state: in the git directory, out of commits' reach
RECORD = f"{STATE}/fsck-record.json"
TOKENS = f"{STATE}/token-cache"


def fsck(forge: Any, *args: str) -> Any:
    """`dlm-git fsck ARGS --json` in-process, from the repository root."""
    return forge._call_main(["fsck", *args, "--json"])


def explain(result: Any) -> str:
    return f"exit {result.code}\n{result.stdout}\n{result.stderr}"


def objects(result: Any, state: str | None = None, area: str | None = None) -> list[Any]:
    return [
        o
        for o in result.payload["objects"]
        if (state is None or o["state"] == state) and (area is None or o["area"] == area)
    ]


def rel(forge: Any, path: Path) -> str:
    return path.resolve().relative_to(forge.root.resolve()).as_posix()


def head(forge: Any) -> str:
    return forge.git("rev-parse", "HEAD").strip()


def flip_byte(path: Path, at: int = 100) -> bytes:
    """Flip one bit of the file (same size), returning the new bytes."""
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    return bytes(data)


def weights_md5(forge: Any) -> str:
    return forge.listing(forge.out_md5(ADAPTER_OUT))[WEIGHTS]


def token_files(forge: Any) -> list[Path]:
    root = forge.root / TOKENS
    return sorted([*root.glob("entries/*/*.tok"), *root.glob("packs/*.pack")])


def past_racy_window() -> None:
    """Files written just now are re-hashed next time (racily clean); wait them out."""
    time.sleep(RACY_NS / 1e9 + 0.2)


def dvc(forge: Any, *args: str) -> None:
    run([sys.executable, "-m", "dvc", *args], forge.root)


# --------------------------------------------------------------------------- clean


def test_a_clean_repository_passes(forge: Any) -> None:
    result = fsck(forge)
    assert result.code == 0, explain(result)
    payload = result.payload
    assert payload["ok"] is True
    assert payload["commits"] == 1
    dvc_cache = payload["dvc_cache"]
    # adapter (.dir + 2 files), segments (.dir + files), tokens (.dir + files), all present
    adapter = forge.listing(forge.out_md5(ADAPTER_OUT))
    segments = forge.listing(forge.out_md5(SEGMENTS_OUT))
    assert dvc_cache["referenced"] >= 2 + len(adapter) + len(segments)
    assert dvc_cache["ok"] == dvc_cache["referenced"]
    assert (dvc_cache["corrupted"], dvc_cache["missing"], dvc_cache["orphaned"]) == (0, 0, 0)
    tokens = payload["token_cache"]
    assert tokens["checked"] is True
    assert tokens["files"] == len(token_files(forge)) > 0
    assert tokens["ok"] == tokens["files"] and tokens["corrupted"] == 0
    assert objects(result) == [] and payload["repairs"] == []

    human = forge._call_main(["fsck"])
    assert human.code == 0, explain(human)
    assert human.stdout.rstrip().splitlines()[-1].split() == ["fsck", "OK"]
    assert human.stderr == ""


# --------------------------------------------------------------------------- corrupted


def test_a_flipped_byte_in_an_adapter_file_fails_naming_path_doc_and_commit(forge: Any) -> None:
    md5 = weights_md5(forge)
    flip_byte(forge.cache_path(md5))
    result = fsck(forge)
    assert result.code == 1, explain(result)
    assert result.payload["ok"] is False
    [bad] = objects(result, "corrupted")
    assert bad["area"] == "dvc-cache"
    assert bad["path"] == rel(forge, forge.cache_path(md5))
    assert bad["md5"] == md5
    assert bad["doc"] == DOC
    assert bad["commit"] == head(forge)
    assert bad["out"] == f"{ADAPTER_OUT}/{WEIGHTS}"
    assert bad["record"] == "dvc.lock"
    content = hashlib.md5(forge.cache_path(md5).read_bytes()).hexdigest()
    assert content in bad["detail"]

    human = forge._call_main(["fsck"])
    assert human.code == 1
    line = next(x for x in human.stdout.splitlines() if x.startswith("corrupted"))
    assert bad["path"] in line and f"doc {DOC}" in line and head(forge)[:12] in line
    assert "FAILED" in human.stdout.splitlines()[-1]


def test_a_truncated_dir_object_is_corrupted(forge: Any) -> None:
    dir_md5 = forge.out_md5(ADAPTER_OUT)
    path = forge.cache_path(dir_md5)
    listing = forge.listing(dir_md5)
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[: len(data) // 2])
    result = fsck(forge)
    assert result.code == 1, explain(result)
    [bad] = objects(result, "corrupted")
    assert bad["md5"] == dir_md5 and bad["out"] == ADAPTER_OUT
    assert bad["doc"] == DOC
    # its files are no longer known to be referenced: reported, informational
    orphans = {o["md5"] for o in objects(result, "orphaned")}
    assert set(listing.values()) <= orphans


def test_a_dir_object_that_is_not_a_listing_is_corrupted_even_when_its_md5_matches(
    forge: Any,
) -> None:
    """A commit whose dvc.lock names a `.dir` object that hashes right but is not JSON."""
    junk = b"not a listing"
    name = hashlib.md5(junk).hexdigest() + ".dir"
    path = forge.cache_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(junk)
    forge.set_out_md5(ADAPTER_OUT, name, None, None)
    forge.commit("a dvc.lock naming a listing that is not one")
    result = fsck(forge)
    assert result.code == 1, explain(result)
    [bad] = objects(result, "corrupted")
    assert bad["md5"] == name and "listing is malformed" in bad["detail"]
    assert bad["commit"] == head(forge)


def test_a_corrupted_token_cache_entry_and_pack_fail(forge: Any) -> None:
    entry = next(p for p in token_files(forge) if p.suffix == ".tok")
    pack = next(p for p in token_files(forge) if p.suffix == ".pack")
    flip_byte(entry, at=-1)  # the checksum itself
    pack.write_bytes(pack.read_bytes()[:-10])  # truncated
    result = fsck(forge)
    assert result.code == 1, explain(result)
    bad = {o["path"]: o for o in objects(result, "corrupted", "token-cache")}
    assert set(bad) == {rel(forge, entry), rel(forge, pack)}
    assert "checksum" in bad[rel(forge, entry)]["detail"]
    assert result.payload["token_cache"]["corrupted"] == 2
    assert result.payload["dvc_cache"]["corrupted"] == 0


def test_a_symlink_in_place_of_an_object_is_corrupted_and_not_followed(
    forge: Any, tmp_path: Path
) -> None:
    md5 = weights_md5(forge)
    outside = tmp_path / "outside"
    outside.write_bytes(forge.cache_path(md5).read_bytes())  # the right bytes, elsewhere
    forge.cache_path(md5).unlink()
    forge.cache_path(md5).symlink_to(outside)
    result = fsck(forge)
    assert result.code == 1, explain(result)
    [bad] = objects(result, "corrupted")
    assert bad["md5"] == md5 and "symbolic link" in bad["detail"]


def test_a_file_named_like_an_object_outside_its_shard_is_not_taken_for_it(forge: Any) -> None:
    md5 = weights_md5(forge)
    files = forge.cache_path(md5).parent.parent
    (files / md5).write_bytes(b"decoy")  # files/md5/<32 hex>, not files/md5/<2>/<30>
    forge.cache_path(md5).unlink()
    result = fsck(forge)
    assert result.code == 0, explain(result)
    states = {(o["state"], o["path"]) for o in objects(result)}
    assert ("missing", rel(forge, forge.cache_path(md5))) in states
    assert ("orphaned", rel(forge, files / md5)) in states


# --------------------------------------------------------------------------- missing, orphaned


def test_a_deleted_object_is_missing_reported_and_not_a_failure(forge: Any) -> None:
    md5 = forge.listing(forge.out_md5(ADAPTER_OUT))[CONFIG]
    forge.cache_path(md5).unlink()
    result = fsck(forge)
    assert result.code == 0, explain(result)
    [gone] = objects(result)
    assert gone["state"] == "missing" and gone["md5"] == md5
    assert gone["path"] == rel(forge, forge.cache_path(md5))
    assert gone["doc"] == DOC and gone["commit"] == head(forge)
    assert result.payload["dvc_cache"]["missing"] == 1
    human = forge._call_main(["fsck"])
    assert human.code == 0
    assert "missing objects are not an error" in human.stdout


def test_an_extra_cache_object_is_orphaned_informational_and_kept(forge: Any) -> None:
    md5 = forge.put_object(b"an object no record names\n")
    result = fsck(forge)
    assert result.code == 0, explain(result)
    [orphan] = objects(result)
    assert orphan["state"] == "orphaned" and orphan["md5"] == md5
    assert orphan["commit"] is None
    assert fsck(forge, "--repair").code == 0
    assert forge.cache_path(md5).read_bytes() == b"an object no record names\n"


def test_objects_of_every_ref_are_referenced_by_their_oldest_commit(forge: Any) -> None:
    first = head(forge)
    forge.commit("an unrelated commit: the same records")
    forge.git("checkout", "-q", "-b", "side")
    files = forge.adapter_files()
    files[WEIGHTS] = edit_weight(files[WEIGHTS])
    forge.store_adapter(files)
    side = forge.commit("another adapter, on a side branch")
    forge.git("checkout", "-q", "-")
    main_listing = forge.listing(forge.out_md5(ADAPTER_OUT))  # main's work tree
    new_md5 = hashlib.md5(files[WEIGHTS]).hexdigest()
    assert new_md5 not in main_listing.values()
    flip_byte(forge.cache_path(new_md5))
    flip_byte(forge.cache_path(main_listing[WEIGHTS]))
    result = fsck(forge)
    assert result.code == 1, explain(result)
    assert result.payload["commits"] == 3
    by_md5 = {o["md5"]: o for o in objects(result, "corrupted")}
    assert by_md5[new_md5]["commit"] == side
    assert by_md5[main_listing[WEIGHTS]]["commit"] == first
    assert objects(result, "orphaned") == []


def test_outs_reproduced_but_not_committed_are_referenced_by_the_work_tree(forge: Any) -> None:
    files = forge.adapter_files()
    files[WEIGHTS] = edit_weight(files[WEIGHTS])
    forge.store_adapter(files)  # dvc.lock in the work tree only
    result = fsck(forge)
    assert result.code == 0, explain(result)
    assert objects(result, "orphaned") == []
    new_md5 = hashlib.md5(files[WEIGHTS]).hexdigest()
    flip_byte(forge.cache_path(new_md5))
    [bad] = objects(fsck(forge), "corrupted")
    assert bad["md5"] == new_md5 and bad["commit"] is None


def test_hostile_records_in_history_are_notes_and_open_nothing(forge: Any) -> None:
    lock = forge.dvc_lock()
    for body in lock["stages"].values():
        for out in body.get("outs") or []:
            if out["path"] == ADAPTER_OUT:
                out["md5"] = "../../../../etc/passwd"
    forge.write_dvc_lock(lock)
    forge.write("broken.dvc", b"outs: [{path: x, md5: 1234}]\n")
    forge.write("sub/dvc.lock", b"stages: [not, a, mapping\n")
    bad = forge.commit("hostile records")
    result = fsck(forge)
    assert result.code == 0, explain(result)
    notes = "\n".join(result.payload["notes"])
    assert f"{bad[:12]}:dvc.lock" in notes and "md5" in notes
    assert f"{bad[:12]}:broken.dvc" in notes and f"{bad[:12]}:sub/dvc.lock" in notes
    assert all("passwd" not in o["path"] for o in objects(result))


# --------------------------------------------------------------------------- repair


def test_repair_quarantines_byte_for_byte_and_refetches_from_the_remote(
    forge: Any, tmp_path: Path
) -> None:
    dvc(forge, "remote", "add", "-d", "local", str(tmp_path / "remote"))
    dvc(forge, "push", "-q")
    md5 = weights_md5(forge)
    genuine = forge.cache_path(md5).read_bytes()
    corrupted = flip_byte(forge.cache_path(md5))
    segments_dir = forge.out_md5(SEGMENTS_OUT)
    dir_bytes = forge.cache_path(segments_dir).read_bytes()
    forge.cache_path(segments_dir).chmod(0o644)
    forge.cache_path(segments_dir).write_bytes(dir_bytes[:20])
    entry = next(p for p in token_files(forge) if p.suffix == ".tok")
    bad_entry = flip_byte(entry, at=-1)
    orphan = forge.put_object(b"kept\n")

    result = fsck(forge, "--repair")
    assert result.code == 0, explain(result)
    payload = result.payload
    assert payload["ok"] is True and payload["dvc_cache"]["corrupted"] == 0
    quarantine = forge.root / payload["quarantine"]
    assert quarantine.is_dir() and quarantine.parent == forge.root / STATE / "quarantine"
    repairs = {r["path"]: r for r in payload["repairs"]}
    weights = repairs[rel(forge, forge.cache_path(md5))]
    assert weights["outcome"] == "repaired"
    assert (forge.root / weights["quarantine"]).read_bytes() == corrupted
    assert forge.cache_path(md5).read_bytes() == genuine
    assert repairs[rel(forge, forge.cache_path(segments_dir))]["outcome"] == "repaired"
    assert forge.cache_path(segments_dir).read_bytes() == dir_bytes
    token = repairs[rel(forge, entry)]
    assert token["outcome"] == "quarantined" and not entry.exists()
    assert (forge.root / token["quarantine"]).read_bytes() == bad_entry
    manifest = json.loads((quarantine / "quarantine.json").read_text())
    assert {m["from"] for m in manifest["moved"]} == set(repairs)
    assert forge.cache_path(orphan).is_file()

    again = fsck(forge)
    assert again.code == 0, explain(again)
    assert again.payload["dvc_cache"]["missing"] == 0
    assert forge.git("status", "--porcelain", "--untracked-files=all").strip() == "M .dvc/config"


def test_repair_without_a_remote_quarantines_and_leaves_it_missing(forge: Any) -> None:
    md5 = weights_md5(forge)
    corrupted = flip_byte(forge.cache_path(md5))
    result = fsck(forge, "--repair")
    assert result.code == 0, explain(result)  # nothing corrupted remains
    [repair] = result.payload["repairs"]
    assert repair["outcome"] == "quarantined" and "remote" in repair["detail"]
    assert (forge.root / repair["quarantine"]).read_bytes() == corrupted
    assert not forge.cache_path(md5).exists()
    [gone] = objects(result)
    assert gone["state"] == "missing" and gone["md5"] == md5
    assert any("re-fetch" in n for n in result.payload["notes"])


def test_repair_twice_never_overwrites_an_earlier_quarantine(forge: Any) -> None:
    md5 = weights_md5(forge)
    first_bad = flip_byte(forge.cache_path(md5))
    first = fsck(forge, "--repair").payload["repairs"][0]["quarantine"]
    forge.cache_path(md5).write_bytes(first_bad + b"more")
    second = fsck(forge, "--repair").payload["repairs"][0]["quarantine"]
    assert first != second
    assert (forge.root / first).read_bytes() == first_bad
    assert (forge.root / second).read_bytes() == first_bad + b"more"


# --------------------------------------------------------------------------- stat record


def test_an_unchanged_cache_is_not_rehashed_and_any_stat_change_is(forge: Any) -> None:
    past_racy_window()
    first = fsck(forge).payload
    checked = first["dvc_cache"]["referenced"] + first["token_cache"]["files"]
    assert first["hashed"] == checked and first["unchanged"] == 0

    record = json.loads((forge.root / RECORD).read_text())
    assert record["format"] == RECORD_FORMAT
    md5 = weights_md5(forge)
    path = forge.cache_path(md5)
    st = os.stat(path)
    assert record["entries"][str(path.resolve())] == [
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_dev,
        f"md5:{md5}",
    ]
    assert len(record["entries"]) == checked

    second = fsck(forge).payload
    assert second["hashed"] == 0 and second["unchanged"] == checked

    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: mtime only
    third = fsck(forge).payload
    assert third["ok"] is True and third["hashed"] == 1

    # rewritten with the same size and the old mtime: ctime still tells
    flip_byte(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size
    result = fsck(forge)
    assert result.code == 1, explain(result)
    assert [o["md5"] for o in objects(result, "corrupted")] == [md5]


def test_full_ignores_the_record_and_a_damaged_record_is_ignored(forge: Any) -> None:
    past_racy_window()
    checked = fsck(forge).payload["hashed"]
    full = fsck(forge, "--full").payload
    assert full["full"] is True and full["hashed"] == checked and full["unchanged"] == 0

    (forge.root / RECORD).write_text('{"format": "something else", "entries": [')
    result = fsck(forge)
    assert result.code == 0, explain(result)
    assert result.payload["hashed"] == checked
    assert any("damaged" in n for n in result.payload["notes"])
    assert json.loads((forge.root / RECORD).read_text())["format"] == RECORD_FORMAT
    assert fsck(forge).payload["hashed"] == 0


# --------------------------------------------------------------------------- output, errors


def test_json_shape(forge: Any) -> None:
    flip_byte(forge.cache_path(weights_md5(forge)))
    payload = fsck(forge).payload
    assert set(payload) == {
        "format",
        "ok",
        "commits",
        "full",
        "dvc_cache",
        "token_cache",
        "hashed",
        "unchanged",
        "objects",
        "repairs",
        "quarantine",
        "notes",
        "errors",
    }
    assert payload["format"] == "dlm-git/fsck/v1"
    assert set(payload["dvc_cache"]) == {
        "path",
        "referenced",
        "ok",
        "corrupted",
        "missing",
        "orphaned",
    }
    assert set(payload["token_cache"]) == {
        "path",
        "files",
        "ok",
        "corrupted",
        "other_version",
        "checked",
    }
    [obj] = payload["objects"]
    assert set(obj) == {
        "area",
        "state",
        "path",
        "md5",
        "detail",
        "commit",
        "record",
        "out",
        "doc",
    }
    assert payload["quarantine"] is None and payload["repairs"] == []


def test_outside_a_git_repository_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from dlm_git.cli import main

    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.chdir(plain)
    code = main(["fsck"])
    out, err = capfd.readouterr()
    assert code == 1  # as every command run outside a repository (gitio.toplevel)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "not inside a git work tree" in lines[0], err
    assert list(plain.iterdir()) == []


def test_fsck_imports_neither_torch_nor_dvc(forge: Any) -> None:
    code = (
        "import sys\n"
        "from dlm_git.cli import main\n"
        "rc = main(['fsck', '--json'])\n"
        "heavy = [m for m in ('torch', 'dvc', 'transformers', 'peft') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    proc = run([sys.executable, "-c", code], forge.root)
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY []", proc.stdout + proc.stderr


def test_misuse_exits_2(forge: Any) -> None:
    result = forge._call_main(["fsck", "--no-such-flag"])
    assert result.code == 2
    assert "Traceback" not in result.stderr
