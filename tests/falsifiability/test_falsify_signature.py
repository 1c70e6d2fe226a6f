"""Signed provenance: a signature vouches for exactly one training's records, by a key the
auditor (or the project's earlier policy) trusts. Each forgery fails its named check;
an honest signed commit verifies, and the stock `model_signing` CLI accepts it.

Trust rule under test: the committed policy (`.dlm-keys/*.pem`) that judges a commit is
the one in its first parent, so a commit cannot trust the key it signs with.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlm_git.hashing import sha256_bytes
from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import git
from tests.support.signing import Signed, keygen
from tests.support.verdicts import Result, call_main_in, caught
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

SIG = f"{DOC}/dlm.sig"


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two key pairs made by `dlm-git keygen`, outside every repository."""
    out = {}
    for name in ("alice", "mallory"):
        out[name] = keygen(tmp_path_factory.mktemp(f"keys-{name}"))
    return out


@pytest.fixture
def signed(forge: Any, keys: dict[str, tuple[Path, Path]]) -> Signed:
    """The verified repository, signed by alice (trusted by this auditor) and committed."""
    s = Signed(forge, keys)
    s.sign()
    s.trust()
    forge.commit("sign demo")
    return s


def test_a_signed_commit_verifies_and_the_stock_cli_agrees(signed: Signed) -> None:
    result = signed.verify()
    assert result.code == 0 and result.verdict == "VERIFIED", result.explain()
    names = [c["name"] for c in result.checks if c["name"].startswith("signature.")]
    assert names == [
        "signature.present",
        "signature.valid",
        "signature.trusted",
        "signature.binding",
    ]
    proc = stock_verify(signed.forge.root, signed.keys["alice"][1])
    assert proc.returncode == 0 and "Verification succeeded" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    proc = stock_verify(signed.forge.root, signed.keys["mallory"][1])
    assert proc.returncode != 0, proc.stdout


def stock_verify(root: Path, public_key: Path) -> subprocess.CompletedProcess[str]:
    """The model_signing package's own CLI, as a user runs it after `dvc pull`."""
    stock = Path(sys.executable).parent / "model_signing"
    args = ["verify", "key", DOC, "--signature", SIG, "--public_key", str(public_key)]
    return subprocess.run([str(stock), *args], cwd=root, capture_output=True, text=True)


def test_unsigned_is_reported_and_fails_only_when_required(forge: Any) -> None:
    plain = forge.verify("HEAD")
    assert plain.code == 0 and "signature: not signed" in plain.doc["notes"], plain.explain()
    caught(forge.verify("HEAD", "--require-signature"), "signature.present", "no dlm.sig")


def test_a_signature_over_another_documents_records(signed: Signed) -> None:
    other = signed.forge.root / "other"
    import shutil

    shutil.copytree(signed.forge.root / DOC, other, ignore=shutil.ignore_patterns("dlm.sig"))
    text = (other / f"{DOC}.dlm").read_text("utf-8") + "\nAnother document's prose.\n"
    (other / f"{DOC}.dlm").write_text(text, "utf-8")
    signed.sign(doc="other")  # a genuine signature, over the other document's records
    signed.forge.write(SIG, (other / "dlm.sig").read_bytes())
    shutil.rmtree(other)
    signed.forge.commit("move the other document's signature here")
    caught(signed.verify(), "signature.binding", f"{DOC}.dlm")


def test_a_replayed_signature_over_an_older_lock(signed: Signed) -> None:
    lock = signed.forge.lock()
    lock["seed"] = lock["seed"] + 1  # a later lock (manifest re-bound to it)
    signed.forge.write_lock(lock)
    signed.forge.commit("new lock, old signature")
    caught(signed.verify(), "signature.binding", "dlm.lock")


def test_records_edited_after_signing(signed: Signed) -> None:
    manifest = signed.forge.manifest()
    manifest["training"]["steps"] += 1
    signed.forge.write_manifest(manifest)
    signed.forge.commit("edit the manifest after signing")
    caught(signed.verify(), "signature.binding", "manifest.json")


def test_an_adapter_swapped_after_signing(signed: Signed) -> None:
    """A consistent swap: the manifest records the new adapter file; the signature
    still covers the old one."""
    manifest = signed.forge.manifest()
    manifest["adapter"]["files"]["adapter_config.json"]["sha256"] = "0" * 64
    signed.forge.write_manifest(manifest)
    signed.forge.commit("another adapter recorded")
    caught(signed.verify(), "signature.binding", "adapter/adapter_config.json")


def test_a_signature_by_an_untrusted_key(forge: Any, keys: dict[str, tuple[Path, Path]]) -> None:
    s = Signed(forge, keys)
    s.trust("alice")
    s.sign("mallory")
    forge.commit("signed by mallory")
    caught(s.verify(), "signature.trusted", "not trusted")
    plain = forge.verify("HEAD")  # not required: reported, not failed
    assert plain.code == 0 and any("not trusted" in n for n in plain.doc["notes"]), plain.explain()


