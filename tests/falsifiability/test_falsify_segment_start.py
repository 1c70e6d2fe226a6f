"""Segments level: the chain's start is judged, never taken from the commit.

Boundary 0 is the state training starts from: a model with fresh LoRA layers from the
seed, its optimizer and schedule at step 0, the host RNGs seeded. A forger who starts
from other weights and then trains honestly from them has every later boundary replay
bitwise from its predecessor; only comparing boundary 0 with the seeded start (check
`segments.start`, whatever segments are sampled) catches it. A chain that does not start
at step 0 at all fails the chain check. The stream the boundaries were trained on is
the commit's: a manifest token root no re-tokenization gives is a MISMATCH, not an
absence. And where the hash level found this machine's base other than the recorded
one, nothing is replayed on it (ABSENT), so no segment claims "bit equality expected".

These run `dlm-git verify --level segments` in the test's process (`Forge.verify_here`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.tensorfiles import nudge, patch_tensor, tensor_names
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import DOC, SEGMENTS_OUT, WEIGHTS

pytestmark = pytest.mark.slow

Boundary = tuple[int, bytes, bytes]


def _boundaries(forge: Any) -> list[Boundary]:
    files = forge.dir_files(SEGMENTS_OUT)
    steps = sorted(int(n[len("boundary-") : -len(".json")]) for n in files if n.endswith(".json"))
    return [
        (s, files[f"boundary-{s:07d}.json"], files[f"boundary-{s:07d}.safetensors"]) for s in steps
    ]


def _store_chain(forge: Any, boundaries: list[Boundary], manifest: dict[str, Any]) -> None:
    """The boundaries as the segments out, each `prev` and `tensors_sha256` re-recorded from
    the manifest's genesis on, and the manifest's count and chain root: a thorough forger's
    chain, which the chain check cannot tell from training's."""
    from dlm_git.hashing import canonical_json, sha256_bytes
    from dlm_git.train.segments import genesis

    prev = genesis(
        manifest["config_sha256"], manifest["tokens"]["root"], manifest["base"]["tensor_root"]
    )
    files: dict[str, bytes] = {}
    for step, data, blob in boundaries:
        meta = {**json.loads(data), "prev": prev, "tensors_sha256": sha256_bytes(blob)}
        files[f"boundary-{step:07d}.json"] = canonical_json(meta)
        files[f"boundary-{step:07d}.safetensors"] = blob
        prev = sha256_bytes(files[f"boundary-{step:07d}.json"])
    forge.store_out(SEGMENTS_OUT, files)
    manifest["segments"] = {**manifest["segments"], "count": len(boundaries), "chain_root": prev}
    forge.write_manifest(manifest)


def _train_on_from(forge: Any, start: Boundary, ends: list[int]) -> list[Boundary]:
    """Boundaries `ends` trained honestly from `start`, each from the one before, exactly
    as a segment replay restores and trains (the forger's own trainer)."""
    from safetensors.numpy import load

    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.doc.sources import Outside
    from dlm_git.numerics.activate import activate
    from dlm_git.numerics.plan import plan
    from dlm_git.numerics.prepare import prepare
    from dlm_git.safeparse import load_json
    from dlm_git.train.assemble import build_model, loop_config, resolve_precision
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params
    from dlm_git.train.loop import make_trainer, train_loop
    from dlm_git.train.pipeline import tokenize_document
    from dlm_git.train.segments import capture, encode_boundary, parse_meta, restore
    from dlm_git.train.smoke import recorded_max_steps, with_max_steps
    from dlm_git.verify.profile import recorded_setup

    setup = recorded_setup(load_json(forge.read(f"{DOC}/dlm.lock")), forge.root, DOC)
    assert not isinstance(setup, tuple), setup
    run_plan = plan(setup.device, setup.profile.name, None, setup.flags)
    activate(run_plan.env)
    loaded = load_document(forge.root / DOC, Outside.REFUSE)
    params = read_doc_params(loaded.repo_root, doc_key(loaded), replay=True)
    loaded = with_max_steps(with_params(loaded, params.training), recorded_max_steps(setup.flags))
    training = loaded.doc.frontmatter.training
    fm = loaded.doc.frontmatter
    resolved = resolve_base(fm.base_model, loaded.doc.directory, loaded.repo_root)
    env = prepare(training.seed, run_plan, setup.threads)
    tok = tokenize_document(loaded, resolved, use_cache=False)
    precision = resolve_precision(training.precision, env.device)
    out = [start]
    for end in ends:
        model, _ = build_model(resolved.path, training, env.device)
        cfg = loop_config(training, env.device, precision, tok.pad_id)
        trainer = make_trainer(model, len(tok.sequences), cfg)
        restore(model, trainer, load(out[-1][2]), parse_meta(out[-1][1]))
        result = train_loop(model, tok.sequences, cfg, trainer=trainer, stop_at=end)
        blob, data, _ = encode_boundary(*capture(model, trainer), result.losses, "")
        out.append((end, data, blob))  # `prev` is recorded by `_store_chain`
    return out


