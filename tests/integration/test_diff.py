"""`dlm-git diff [A] [B]`, specified on a real repository trained by `dvc repro`.

Each test copies the session's verified repository (one committed training of `demo`), or
the one retraining of it shared by the run (`retrained`), changes something the way a
user would, and reads the diff: the inputs, the lock with its severities, the adapter's
tensors, the training. Nothing a diff reads is modified.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all
from tests.support.shared import build_once, shared_root
from tests.support.verdicts import call_main_in
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

NEW_QA = "\n### Q\nWhat does diff show?\n\n### A\nWhat changed, and by how much.\n"


def diff(forge: Any, *args: str) -> Any:
    return forge._call_main(["diff", *args])


def diff_json(forge: Any, *args: str) -> dict[str, Any]:
    result = diff(forge, *args, "--json")
    assert result.code == 0, result.stderr
    (doc,) = result.payload["documents"]
    return dict(doc)


def dlm(forge: Any) -> Path:
    return Path(forge.root) / DOC / f"{DOC}.dlm"


def edit(forge: Any, pattern: str, replacement: str) -> None:
    text, n = re.subn(pattern, replacement, dlm(forge).read_text("utf-8"), flags=re.M)
    assert n == 1
    dlm(forge).write_text(text, "utf-8")


FM, PARAMS = "frontmatter", "params.yaml"


def setting(key: str, old: Any, new: Any, *origin: str | None) -> dict[str, Any]:
    """A config change as `diff --json` gives it, with where each side sets the value."""
    return {"key": key, "from": old, "to": new, "origin": {"from": origin[0], "to": origin[1]}}


def state(forge: Any) -> tuple[str, str, str]:
    """The work tree's status, the index's entries (modes, objects, names) and HEAD."""
    status = forge.git("status", "--porcelain", "--untracked=all")
    return status, forge.git("ls-files", "--stage"), forge.git("rev-parse", "HEAD")


@pytest.fixture(scope="session")
def retrained_once(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Path:
    """HEAD~1: the verified training; HEAD: one more Q/A and twice the learning rate,
    retrained by `dvc repro` (so both adapters are in the DVC cache) and committed. Built
    once per run (tests/support/shared.py); never modified: `retrained` copies it."""

    def build(root: Path) -> None:
        copy_repo(verified_repo, root)
        doc = root / DOC / f"{DOC}.dlm"
        text, n = re.subn(
            r"^  learning_rate: .*$",
            "  learning_rate: 0.004",
            doc.read_text("utf-8") + NEW_QA,
            flags=re.M,
        )
        assert n == 1
        doc.write_text(text, "utf-8")
        run(["dvc", "repro", "-q"], root)
        commit_all(root, "more data, higher learning rate")

    return build_once(shared_root(tmp_path_factory), "diff-retrained", build)


@pytest.fixture
def retrained(tmp_path: Path, retrained_once: Path, capfd: pytest.CaptureFixture[str]) -> Forge:
    """A private copy of `retrained_once`, to read or change."""
    root = copy_repo(retrained_once, tmp_path / "repo")
    return Forge(root, call_main_in(root, capfd))


def test_a_clean_work_tree_is_unchanged_and_untouched(forge: Any) -> None:
    before = state(forge)
    result = diff(forge)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [f"{DOC}: unchanged"]
    assert diff_json(forge, "HEAD", "HEAD")["status"] == "unchanged"
    assert state(forge) == before


def test_an_untrained_edit_shows_in_the_inputs_not_the_adapter(forge: Any) -> None:
    """A = HEAD, B = the work tree: a section added, one edited (same question, another
    answer), a source added and a config key changed; the recorded adapter is the same."""
    dlm(forge).write_text(dlm(forge).read_text("utf-8") + NEW_QA, "utf-8")
    edit(forge, r"^(manifest\.json binds the document.*)$", r"The manifest binds it all.")
    edit(forge, r"^  lora_r: .*$", "  lora_r: 4")
    (Path(forge.root) / DOC / "notes" / "extra.md").write_text("More notes.\n", "utf-8")
    before = state(forge)
    d = diff_json(forge)
    sections = d["inputs"]["sections"]
    assert [s["first_line"] for s in sections["added"]] == ["What does diff show?"]
    assert [e["first_line"] for e in sections["edited"]] == ["Which file binds inputs to outputs?"]
    assert sections["removed"] == []
    assert d["inputs"]["sources"]["added"] == ["notes/extra.md"]
    assert d["inputs"]["config"] == [setting("training.lora_r", 8, 4, FM, FM)]
    assert d["adapter"]["identical"] is True and d["status"] == "changed"
    assert d["lock"]["changes"] == []
    assert state(forge) == before


def test_two_trainings_differ_tensor_by_tensor(retrained: Any) -> None:
    d = diff_json(retrained, "HEAD~1", "HEAD")
    adapter = d["adapter"]
    assert adapter["identical"] is False and adapter["unavailable"] == []
    assert adapter["from_sha256"] != adapter["to_sha256"]
    rel = [t["rel_l2"] for t in adapter["tensors"]]
    assert len(rel) == 28 and rel == sorted(rel, reverse=True) and rel[-1] > 0
    assert {m["name"] for m in adapter["modules"]} >= {"q_proj", "v_proj", "down_proj"}
    assert sorted(layer["name"] for layer in adapter["layers"]) == ["0", "1"]
    assert adapter["added"] == adapter["removed"] == []
    changes = {c["field"]: c["severity"] for c in d["lock"]["changes"]}
    assert changes == {"dlm_sha256": "ALLOW"}
    assert d["inputs"]["config"] == [setting("training.learning_rate", 0.002, 0.004, FM, FM)]
    curve = d["training"]["loss_curve"]
    assert curve["common_steps"] == 4 and curve["first_divergent_step"] == 1
    assert d["training"]["final_loss"]["from"] != d["training"]["final_loss"]["to"]
    human = diff(retrained, "HEAD~1", "HEAD")
    assert human.code == 0 and "rel L2" in human.stdout and "by module" in human.stdout


def test_the_same_adapter_twice_is_one_line(retrained: Any) -> None:
    result = diff(retrained, "HEAD", "HEAD")
    assert result.stdout.splitlines()[1:] == [f"{DOC}: unchanged"]


def test_lock_drift_is_shown_with_the_policy_severity(forge: Any) -> None:
    lock = forge.lock()
    lock["hardware_tier"] = "cuda-sm80+"
    lock["base_model_sha256"] = "0" * 64
    forge.write_lock(lock)
    forge.commit("forged lock")
    changes = {
        c["field"]: c["severity"] for c in diff_json(forge, "HEAD~1", "HEAD")["lock"]["changes"]
    }
    assert changes == {"hardware_tier": "WARN", "base_model_sha256": "ERROR"}


def test_a_missing_adapter_object_is_reported_not_fatal(retrained: Any) -> None:
    head_dir = retrained.out_md5()
    weights_md5 = retrained.listing(head_dir)["adapter_model.safetensors"]
    retrained.cache_path(weights_md5).unlink()
    d = diff_json(retrained, "HEAD~1", "HEAD")
    assert d["adapter"]["identical"] is None and d["adapter"]["tensors"] == []
    (why,) = d["adapter"]["unavailable"]
    assert why.startswith("HEAD (") and "not in the DVC cache" in why
    assert d["inputs"]["config"]  # the rest of the diff is still there


def test_a_document_added_between_two_commits(forge: Any) -> None:
    other = Path(forge.root) / "other"
    other.mkdir()
    text = dlm(forge).read_text("utf-8")
    (other / "other.dlm").write_text(re.sub(r"(?m)^  sources:\n(    .*\n)+", "", text), "utf-8")
    params = Path(forge.root) / "params.yaml"
    params.write_text(params.read_text("utf-8").replace("- demo\n", "- demo\n- other\n"), "utf-8")
    forge.commit("another document")
    result = diff(forge, "HEAD~1", "HEAD", "--json")
    statuses = {d["doc"]: d["status"] for d in result.payload["documents"]}
    assert statuses == {DOC: "unchanged", "other": "added"}
    only = diff(forge, "HEAD~1", "HEAD", "--doc", "other", "--json")
    assert [d["doc"] for d in only.payload["documents"]] == ["other"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-rev"], "unknown revision 'no-such-rev'"),
        (["--", "--upload-pack=x", "HEAD"], "not a revision"),
        (["HEAD", "HEAD", "--doc", "/"], "outside the repository"),
        (["HEAD", "HEAD", "--doc", "notes"], "no document on either side"),
    ],
)
def test_misuse_is_one_line_exit_2(forge: Any, args: list[str], message: str) -> None:
    result = diff(forge, *args)
    assert result.code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_fetch_brings_a_missing_adapter_from_the_remote(retrained: Any, tmp_path: Path) -> None:
    """Both adapters pushed to a local-directory DVC remote, HEAD's weights then lost from
    the cache: without --fetch they are reported missing, with --fetch compared."""
    remote = tmp_path / "remote"
    run(["dvc", "remote", "add", "-d", "store", str(remote)], retrained.root)
    run(["dvc", "push", "-q", "--all-commits"], retrained.root)
    weights_md5 = retrained.listing(retrained.out_md5())["adapter_model.safetensors"]
    retrained.cache_path(weights_md5).unlink()
    assert diff_json(retrained, "HEAD~1", "HEAD")["adapter"]["tensors"] == []
    fetched = diff_json(retrained, "HEAD~1", "HEAD", "--fetch")["adapter"]
    assert fetched["unavailable"] == [] and len(fetched["tensors"]) == 28
    assert retrained.cache_path(weights_md5).is_file()


# --------------------------------------------------------------------------- params.yaml


def set_override(forge: Any, training: str) -> None:
    """params.yaml's `docs.demo.training` written as `training` (YAML flow text)."""
    params = Path(forge.root) / PARAMS
    text, n = re.subn(
        r"(?m)^(  demo:\n    training: ).*$", rf"\g<1>{training}", params.read_text("utf-8")
    )
    assert n == 1, text
    params.write_text(text, "utf-8")


