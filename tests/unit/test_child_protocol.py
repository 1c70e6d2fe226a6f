"""The protocol between dlm-git and its child interpreters (`dlm_git.childproc`, with the
training pairs of `dlm_git.train.protocol` and verify's segment replay pair).

What a parent asks arrives whole (every field of `TrainOptions`, the ranks' job, a path
git could hold), and whatever is read back is decoded into its type or refused as one
`ProtocolError` line: wrong JSON types, missing or unknown keys, nesting too deep,
numbers JSON cannot carry. A child's user error comes back as the same line and exit
code; a child that leaves no answer is one line naming how it ended.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dlm_git.childproc import ChildError, ProtocolError, call_child, dump, parse_document
from dlm_git.doc.schema import TrainingConfig
from dlm_git.lock.policy import Finding
from dlm_git.train.options import TrainOptions
from dlm_git.train.protocol import RankJob, RankResult, TrainRequest, TrainResult


def a_job(**changes: Any) -> RankJob:
    fields: dict[str, Any] = {
        "launcher_pid": 4242,
        "device": "cpu",
        "numerics": "x86-64-v3",
        "replay_flags": {"numerics": "native", "cpu_capability": "DEFAULT", "threads": 2},
        "threads": 2,
        "training": TrainingConfig(seed=7, learning_rate=1e-3),
        "base_path": Path("/bases/tiny"),
        "base_repo_id": None,
        "base_revision": None,
        "precision": "fp32",
        "pad_id": 0,
        "world_size": 2,
        "backend": "gloo",
        "bucket_elements": 1 << 20,
        "staging": Path("/repo/doc/.adapter.new.1.x"),
    }
    return RankJob(**{**fields, **changes})


def test_a_training_request_arrives_whole() -> None:
    """Every option crosses, a replay's recorded flags and a file name that is not UTF-8
    included (the old command line dropped the flags)."""
    odd = Path(os.fsdecode(b"docs/caf\xe9/doc.dlm"))
    options = TrainOptions(
        lock_mode="ignore",
        use_cache=False,
        device="cpu",
        threads=3,
        accept_license=True,
        quiet=True,
        segment_every=0,
        tiny_dir=Path("bases/tiny"),
        base_dir=None,
        numerics="native",
        replay_flags={"numerics": "native", "cpu_capability": "DEFAULT", "nested": [1, 2.5]},
        nproc=2,
    )
    request = TrainRequest(odd, options)
    data = dump(request)
    assert data.isascii()
    assert parse_document(data, TrainRequest, "request") == request


def test_the_ranks_job_and_result_arrive_whole() -> None:
    job = a_job()
    assert parse_document(dump(job), RankJob, "job") == job
    result = RankResult(["0x1.8p+1"], 1, 10, 8, 4, ["q_proj"], {"threads": 2}, {"a": 1.5})
    assert parse_document(dump(result), RankResult, "result") == result


def test_a_trained_outcome_crosses_with_its_records_read_by_their_readers() -> None:
    """The lock and the manifest travel as their own bytes; a forged lock inside an
    answer is refused by the lock's reader, as a lock file would be."""
    result = TrainResult(
        doc_path=Path("doc/doc.dlm"),
        adapter_sha256="a" * 64,
        tensor_root="b" * 64,
        lock='{"lock_version": 99}',
        lock_written=False,
        manifest="{}",
        warnings=[Finding("hardware_tier", "WARN", "cpu-x86", "cpu-arm")],
        run_record={"wall_seconds": 1.5},
    )
    assert parse_document(dump(result), TrainResult, "answer") == result
    with pytest.raises(Exception) as info:
        result.outcome()
    assert "unknown lock_version 99" in str(info.value)