def _store_adapter_of(forge: Any, boundary: Boundary) -> None:
    """The committed adapter's weights made `boundary`'s parameters, re-bound everywhere
    (manifest, `.dir`, `dvc.lock`): the adapter a training ending there would save."""
    from safetensors.numpy import load

    from dlm_git.train.segments import adapter_name

    adapter = forge.adapter_files()
    weights = adapter[WEIGHTS]
    for key, values in load(boundary[2]).items():
        if key.startswith("param/"):

            def put(a: Any, values: Any = values) -> None:
                a[...] = values.reshape(a.shape)

            weights = patch_tensor(weights, adapter_name(key.removeprefix("param/")), put)
    forge.store_adapter({**adapter, WEIGHTS: weights}, rebind="all")


def test_a_forged_start_trained_on_honestly_is_caught_whatever_the_sample(forge: Any) -> None:
    """Boundary 0 with one LoRA A weight moved, every later boundary trained honestly from
    it, the adapter the last boundary's, chain and manifest re-recorded: the hash level
    and every segment replay pass; the start does not (one segment sampled)."""
    boundaries = _boundaries(forge)
    step0, data0, blob0 = boundaries[0]
    moved = next(n for n in tensor_names(blob0) if n.startswith("param/") and "lora_A" in n)
    start = (step0, data0, patch_tensor(blob0, moved, nudge))
    forged = _train_on_from(forge, start, [s for s, _, _ in boundaries[1:]])
    _store_adapter_of(forge, forged[-1])
    _store_chain(forge, forged, forge.manifest())
    forge.commit("a forged start, trained on honestly")

    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert_caught(result, "segments.start", verdicts=("MISMATCH",))
    detail = result.check("segments.start")["detail"]
    assert "not the start training makes from the seed" in detail, result.explain()
    assert moved.removeprefix("param/") in detail, result.explain()
    assert result.check("segments.chain")["ok"], result.explain()
    replayed = [c for c in result.checks if c["name"] == "segments.replay"]
    assert len(replayed) == 1 and replayed[0]["ok"], result.explain()


def test_an_honest_start_is_the_seeded_start(forge: Any) -> None:
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 0 and result.verdict == "SEGMENTS_BITWISE", result.explain()
    assert result.check("segments.start")["ok"], result.explain()


def test_a_chain_that_does_not_start_at_step_0_is_caught(forge: Any) -> None:
    """Boundary 0 dropped and the chain re-rooted on boundary 1: every segment left replays
    bitwise, but nothing says where boundary 1 came from."""
    _store_chain(forge, _boundaries(forge)[1:], forge.manifest())
    forge.commit("a chain from step 1")
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert_caught(result, "segments.chain", verdicts=("FAILED",))
    assert "starts at step 1" in result.first_failure["detail"], result.explain()


