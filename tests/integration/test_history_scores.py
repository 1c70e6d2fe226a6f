"""`dlm-git diff` and `dlm-git log` show score changes, specified on a real repository:
the verified training (evaluated by its `eval@demo` stage, no held-out split), then a
training with a held-out half (the lock change accepted), then more data and a higher
learning rate, each retrained and re-evaluated by `dvc repro` and committed. The numbers
expected are the committed records' own; a forged `eval.json` of any shape is one line,
never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import imports_of
from tests.support.env import run
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all, git
from tests.support.verdicts import call_main_in
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

NEW_QA = "\n### Q\nWhat does diff show?\n\n### A\nWhat changed, and by how much.\n"
EVAL = f"{DOC}/eval.json"


def _edit(root: Path, pattern: str, replacement: str) -> None:
    dlm = root / DOC / f"{DOC}.dlm"
    text, n = re.subn(pattern, replacement, dlm.read_text("utf-8"), flags=re.M)
    assert n == 1
    dlm.write_text(text, "utf-8")


def _train_and_evaluate(root: Path, message: str, lock_mode: str) -> None:
    params = root / "params.yaml"
    text, n = re.subn(r"(?m)^  lock_mode: .*$", f"  lock_mode: {lock_mode}", params.read_text())
    assert n == 1
    params.write_text(text)
    run(["dvc", "repro", "-q"], root)  # eval@demo writes eval.json
    commit_all(root, message)


@pytest.fixture(scope="module")
def scored_repo(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Path:
    """HEAD~2: the verified training (no held-out rows); HEAD~1: a held-out half; HEAD:
    one more Q/A and twice the learning rate; each evaluated."""
    root = copy_repo(verified_repo, tmp_path_factory.mktemp("scored") / "repo")
    _edit(root, r"^  seed: 42$", "  seed: 42\n  val_fraction: 0.5")
    _train_and_evaluate(root, "hold out half, evaluate", "update")  # val_fraction: accepted
    dlm = root / DOC / f"{DOC}.dlm"
    dlm.write_text(dlm.read_text("utf-8") + NEW_QA, "utf-8")
    _edit(root, r"^  learning_rate: .*$", "  learning_rate: 0.004")
    _train_and_evaluate(root, "more data, higher learning rate", "default")
    return root


@pytest.fixture
def scored(tmp_path: Path, scored_repo: Path, capfd: pytest.CaptureFixture[str]) -> Forge:
    root = copy_repo(scored_repo, tmp_path / "repo")
    return Forge(root, call_main_in(root, capfd))


def record(forge: Forge, rev: str) -> dict[str, Any]:
    return dict(json.loads(git(forge.root, "show", f"{rev}:{EVAL}")))


def scores_json(forge: Forge, a: str, b: str) -> dict[str, Any]:
    result = forge._call_main(["diff", a, b, "--json"])
    assert result.code == 0, result.stderr
    (doc,) = result.payload["documents"]
    return dict(doc["scores"])


def test_diff_shows_val_losses_and_probes_from_one_record_to_the_other(scored: Forge) -> None:
    a, b = record(scored, "HEAD~1"), record(scored, "HEAD")
    s = scores_json(scored, "HEAD~1", "HEAD")
    assert (s["from"], s["to"], s["problems"], s["stale"]) == ("evaluated", "evaluated", [], [])
    assert a["val"]["overall"] is not None, "the held-out half holds no row: pick another seed"
    for key in ("overall", "prose", "instruction"):
        old, new = a["val"][key], b["val"][key]
        moved = [v for v in s["val"] if v["key"] == key]
        if old is None and new is None:
            assert moved == []
            continue
        (v,) = moved
        for what in ("loss", "perplexity"):
            x, y = (old or {}).get(what), (new or {}).get(what)
            change = None if x is None or y is None else y - x
            assert v[what] == {"from": x, "to": y, "change": change}
    overall = next(v for v in s["val"] if v["key"] == "overall")["loss"]
    assert overall["change"] != 0  # another adapter scores the same rows differently

    pa = {p["section_id"]: p for p in a["probes"]}
    pb = {p["section_id"]: p for p in b["probes"]}
    got = {p["section_id"]: p for p in s["probes"]}
    assert set(got) == set(pa) | set(pb)
    for sid, p in got.items():
        old, new = pa.get(sid), pb.get(sid)
        status = "removed" if new is None else "added" if old is None else "compared"
        assert p["status"] == status
        assert p["exact_match"] == {
            "from": old and old["exact_match"],
            "to": new and new["exact_match"],
        }
        changed = None if status != "compared" else old["generated"] != new["generated"]  # type: ignore[index]
        assert p["generated_changed"] is changed
    assert any(p["status"] == "added" for p in got.values())  # the new pair is probed
    assert s["tasks"] == []  # the document names no lm-eval task

    text = scored._call_main(["diff", "HEAD~1", "HEAD"]).stdout
    x, y = overall["from"], overall["to"]
    assert f"  val      overall loss {x:.6f} -> {y:.6f} ({y - x:+.6f})" in text
    added = next(p for p in got.values() if p["status"] == "added")
    assert f"  probe    + {added['section_id']}  exact match - -> " in text


def test_a_side_without_held_out_rows_has_no_val_numbers(scored: Forge) -> None:
    s = scores_json(scored, "HEAD~2", "HEAD~1")
    assert (s["from"], s["to"]) == ("evaluated", "evaluated")
    b = record(scored, "HEAD~1")
    assert record(scored, "HEAD~2")["val"] is None
    overall = next(v for v in s["val"] if v["key"] == "overall")
    assert overall["loss"] == {"from": None, "to": b["val"]["overall"]["loss"], "change": None}
    text = scored._call_main(["diff", "HEAD~2", "HEAD~1"]).stdout
    assert f"  val      overall loss - -> {b['val']['overall']['loss']:.6f}," in text


def test_a_side_without_a_record_is_not_evaluated(forge: Forge) -> None:
    a = json.loads(forge.read(EVAL))
    git(forge.root, "rm", "-q", EVAL, f"{DOC}/eval_metrics.json")
    forge.commit("no evaluation")
    s = scores_json(forge, "HEAD~1", "HEAD")
    assert (s["from"], s["to"], s["problems"], s["val"]) == ("evaluated", "not_evaluated", [], [])
    assert [(p["section_id"], p["status"], p["exact_match"]["to"]) for p in s["probes"]] == [
        (p["section_id"], "removed", None) for p in a["probes"]
    ]
    text = forge._call_main(["diff", "HEAD~1", "HEAD"]).stdout
    assert "  scores   A evaluated, B not evaluated" in text


def test_log_shows_each_entrys_headline_scores_and_their_change(scored: Forge) -> None:
    result = scored._call_main(["log", "--json"])
    assert result.code == 0, result.stderr
    newest, middle, oldest = result.payload["documents"][0]["entries"]
    a, b = record(scored, "HEAD~1"), record(scored, "HEAD")

    def headline(r: dict[str, Any]) -> tuple[float, int, int]:
        matched = sum(1 for p in r["probes"] if p["exact_match"])
        return r["val"]["overall"]["loss"], matched, len(r["probes"])

    (la, ma, na), (lb, mb, nb) = headline(a), headline(b)
    first = record(scored, "HEAD~2")
    m0 = sum(1 for p in first["probes"] if p["exact_match"])
    assert oldest["scores"]["val_loss"] is None and oldest["scores"]["exact_match"] == m0
    assert oldest["scores"]["previous"]["state"] == "not_evaluated"
    assert middle["scores"]["previous"]["exact_match"] == m0
    assert middle["scores"]["change"] == {"val_loss": None, "exact_match": ma - m0}
    s = newest["scores"]
    assert (s["state"], s["val_loss"], s["exact_match"], s["probes"]) == ("evaluated", lb, mb, nb)
    assert (s["previous"]["val_loss"], s["previous"]["exact_match"]) == (la, ma)
    assert s["change"] == {"val_loss": lb - la, "exact_match": mb - ma}
    assert s["adapter_sha256"] == newest["adapter_sha256"] and s["stale"] is None

    text = scored._call_main(["log"]).stdout
    line = (
        f"      scores    val loss {lb:.6f} ({lb - la:+.6f}), probes {mb}/{nb} exact ({mb - ma:+d})"
    )
    assert line in text
    assert f"      scores    val loss {la:.6f}, probes {ma}/{na} exact ({ma - m0:+d})\n" in text
    assert f"      scores    no held-out rows, probes {m0}/{len(first['probes'])} exact\n" in text


def test_log_reads_scores_without_importing_torch(scored: Forge) -> None:
    found = imports_of(scored.root, "log", "--json")
    assert found.code == 0 and '"val_loss": ' in found.stdout and found.heavy == [], found.heavy


FORGED = [
    (b"[not json", "eval.json is not a JSON object"),
    (b'{"eval_version": 2}', "eval.json: eval_version 2: this dlm-git reads 1"),
    (b'{"eval_version": 1, "val": 3}', "eval.json: val is neither null nor an object"),
    (
        b'{"eval_version": 1, "val": {"overall": {"loss": 1.5, "loss_hex": "0x1.0p+0",'
        b' "perplexity": 4.0}}}',
        "eval.json: val.overall.loss and its hex bits are different numbers",
    ),
    (
        b'{"eval_version": 1, "probes": [{"section_id": "s", "question": "q",'
        b' "generated": "g", "exact_match": "yes"}]}',
        "eval.json: probes[0].exact_match is not true or false",
    ),
    (
        b'{"eval_version": 1, "tasks": {"t": {"metrics": {"acc,none": {"value": "1"}}}}}',
        "eval.json: tasks.'t'.metrics.'acc,none'.value is not a number",
    ),
    (b'{"eval_version": 1, "val": {"overall": {"loss": 1e999}}}', "eval.json is not a JSON object"),
]


@pytest.mark.parametrize(("data", "problem"), FORGED)
def test_a_forged_record_is_one_line_in_diff_and_log(
    forge: Forge, data: bytes, problem: str
) -> None:
    forge.write(EVAL, data)
    forge.commit("forged eval.json")
    result = forge._call_main(["diff", "HEAD~1", "HEAD"])
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"  scores   (B: {problem})" in result.stdout.splitlines()
    assert "  scores   A evaluated, B malformed" in result.stdout
    s = scores_json(forge, "HEAD~1", "HEAD")
    assert (s["to"], s["problems"], s["val"]) == ("malformed", [f"B: {problem}"], [])
    assert {p["status"] for p in s["probes"]} == {"removed"}  # A's probes, B holds none
    logged = forge._call_main(["log", "--json"])
    assert logged.code == 0, logged.stderr
    newest = logged.payload["documents"][0]["entries"][0]
    assert newest["scores"]["state"] == "malformed" and problem in newest["problems"]


def forgetting_json(forge: Forge, a: str, b: str) -> dict[str, Any]:
    """`diff --forgetting` as a user runs it: a fresh process (it loads the models)."""
    cmd = ["dlm-git", "diff", a, b, "--forgetting", "--tiny-dir", "bases/tiny", "--json"]
    out = run(cmd, forge.root)
    (doc,) = json.loads(out.stdout)["documents"]
    return dict(doc["forgetting"])


def test_forgetting_scores_the_new_adapter_on_the_older_held_out_rows(scored: Forge) -> None:
    before = git(scored.root, "status", "--porcelain", "--ignored", "--untracked=all")
    f = forgetting_json(scored, "HEAD~1", "HEAD")
    a = record(scored, "HEAD~1")["val"]
    assert f["skipped"] is None and f["val_fraction"] == a["val_fraction"] == 0.5
    assert (f["rows"], f["tokens"]) == (a["overall"]["rows"], a["overall"]["tokens"])
    for v in f["val"]:
        # A's adapter on A's rows under A's profile: the very bits A's eval.json records
        assert v["loss"]["from"] == a[v["key"]]["loss"]
        assert v["loss_hex"]["from"] == a[v["key"]]["loss_hex"]
        assert v["loss"]["to"] != v["loss"]["from"]  # B's adapter is another model
        assert v["loss"]["change"] == v["loss"]["to"] - v["loss"]["from"]
        assert float.fromhex(v["loss_hex"]["to"]) == v["loss"]["to"]
    assert {v["key"] for v in f["val"]} == {k for k, e in a.items() if isinstance(e, dict)}
    assert git(scored.root, "status", "--porcelain", "--ignored", "--untracked=all") == before

    none = forgetting_json(scored, "HEAD~2", "HEAD~1")
    assert none["val"] == [] and "has no held-out split (training.val_fraction)" in none["skipped"]


def test_forgetting_without_an_adapter_says_why_and_scores_nothing(scored: Forge) -> None:
    weights_md5 = scored.listing(scored.out_md5())["adapter_model.safetensors"]
    scored.cache_path(weights_md5).unlink()  # HEAD's adapter is not in the DVC cache
    f = forgetting_json(scored, "HEAD~1", "HEAD")
    assert f["val"] == [] and f["rows"] is None
    assert f["skipped"].startswith("HEAD (") and "not in the DVC cache" in f["skipped"]
    text = run(["dlm-git", "diff", "HEAD~1", "HEAD", "--forgetting"], scored.root).stdout
    assert "  forgetting  (not scored: HEAD (" in text
    assert "  val      overall loss " in text  # the rest of the diff is still there


def test_tiny_dir_without_forgetting_is_one_line_exit_2(forge: Forge) -> None:
    result = forge._call_main(["diff", "--tiny-dir", "bases/tiny"])
    assert result.code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--tiny-dir is for --forgetting" in lines[0], result.stderr


def test_a_record_of_another_adapter_is_said_in_diff_and_log(forge: Forge) -> None:
    """Retrained, not re-evaluated: the committed eval.json scores the adapter before."""
    stale = json.loads(forge.read(EVAL))
    stale["adapter_sha256"] = "ab" * 32
    forge.write(EVAL, json.dumps(stale).encode())
    forge.commit("eval.json of another adapter")
    note = "eval.json scores adapter abababababababab, not the one manifest.json records"
    s = scores_json(forge, "HEAD~1", "HEAD")
    assert (s["problems"], s["stale"]) == ([], [f"B: {note}"])
    assert f"  scores   (B: {note})" in forge._call_main(["diff", "HEAD~1", "HEAD"]).stdout
    newest, older = forge._call_main(["log", "--json"]).payload["documents"][0]["entries"]
    assert (newest["scores"]["stale"], older["scores"]["stale"]) == (note, None)
    assert newest["scores"]["state"] == "evaluated" and newest["problems"] == []
    m, n = sum(1 for p in stale["probes"] if p["exact_match"]), len(stale["probes"])
    assert f", probes {m}/{n} exact (+0) ({note})" in forge._call_main(["log"]).stdout
