"""`dlm-git verify` of a commit of many documents: what the commit shares is read once, and
every document is still judged on its own records.

- The git processes, the dvc.lock parses and the base reads of a hash-level verify do
  not grow with the number of documents: one listing of the commit and one `cat-file`
  process for all of them, dvc.lock parsed once, each base's identity computed once.
- Each document's verdict in the whole commit's verify is the verdict it gets verified
  alone (`--doc`), whatever the documents before and after it hold.

Built on the falsifiability suite's trained repository (`forge`), with copies of its
document (`tests/support/copies.py`) committed beside it.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dlm_git.verify.commit  # noqa: F401 (verify's modules bound to the real functions first)
from dlm_git import dvcfiles
from dlm_git.base import resolve
from tests.support.copies import copy_document
from tests.support.verdicts import assert_verified
from tests.support.verified import ADAPTER_OUT, DOC

pytestmark = pytest.mark.slow


class Reads:
    """What one verify spent: git processes started, dvc.lock parses, base identities."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.git = self.dvc_lock = self.base = 0
        reads = self
        real_popen, real_parse, real_identity = (
            subprocess.Popen,
            dvcfiles.parse_dvc_lock,
            resolve.base_identity,
        )

        class CountingPopen(real_popen):  # type: ignore[misc,valid-type]
            def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
                reads.git += bool(args) and args[0] == "git"
                super().__init__(args, *rest, **kwargs)

        def parse(data: bytes) -> Any:
            reads.dvc_lock += 1
            return real_parse(data)

        def identity(*args: Any, **kwargs: Any) -> Any:
            reads.base += 1
            return real_identity(*args, **kwargs)

        monkeypatch.setattr(subprocess, "Popen", CountingPopen)
        for module in [m for name, m in sys.modules.items() if name.startswith("dlm_git.")]:
            # every module's binding of these, however it imported them
            for attr, real, spy in (
                ("parse_dvc_lock", real_parse, parse),
                ("base_identity", real_identity, identity),
            ):
                if getattr(module, attr, None) is real:
                    monkeypatch.setattr(module, attr, spy)
        dvcfiles.lock_outs.cache_clear()  # count this run's parse, not an earlier one's

    def spent(self) -> tuple[int, int, int]:
        return self.git, self.dvc_lock, self.base


def verify_counting(forge: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, tuple[int, ...]]:
    with monkeypatch.context() as mp:
        reads = Reads(mp)
        result = forge.verify("HEAD")
        return result, reads.spent()


def verdicts(result: Any) -> dict[str, str]:
    return {d["doc"]: d["verdict"] for d in result.payload["documents"]}


def test_what_a_commit_shares_is_read_once(forge: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    one, spent_one = verify_counting(forge, monkeypatch)
    assert_verified(one)
    copies = [f"copy{i}" for i in range(5)]
    copy_document(forge.root, DOC, copies)
    forge.commit("five copies of the document")

    six, spent_six = verify_counting(forge, monkeypatch)
    assert verdicts(six) == dict.fromkeys([DOC, *copies], "VERIFIED"), six.explain()
    assert six.code == 0
    git, dvc_lock, base = spent_six
    assert dvc_lock == 1, "dvc.lock is parsed once for all the documents"
    assert base == 1, "the base's identity is computed once for the documents that share it"
    assert git <= spent_one[0], "git processes grow with the number of documents"


def test_each_document_is_judged_as_it_is_alone(forge: Any) -> None:
    """Forged documents first, between and last: each verdict is the one `--doc` gives."""
    names = ["a-forged-base", "b-good", "c-edited", "d-good", "e-no-adapter"]
    copy_document(forge.root, DOC, names)
    root = forge.root

    # lock and manifest agree on a base whose tensors are not the shared base's
    lock_path, manifest_path = "a-forged-base/dlm.lock", "a-forged-base/manifest.json"
    record = forge.read_json(lock_path)
    record["base_model_sha256"] = "0" * 64
    manifest = forge.read_json(manifest_path)
    manifest["base"]["tensor_root"] = "0" * 64
    manifest["lock_sha256"] = hashlib.sha256(forge.write_canonical(lock_path, record)).hexdigest()
    forge.write_canonical(manifest_path, manifest)
    dlm = root / "c-edited" / "c-edited.dlm"
    dlm.write_text(dlm.read_text("utf-8") + "\nEdited after training.\n", "utf-8")
    lock = forge.dvc_lock()
    for out in lock["stages"]["train@e-no-adapter"]["outs"]:
        if out["path"] == "e-no-adapter/adapter":
            out["md5"] = "0" * 32 + ".dir"  # an adapter this cache never held
    forge.write_dvc_lock(lock)
    forge.commit("documents good, forged and absent")

    result = forge.verify("HEAD")
    whole = verdicts(result)
    forged = next(d for d in result.payload["documents"] if d["doc"] == "a-forged-base")
    # eval.json names the manifest it scored: the forged manifest is another one
    assert [c["name"] for c in forged["checks"] if not c["ok"]] == ["base.identity", "eval.binding"]
    alone = {name: verdicts(forge.verify("HEAD", "--doc", name))[name] for name in [DOC, *names]}
    assert whole == alone
    assert whole == {
        DOC: "VERIFIED",
        "a-forged-base": "FAILED",
        "b-good": "VERIFIED",
        "c-edited": "FAILED",
        "d-good": "VERIFIED",
        "e-no-adapter": "CANNOT_VERIFY",
    }


def test_copies_are_documents_of_their_own(forge: Any) -> None:
    """The builder the benchmark uses: copies are listed, recorded and distinct."""
    copy_document(forge.root, DOC, ["x"])
    root: Path = forge.root
    assert (root / "x" / "x.dlm").is_file() and not (root / "x" / "adapter").exists()
    lock = forge.dvc_lock()
    assert lock["stages"]["train@x"]["cmd"].split()[:3] == ["dlm-git", "train", "x"]
    assert forge.out_md5("x/adapter") == forge.out_md5(ADAPTER_OUT)