def job_with(**changes: Any) -> bytes:
    """The bytes of a valid job with some of its JSON replaced."""
    import json

    obj = json.loads(dump(a_job()))
    obj.update(changes)
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"\xff\xfe{", "job: is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "job: is not JSON ("),
        (b"[]", "job: is a list, not an object"),
        (job_with(threads="2"), "job.threads: is a string, not int"),
        (job_with(threads=True), "job.threads: is a boolean, not int"),
        (job_with(pad_id=1.5), "job.pad_id: is a number, not int"),
        (job_with(base_path=["/"]), "job.base_path: is a list, not a string"),
        (job_with(replay_flags=[]), "job.replay_flags: is a list, not an object"),
        (job_with(staging=None), "job.staging: is null, not a string"),
        (job_with(rogue=1), "job: unknown key 'rogue'"),
        (job_with(training={"seed": "x"}), "job.training.seed: Input should be a valid integer"),
        (job_with(training=[]), "job.training: is a list, not an object"),
    ],
    ids=[
        "not utf-8",
        "too deep",
        "not an object",
        "string for int",
        "bool for int",
        "float for int",
        "list for path",
        "list for mapping",
        "null for path",
        "unknown key",
        "invalid training",
        "training not an object",
    ],
)
def test_a_malformed_job_is_one_line(data: bytes, line: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_document(data, RankJob, "job")
    assert info.value.one_line().startswith(line), info.value.one_line()


def test_a_missing_key_and_numbers_json_cannot_carry_are_refused() -> None:
    import json

    obj = json.loads(dump(a_job()))
    del obj["device"]
    with pytest.raises(ProtocolError, match="job: missing key 'device'"):
        parse_document(json.dumps(obj).encode(), RankJob, "job")
    for number in (b"NaN", b"Infinity", b"1e999"):
        data = job_with().replace(b'"pad_id": 0', b'"pad_id": ' + number)
        with pytest.raises(ProtocolError, match="job: is not JSON"):
            parse_document(data, RankJob, "job")


def test_an_integer_no_float_can_hold_is_refused_where_a_float_is_read() -> None:
    """JSON carries integers of any length; a float field given one of 309 digits or
    more is one line, never an OverflowError (a training child's progress update)."""
    from dlm_git.train.progress import Progress

    data = b'{"step": 1, "total": 2, "loss_hex": "0x1p+0", "tokens": 3, "seconds": %s}'
    assert parse_document(data % b"5", Progress, "update").seconds == 5.0
    with pytest.raises(ProtocolError) as info:
        parse_document(data % (b"9" * 400), Progress, "update")
    assert info.value.one_line().startswith("update.seconds: is a number too large for a float")


def test_an_enum_and_a_literal_take_only_their_values() -> None:
    answer = dump(TrainResult(Path("d"), "a", "b", "", True, "", [], {}))
    forged = answer.replace(
        b'"warnings": []', b'"warnings": [{"field": "x", "new": 1, "old": 0, "severity": "FATAL"}]'
    )
    with pytest.raises(ProtocolError, match=r"answer.warnings\[0\].severity: is a string"):
        parse_document(forged, TrainResult, "answer")
    from dlm_git.contract.outcome import passed
    from dlm_git.verify.report import Verdict
    from dlm_git.verify.segments import SegmentsAnswer

    segments = SegmentsAnswer(Verdict.SEGMENTS_BITWISE, [passed("segments.chain", "ok")], [])
    assert parse_document(dump(segments), SegmentsAnswer, "answer") == segments
    for good, bad in ((b'"SEGMENTS_BITWISE"', b'"BITWISE!"'), (b'"ok"', b'"OK"')):
        with pytest.raises(ProtocolError, match="is a string, not one of"):
            parse_document(dump(segments).replace(good, bad), SegmentsAnswer, "answer")


def test_a_childs_user_error_is_the_same_line_and_exit_code(tmp_path: Path) -> None:
    """The real training child, asked to train a document that is not there, answers
    with the error a training here raises."""
    from dlm_git.errors import DlmGitError
    from dlm_git.train.run import train_in_process

    missing = tmp_path / "nowhere" / "doc.dlm"
    with pytest.raises(DlmGitError) as here:
        train_in_process(missing, TrainOptions())
    request = TrainRequest(missing, TrainOptions(quiet=True))
    with pytest.raises(ChildError) as child:
        call_child("dlm_git.train.child", request, TrainResult, env=os.environ, what="the child")
    assert child.value.one_line() == here.value.one_line()
    assert child.value.exit_code == here.value.exit_code


def test_a_child_that_leaves_no_answer_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ChildError) as info:
        call_child(
            "dlm_git.no_such_module",
            TrainRequest(tmp_path, TrainOptions()),
            TrainResult,
            env=os.environ,
            what="the child",
        )
    line = info.value.one_line()
    assert line.startswith("the child exited 1 without an answer: "), line
    assert "No module named dlm_git.no_such_module" in line and "\n" not in line
    assert info.value.exit_code == 1


def test_a_dlm_git_directory_where_the_child_starts_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child is this dlm-git: a working directory (a work tree, every byte of it a
    commit's) that holds a `dlm_git/` package of its own runs nothing of it."""
    planted = tmp_path / "dlm_git"
    planted.mkdir()
    ran = tmp_path / "planted-code-ran"
    (planted / "__init__.py").write_text(f"open({str(ran)!r}, 'w').close()\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    request = TrainRequest(tmp_path / "nowhere" / "doc.dlm", TrainOptions(quiet=True))
    with pytest.raises(ChildError) as child:
        call_child("dlm_git.train.child", request, TrainResult, env=os.environ, what="the child")
    assert not ran.exists()
    line = child.value.one_line()
    assert "nowhere" in line and "without an answer" not in line, line  # the real child's


def test_the_remote_query_crosses_and_its_answer_takes_only_its_shape() -> None:
    """The pre-push hook's remote check (`dlm_git.verify.remote`): a path git could hold
    crosses whole; an answer out of shape is one line, never a list made of a string."""
    from dlm_git.verify.remote import RemoteQuery, RemoteState

    query = RemoteQuery(Path(os.fsdecode(b"/repos/caf\xe9")), {"notes@abc": ["d4" * 16]})
    assert parse_document(dump(query), RemoteQuery, "request") == query
    state = RemoteState("storage", {"notes@abc": ["d4" * 16]})
    assert parse_document(dump(state), RemoteState, "answer") == state
    for forged, line in (
        (b'{"missing": {"d": "d4"}, "remote": null}', "answer.missing.d: is a string, not"),
        (b'{"missing": [], "remote": null}', "answer.missing: is a list, not an object"),
        (b'{"missing": {}, "remote": 1}', "answer.remote: is a number, not str"),
        (b'{"missing": {}}', "answer: missing key 'remote'"),
    ):
        with pytest.raises(ProtocolError) as info:
            parse_document(forged, RemoteState, "answer")
        assert info.value.one_line().startswith(line), info.value.one_line()
