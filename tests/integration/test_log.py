"""`dlm-git log`, specified on a real repository trained by `dvc repro`: the lineage of a
document's adapter, lock acceptances and who made them, signatures judged with this
machine's trust, and the verdicts recorded in a commit apart from the ones reached here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import canonical_json, sha256_bytes
from tests.support.cli import imports_of
from tests.support.verified import DOC

pytestmark = pytest.mark.slow


def log_json(forge: Any, *args: str) -> list[dict[str, Any]]:
    result = forge._call_main(["log", *args, "--json"])
    assert result.code == 0, result.stderr
    (doc,) = result.payload["documents"]
    assert doc["doc"] == DOC
    return list(doc["entries"])


def accept(forge: Any, field: str, value: Any, supersedes: str | None = None) -> str:
    """Commit a lock with `field` changed and `supersedes` set, as `--update-lock` does."""
    old = forge.read(f"{DOC}/dlm.lock")
    lock = json.loads(old)
    lock["determinism_flags"][field] = value
    lock["supersedes"] = supersedes or sha256_bytes(old)
    forge.write_lock(lock)
    return str(forge.commit(f"accept {field}"))


def test_one_training_is_one_entry(forge: Any) -> None:
    (entry,) = log_json(forge)
    manifest = forge.manifest()
    assert (
        entry["adapter_sha256"]
        == manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"]
    )
    assert entry["adapter_changed"] is True
    assert (entry["determinism_class"], entry["profile"], entry["world_size"]) == (
        "strong",
        "x86-64-v3",
        1,
    )
    assert entry["commit"] == forge.git("rev-parse", "HEAD").strip()
    assert entry["subject"] == "train demo" and entry["author"] == "dlm-git tests"
    assert entry["recorded_verdict"] == {"verdict": "VERIFIED", "level": "hash"}
    assert entry["local_verdict"] is None and entry["acceptance"] is None


def test_a_verify_here_is_remembered_apart_from_the_record(forge: Any) -> None:
    before = forge.git("status", "--porcelain", "--ignored", "--untracked=all")
    assert forge.verify("HEAD").code == 0
    (entry,) = log_json(forge)
    local = entry["local_verdict"]
    assert (local["verdict"], local["level"]) == ("VERIFIED", "hash")
    assert entry["recorded_verdict"] == {"verdict": "VERIFIED", "level": "hash"}
    # remembered inside the git directory: not even an ignored file in the work tree
    assert forge.git("status", "--porcelain", "--ignored", "--untracked=all") == before


def test_acceptances_name_their_author_and_drift(forge: Any) -> None:
    accept(forge, "threads", 1)
    accept(forge, "threads", 3, supersedes="0" * 64)
    newest, chained, first = log_json(forge)
    assert first["acceptance"] is None
    a = chained["acceptance"]
    assert a["chained"] is True and a["accepted_by"] == "dlm-git tests"
    assert a["drift"] == [
        {"field": "determinism_flags.threads", "severity": "WARN", "from": 2, "to": 1}
    ]
    assert newest["acceptance"]["chained"] is False  # supersedes names no lock it replaced
    assert chained["adapter_changed"] is False and newest["adapter_changed"] is False
    human = forge._call_main(["log"])
    assert "supersedes 000000000000 (a lock not in this lineage)" in human.stdout
    assert "(the lock it replaced): WARN determinism_flags.threads changed: 2 -> 1" in human.stdout


def test_max_count_limits_the_entries(forge: Any) -> None:
    accept(forge, "threads", 1)
    (entry,) = log_json(forge, "-n", "1")
    assert entry["acceptance"]["chained"] is True  # judged against the lock before it


def test_max_count_windows_the_entries_not_what_they_are_judged_against(forge: Any) -> None:
    """`-n` changes what is shown, never the count of the lineage or whether an adapter is
    new: that is decided against the entry's real parent, not the window (issue 25)."""
    accept(forge, "threads", 1)
    result = forge._call_main(["log", "-n", "1", "--json"])
    (doc,) = result.payload["documents"]
    (entry,) = doc["entries"]
    assert doc["total"] == 2
    assert entry["adapter_changed"] is False  # the lock moved, the adapter did not
    shown = forge._call_main(["log", "-n", "1"]).stdout
    whole = forge._call_main(["log"]).stdout
    assert shown.splitlines()[0] == f"{DOC}: 2 record change(s), the newest 1 shown"
    assert whole.splitlines()[0] == f"{DOC}: 2 record change(s)"
    assert "(new)" not in shown and whole.count("(new)") == 1


def test_signatures_are_judged_with_this_machines_trust(forge: Any, tmp_path: Path) -> None:
    pytest.importorskip("model_signing")
    keys = tmp_path / "keys"
    key, pub = keys / "dlm-signing-key.pem", keys / "dlm-signing-key.pub.pem"
    assert forge._call_main(["keygen", "--out", str(keys)]).code == 0
    assert forge._call_main(["sign", "--doc", DOC, "--key", str(key)]).code == 0
    forge.commit("sign")
    (signed, _) = log_json(forge)
    assert signed["signature"]["state"] == "untrusted"
    forge.git("config", "dlm-git.trustedKeys", str(pub))
    (signed, _) = log_json(forge)
    assert signed["signature"]["state"] == "valid", signed["signature"]
    lock = forge.lock()
    lock["seed"] = 7
    forge.write_lock(lock)  # the records no longer match what was signed
    forge.commit("edit after signing")
    broken = log_json(forge)[0]
    assert broken["signature"]["state"] == "invalid"
    assert "signed other bytes of dlm.lock" in broken["signature"]["detail"]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["-n", "0"], "must be at least 1"), (["--doc", "notes"], "no records of this document")],
)
def test_misuse_is_one_line_exit_2(forge: Any, args: list[str], message: str) -> None:
    result = forge._call_main(["log", *args])
    assert result.code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_log_imports_nothing_heavy(forge: Any) -> None:
    found = imports_of(forge.root, "log", "--json")
    assert found.code == 0 and found.heavy == [], (found.code, found.heavy)


def test_records_are_read_as_bytes_whatever_they_hold(forge: Any) -> None:
    forge.write(f"{DOC}/manifest.json", b"[not, json")
    forge.write(f"{DOC}/dlm.lock", canonical_json({"determinism_flags": {"distributed": 3}}))
    forge.commit("garbage records")
    newest = log_json(forge)[0]
    assert newest["adapter_sha256"] is None
    assert "manifest.json is not a JSON object" in newest["problems"]
    assert "dlm.lock: determinism_flags.distributed is not an object" in newest["problems"]