def test_trust_changes_never_validate_themselves(
    forge: Any, keys: dict[str, tuple[Path, Path]]
) -> None:
    s = Signed(forge, keys)
    forge.write(".dlm-keys/team.pem", keys["alice"][1].read_bytes())
    s.sign("alice")
    forge.commit("policy: alice (her signature needs an earlier policy)")
    caught(
        s.verify(), "signature.trusted", "not trusted"
    )  # a root of trust cannot vouch for itself
    forge.git("commit", "-q", "--allow-empty", "--no-verify", "-m", "later commit")
    ok = s.verify()
    assert ok.code == 0 and ok.verdict == "VERIFIED", ok.explain()
    # mallory replaces the trusted key in the same commit that adds her signature
    forge.write(".dlm-keys/team.pem", keys["mallory"][1].read_bytes())
    s.sign("mallory")
    forge.commit("policy: mallory, signed by mallory")
    caught(s.verify(), "signature.trusted", "not trusted")


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda b: b[: len(b) // 2], "not JSON"),
        (lambda b: b"[]", "mediaType"),
        (lambda b: b"\xff" * 10, "not JSON"),
        (lambda b: b"{" * 200_000, "not JSON"),
        (
            lambda b: b.replace(
                b'"payloadType": "application/vnd.in-toto+json"', b'"payloadType": "text/plain"'
            ),
            "payload type",
        ),
    ],
    ids=["truncated", "not-a-bundle", "binary", "deep", "payload-type"],
)
def test_a_malformed_bundle(signed: Signed, damage: Any, words: str) -> None:
    data = signed.forge.read(SIG)
    bundle = json.loads(data)
    pretty = json.dumps(bundle, indent=1).encode()  # a stable spelling to damage
    forged = damage(pretty)
    assert forged != pretty
    signed.forge.write(SIG, forged)
    signed.forge.commit("damaged signature")
    caught(signed.verify(), "signature.valid", words)


def test_a_payload_signed_by_no_one(signed: Signed) -> None:
    """The statement rewritten to cover the current records, the signature left as it was."""
    bundle = json.loads(signed.forge.read(SIG))
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["predicate"]["resources"][0]["digest"] = "1" * 64
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    signed.forge.write(SIG, json.dumps(bundle).encode())
    signed.forge.commit("re-written statement")
    caught(signed.verify(), "signature.valid", "does not verify")


def test_signing_refuses_records_that_disagree(signed: Signed) -> None:
    weights = signed.forge.root / DOC / "adapter" / "adapter_config.json"
    weights.chmod(0o644)
    weights.write_bytes(weights.read_bytes() + b" ")
    result = signed.forge._call_main(["sign", "--doc", DOC, "--key", str(signed.keys["alice"][0])])
    assert result.code == 1 and "is not the adapter manifest.json records" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_keygen_refuses_a_work_tree_and_never_overwrites(
    forge: Any, keys: dict[str, tuple[Path, Path]]
) -> None:
    result = forge._call_main(["keygen", "--out", str(forge.root / "keys")])
    assert result.code == 1 and "inside a git work tree" in result.stderr
    private = keys["alice"][0]
    assert private.stat().st_mode & 0o777 == 0o600
    before = private.read_bytes()
    result = forge._call_main(["keygen", "--out", str(private.parent)])
    assert result.code == 1 and "refusing to overwrite" in result.stderr
    assert private.read_bytes() == before


# --------------------------------------------------------------------------- the hooks


@pytest.fixture
def hooked(signed: Signed) -> Signed:
    """The signed repository with the hooks installed and signatures required."""
    root = signed.forge.root
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], root)
    signed.forge.git("config", "dlm-git.requireSignature", "true")
    return signed


def test_the_pre_commit_hook_refuses_stale_and_untrusted_signatures(hooked: Signed) -> None:
    forge, root = hooked.forge, hooked.forge.root
    lock = forge.lock()
    # records changed, dlm.sig not re-made; a field no other check ties to the manifest
    # (the hook runs lock.fields too: a seed the manifest does not record fails there)
    lock["supersedes"] = sha256_bytes(forge.read(f"{DOC}/dlm.lock"))
    forge.write_lock(lock)
    git(root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "stale signature"], root, check=False)
    assert proc.returncode == 1 and "signed other bytes of dlm.lock" in proc.stderr, proc.stderr
    hooked.sign("mallory")
    git(root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "untrusted signature"], root, check=False)
    assert proc.returncode == 1 and "is not trusted" in proc.stderr, proc.stderr
    hooked.sign("alice")
    git(root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "re-signed"], root, check=False)
    assert proc.returncode == 0 and "signature" not in proc.stderr, proc.stderr
    (root / DOC / "dlm.sig").unlink()
    git(root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "unsigned"], root, check=False)
    assert proc.returncode == 1 and "no dlm.sig" in proc.stderr, proc.stderr