def test_a_forged_token_root_is_a_mismatch_not_an_absence(forge: Any) -> None:
    """tokens.root replaced and the chain re-rooted on it (the hash level compares no
    tokens): the commit's rows re-tokenized here are another stream, with the recorded
    tokenizer on the recorded base. That is evidence, as for a full replay."""
    manifest = forge.manifest()
    manifest["tokens"]["root"] = "1" * 64
    _store_chain(forge, _boundaries(forge), manifest)
    forge.commit("a forged token root")
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert_caught(result, "segments.replay", verdicts=("MISMATCH",))
    detail = result.first_failure["detail"]
    assert "differs from the manifest's token root 1111111111111111" in detail, result.explain()


def test_no_segment_is_replayed_on_a_base_the_hash_level_found_other(forge: Any) -> None:
    """Lock and manifest record another base tensor root (lock re-bound, the chain
    re-rooted on it): `base.identity` fails, and a replay on this machine's base could
    only train on other inputs, so none runs and none claims bit equality (ABSENT); the
    verdict stays the hash level's FAILED."""
    lock = forge.lock()
    lock["base_model_sha256"] = "2" * 64
    forge.write_lock(lock)
    manifest = forge.manifest()
    manifest["base"]["tensor_root"] = "2" * 64
    _store_chain(forge, _boundaries(forge), manifest)
    forge.commit("another base recorded")
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert_caught(result, "base.identity", verdicts=("FAILED",))
    replay = result.check("segments.replay")
    assert replay["state"] == "absent" and "not replayed" in replay["detail"], result.explain()
    assert not any(c["name"] == "segments.start" for c in result.checks), result.explain()


def test_a_chain_made_on_a_terminal_before_the_rng_guard_still_verifies(forge: Any) -> None:
    """docs/verify.md class 9: before the loop guarded its RNGs, rich's import on a
    terminal drew `random.getrandbits(24)` after the seeding, so every boundary of such an
    honest chain holds Python's RNG one draw on. Its start is the seeded start in that
    older form: SEGMENTS_BITWISE, as on 96a5324 (ec7d065 said MISMATCH)."""
    import random

    seeded = json.loads(_boundaries(forge)[0][1])["rng_python"]  # training draws none
    rng = random.Random()
    rng.setstate((seeded["version"], tuple(seeded["state"]), None))
    rng.getrandbits(24)  # rich.style, imported on a terminal after the seeding
    version, words, _ = rng.getstate()
    manifest = forge.manifest()
    older = []
    for step, data, blob in _boundaries(forge):
        meta = json.loads(data)
        meta["rng_python"] = {"version": version, "state": list(words), "gauss_next": None}
        older.append((step, json.dumps(meta).encode(), blob))
    _store_chain(forge, older, manifest)
    forge.commit("a chain made on a terminal before the RNG guard")
    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "1")
    assert result.code == 0 and result.verdict == "SEGMENTS_BITWISE", result.explain()
    assert "getrandbits(24)" in result.explain(), result.explain()


def test_a_training_stopped_early_fails_the_chain(forge: Any) -> None:
    """The last boundary dropped, the adapter made the one before it (re-bound everywhere),
    the chain re-recorded: every segment left replays honestly, but the chain ends before
    the step the document trains to (on 96a5324: SEGMENTS_BITWISE with every segment)."""
    boundaries = _boundaries(forge)[:-1]
    _store_adapter_of(forge, boundaries[-1])
    _store_chain(forge, boundaries, forge.manifest())
    forge.commit("a training stopped one segment early")
    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "9", "--seed", "1")
    assert_caught(result, "segments.chain")
    assert "the chain ends at step" in result.first_failure["detail"], result.explain()
    chain = [c for c in result.payload["documents"][0]["checks"] if c["name"] == "segments.chain"]
    assert len(chain) == 1, chain  # one state per check: the refusal replaced the pass