def test_an_experiment_committed_shows_its_params_override(forge: Any) -> None:
    """`dvc exp run -S +docs.demo.training.learning_rate=...` and a commit: the effective
    setting changed, set in params.yaml now, and the manifests record it trained with."""
    key = f"+docs.{DOC}.training.learning_rate=0.004"
    run(["dvc", "exp", "run", "-q", "-S", key], forge.root)
    forge.commit("exp: twice the learning rate")
    d = diff_json(forge, "HEAD~1", "HEAD")
    assert d["inputs"]["config"] == [setting("training.learning_rate", 0.002, 0.004, FM, PARAMS)]
    assert d["training"]["settings"] == [
        {"key": "training.learning_rate", "from": 0.002, "to": 0.004}
    ]
    assert d["adapter"]["identical"] is False and d["inputs"]["refused"] == []
    lines = diff(forge, "HEAD~1", "HEAD").stdout.splitlines()
    said = "  config   training.learning_rate: 0.002 -> 0.004  (frontmatter -> params.yaml)"
    assert said in lines, lines
    assert not [line for line in lines if "trained " in line], lines  # said once


def test_an_untrained_override_shows_and_a_refused_one_says_why(forge: Any) -> None:
    """Work tree against HEAD: an override not trained yet is a setting change marked
    params.yaml; a misspelt one is shown as written with the reason a training refuses
    it, and the frontmatter's value it does not override is compared as it is."""
    before = state(forge)
    set_override(forge, "{lora_r: 4}")
    (change,) = diff_json(forge)["inputs"]["config"]
    assert change == setting("training.lora_r", 8, 4, FM, PARAMS)
    set_override(forge, "{lora_rr: 4}")
    d = diff_json(forge)
    assert d["inputs"]["config"] == [setting("training.lora_rr", None, 4, None, PARAMS)]
    (why,) = d["inputs"]["refused"]
    assert why.startswith("work tree: params.yaml: docs.demo.training.lora_rr: no such"), why
    assert d["status"] == "changed" and d["training"]["settings"] == []
    said = diff(forge).stdout
    assert "  config   training.lora_rr: None -> 4  (params.yaml)" in said, said
    assert "  config   (as written; a training refuses it: work tree: params.yaml" in said, said
    set_override(forge, "{lora_rr: 2024-01-01, seed: .nan}")  # what JSON cannot hold: its repr
    config = diff_json(forge)["inputs"]["config"]
    assert config == [
        setting("training.lora_rr", None, "datetime.date(2024, 1, 1)", None, PARAMS),
        setting("training.seed", 42, "nan", FM, PARAMS),
    ]
    assert state(forge)[1:] == before[1:]  # the index and HEAD untouched