def test_the_pre_push_hook_refuses_an_untrusted_signature(hooked: Signed, tmp_path: Path) -> None:
    forge, root = hooked.forge, hooked.forge.root
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    forge.git("remote", "add", "origin", str(remote))
    branch = forge.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    proc = run(["git", "push", "-q", "origin", branch], root, check=False)
    assert proc.returncode == 0, proc.stderr  # alice's signature, trusted
    hooked.sign("mallory")
    forge.commit("signed by mallory, committed past the hooks")
    proc = run(["git", "push", "-q", "origin", branch], root, check=False)
    assert proc.returncode == 1 and "signature.trusted" in proc.stderr, proc.stderr


def test_a_policy_file_that_is_no_key_is_reported_never_trusted(
    forge: Any, keys: dict[str, tuple[Path, Path]]
) -> None:
    s = Signed(forge, keys)
    forge.write(".dlm-keys/junk.pem", b"-----BEGIN PUBLIC KEY-----\nnot a key\n")
    forge.write(".dlm-keys/alice.pem", keys["alice"][1].read_bytes())
    forge.commit("policy")
    s.sign("alice")
    forge.commit("signed by alice, trusted by the parent's policy")
    result = s.verify()
    assert result.code == 0 and result.verdict == "VERIFIED", result.explain()
    notes = result.doc.get("notes", [])
    assert any(".dlm-keys/junk.pem is not an EC public key" in n for n in notes), notes


# ------------------------------------------- a stale signature at commit time, required or not
# `dlm-git.requireSignature` is NOT set below: a dlm.sig that no longer signs the staged
# records (or is malformed) is still refused, because `verify` would fail the commit and
# the pre-push hook refuse it. Only a missing or untrusted signature depends on the setting.


@pytest.fixture
def committed_signed(signed: Signed) -> Signed:
    """The signed repository with the hooks installed; signatures not required."""
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], signed.forge.root)
    assert "requireSignature" not in signed.forge.git("config", "--list")
    return signed


RETRAINED = "A paragraph added after the document was signed."


@pytest.fixture(scope="module")
def retrained_once(
    tmp_path_factory: pytest.TempPathFactory,
    verified_repo: Path,
    keys: dict[str, tuple[Path, Path]],
) -> Path:
    """`committed_signed`'s repository (signed by alice, trusted, committed, hooks
    installed) after `retrain(root, RETRAINED)`: one real training for this module's
    retraining tests, neither committed nor re-signed. Never modified: `retrained` copies."""
    root = copy_repo(verified_repo, tmp_path_factory.mktemp("signed-retrained") / "repo")
    s = Signed(Forge(root, _cli_in(root)), keys)
    s.sign()
    s.trust()
    s.forge.commit("sign demo")
    run([sys.executable, "-m", "dlm_git", "hooks", "install"], root)
    assert "requireSignature" not in s.forge.git("config", "--list")
    retrain(root, RETRAINED)
    return root


def _cli_in(root: Path) -> Any:
    """`dlm-git ARGS` in a fresh interpreter in `root`, as `Forge` calls its CLI."""

    def call(argv: list[str]) -> Result:
        proc = run([sys.executable, "-m", "dlm_git", *argv], root, check=False)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return call


@pytest.fixture
def retrained(
    tmp_path: Path,
    retrained_once: Path,
    keys: dict[str, tuple[Path, Path]],
    capfd: pytest.CaptureFixture[str],
) -> Signed:
    """A private copy of `retrained_once`: the records retrained, the old dlm.sig staged
    nowhere yet and unchanged in the work tree."""
    root = copy_repo(retrained_once, tmp_path / "repo")
    assert SIG not in git(root, "status", "--porcelain"), "the retrain changed dlm.sig"
    return Signed(Forge(root, call_main_in(root, capfd)), keys)


def retrain(root: Path, prose: str) -> None:
    """Edit the document and re-run the pipeline (a real training, no key configured)."""
    doc = root / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text("utf-8") + f"\n{prose}\n", "utf-8")
    proc = run([sys.executable, "-m", "dvc", "repro"], root, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def commit(root: Path, message: str) -> subprocess.CompletedProcess[str]:
    git(root, "add", "-A")
    return run(["git", "commit", "-q", "-m", message], root, check=False)


def refused_for_signature(proc: subprocess.CompletedProcess[str], words: str) -> None:
    """Exit 1, one finding line that names what is wrong and both fixes, then the summary."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("dlm-git: ERROR")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr
    line = errors[0]
    assert words in line, line
    assert f"dlm-git sign --doc {DOC}" in line and f"git rm -f {SIG}" in line, line
    assert "commit refused" in proc.stderr, proc.stderr


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted-key", "untrusted-key"])
def test_a_retrain_after_signing_is_refused_at_commit(retrained: Signed, trusted: bool) -> None:
    s, root = retrained, retrained.forge.root
    if not trusted:  # the binding is judged without trusting the key
        s.forge.git("config", "--unset-all", "dlm-git.trustedKeys")
    proc = commit(root, "retrained, not re-signed")
    refused_for_signature(proc, "does not sign the staged records")
    assert "manifest.json" in proc.stderr and f"{DOC}.dlm" in proc.stderr, proc.stderr
    s.sign()  # the honest fix: re-sign, stage dlm.sig
    proc = commit(root, "retrained and re-signed")
    assert proc.returncode == 0 and "signature" not in proc.stderr, proc.stderr
    assert s.forge.verify("HEAD").code == 0


def test_a_signature_over_another_document_is_refused_at_commit(committed_signed: Signed) -> None:
    import shutil

    s, root = committed_signed, committed_signed.forge.root
    other = root / "other"
    shutil.copytree(root / DOC, other, ignore=shutil.ignore_patterns("dlm.sig"))
    (other / f"{DOC}.dlm").write_text(
        (other / f"{DOC}.dlm").read_text("utf-8") + "\nAnother document's prose.\n", "utf-8"
    )
    s.sign(doc="other")  # genuine, by the trusted key, over the other document's records
    s.forge.write(SIG, (other / "dlm.sig").read_bytes())
    shutil.rmtree(other)
    proc = commit(root, "another document's signature copied in")
    refused_for_signature(proc, f"{DOC}.dlm")
    git(root, "rm", "-qf", SIG)  # the other fix: remove it
    proc = run(["git", "commit", "-q", "-m", "signature removed"], root, check=False)
    assert proc.returncode == 0, proc.stderr


def test_a_stale_signature_staged_alone_is_refused(retrained: Signed) -> None:
    """The records were retrained and committed unsigned (honest: the old signature was
    removed); the old dlm.sig is then brought back and staged by itself."""
    s, root = retrained, retrained.forge.root
    old = s.forge.read(SIG)
    git(root, "rm", "-q", SIG)
    proc = commit(root, "retrained, signature removed")
    assert proc.returncode == 0, proc.stderr
    s.forge.write(SIG, old)
    git(root, "add", SIG)
    assert git(root, "diff", "--cached", "--name-only").split() == [SIG]
    proc = run(["git", "commit", "-q", "-m", "the old signature, alone"], root, check=False)
    refused_for_signature(proc, "signed other bytes of")


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[: len(b) // 2], lambda b: b"[]"],
    ids=["truncated", "not-a-bundle"],
)
def test_a_malformed_signature_is_refused_at_commit(committed_signed: Signed, damage: Any) -> None:
    root = committed_signed.forge.root
    committed_signed.forge.write(SIG, damage(committed_signed.forge.read(SIG)))
    refused_for_signature(commit(root, "damaged signature"), "dlm.sig")


def test_an_untrusted_signature_stays_a_note_when_not_required(committed_signed: Signed) -> None:
    """Trust is the auditor's setting: without requireSignature a valid binding by a key
    no one trusts here commits (verify reports it in a note); with it, it is refused."""
    s, root = committed_signed, committed_signed.forge.root
    s.sign("mallory")  # over exactly the staged records
    proc = commit(root, "signed by mallory")
    assert proc.returncode == 0, proc.stderr
    assert any("not trusted" in n for n in s.forge.verify("HEAD").doc["notes"])
    s.forge.git("config", "dlm-git.requireSignature", "true")
    s.forge.write(f"{DOC}/README.txt", b"a file beside the document\n")
    proc = commit(root, "touch the document, signatures required")
    assert proc.returncode == 1 and "is not trusted" in proc.stderr, proc.stderr


def test_the_hook_reads_no_key_for_an_unsigned_document(
    forge: Any, keys: dict[str, tuple[Path, Path]]
) -> None:
    """Signed or not is known from the index: an unsigned document costs the hook no key
    and no `cryptography` import, even with trusted keys configured."""
    Signed(forge, keys).trust()
    forge.write(f"{DOC}/README.txt", b"a file beside the document\n")
    git(forge.root, "add", "-A")

    def imported() -> set[str]:
        argv = [sys.executable, "-X", "importtime", "-m", "dlm_git.hooks.pre_commit"]
        proc = run(argv, forge.root, check=False)
        assert proc.returncode == 0, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("import time:")]
        return {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in lines}

    modules = imported()
    assert "dlm_git" in modules and "cryptography" not in modules, sorted(modules)
    Signed(forge, keys).sign()  # signed: the trusted key is read and the signature checked
    git(forge.root, "add", "-A")
    assert "cryptography" in imported()
