"""Replaying sampled segments: restore boundary k-1 of a commit's chain into a fresh
model, train to boundary k, and compare the digests.

Invariants:
- A replay trains the commit's inputs only: the document materialised from the commit
  (sources outside the repository refused), its base resolved as recorded, its rows
  re-tokenized without the cache, and the token stream must be the manifest's.
- The process is pinned to the recorded profile before torch initialises (the caller
  has checked that it can be: `dlm_git.verify.segments`), and whether bits are expected
  is judged from this dlm-git's table and what this run observes, never from the commit.
- Each segment is replayed from a fresh model (`dlm_git.train.assemble.build_model`) and
  loop (`loop_config`, as training builds them); a divergence names the first step
  whose loss differs (or the boundary step, if only the final update differs).
- The chain's start is never taken from the commit: boundary 0 is compared with the
  start training makes from the seed (`train_loop` run to its step-0 boundary, no
  optimizer step), whatever segments are sampled.
- A chain whose last boundary is not the step the document trains to (a training
  stopped early, a boundary past its end) is a `Found.REFUSED` `segments.chain`, before
  anything is replayed. A boundary 0 whose only difference from the seeded start is one
  `getrandbits(24)` of Python's RNG is that start (rich's import on a terminal, before
  the loop guarded its RNGs: docs/verify.md class 9).
- A boundary to restore that no training could have captured is `Found.REFUSED` (a bad
  record, whatever the profile); other bytes from a replay are `Found.DIVERGED` (judged
  by the caller against whether bits were expected); a re-tokenized stream other than
  the manifest's is `OtherStream` (judged by the caller against the hash level).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git import docat
from dlm_git.errors import DlmGitError
from dlm_git.numerics.activate import activate
from dlm_git.numerics.judge import Expectation, expect_bits
from dlm_git.numerics.plan import Plan
from dlm_git.verify.profile import Setup

if TYPE_CHECKING:
    from peft import PeftModel

    from dlm_git.doc.schema import TrainingConfig
    from dlm_git.manifest.schema import Manifest
    from dlm_git.train.loop import LoopConfig
    from dlm_git.train.pipeline import TokenizeResult
    from dlm_git.train.segments import Boundary


class Found(StrEnum):
    """What replaying a boundary found."""

    SAME = "same"  # the recorded bytes came back
    DIVERGED = "diverged"  # other bytes: evidence only where bits are expected
    REFUSED = "refused"  # the boundary to start from is no state training captures


@dataclass(frozen=True)
class Replayed:
    """One replay's finding: its check (`segments.start`, `segments.replay`), what it
    found, and in words."""

    check: str
    found: Found
    detail: str


@dataclass(frozen=True)
class Replays:
    """Every replay's finding (the start first, then the sampled segments), and whether
    this run expected the recorded bits."""

    found: list[Replayed]
    expectation: Expectation


class OtherStream(DlmGitError):
    """The commit's rows, re-tokenized here, are not the manifest's token stream."""

    def __init__(self, recorded: str, replayed: str, tokenizer_sha256: str) -> None:
        super().__init__(
            "segments",
            f"re-tokenized stream {replayed[:16]} differs from the manifest's token root"
            f" {recorded[:16]}",
        )
        self.tokenizer_sha256 = tokenizer_sha256
        """The digest of the tokenizer that made the replayed stream."""


def replay_segments(
    root: Path,
    sha: str,
    doc_rel: str,
    manifest: Manifest,
    pinned: tuple[Setup, Plan, Mapping[str, Any]],
    boundaries: list[Boundary],
    digests: list[str],
    picks: list[int],
    work: Path,
) -> Replays:
    """Compare the chain's start with the seeded one, then replay the segments `picks`
    of the commit's chain (`boundaries`, their `digests`) under the recorded setup: what
    each found, and whether bits were expected."""
    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.doc.sources import Outside
    from dlm_git.numerics.prepare import prepare
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params
    from dlm_git.train.pipeline import tokenize_document
    from dlm_git.train.segments import genesis
    from dlm_git.train.smoke import recorded_max_steps, smoke_flags, with_max_steps
    from dlm_git.versions import pinned_versions

    setup, run_plan, recorded_versions = pinned
    activate(run_plan.env)  # before anything below imports torch
    tree = work / "tree"
    if docat.materialize(root, doc_rel, sha, tree) is None:
        raise DlmGitError(doc_rel, "no single .dlm in the document directory at this commit")
    loaded = load_document(tree / doc_rel, Outside.REFUSE)  # a commit's inputs only
    params = read_doc_params(loaded.repo_root, doc_key(loaded), replay=True)
    loaded = with_params(loaded, params.training)  # as the commit's params.yaml sets them
    limit = recorded_max_steps(setup.flags)  # a `--max-steps` run's limit, as the lock says
    loaded = with_max_steps(loaded, limit)
    training = loaded.doc.frontmatter.training
    resolved = resolve_base(
        loaded.doc.frontmatter.base_model,
        loaded.doc.directory,
        loaded.repo_root,
        local_dir=setup.base_dir,
    )
    env = prepare(training.seed, run_plan, setup.threads)
    device = env.device
    replayed = {**env.flags, **smoke_flags(limit)}  # the replay runs with the limit too
    expectation = expect_bits(
        setup.flags, replayed, recorded_versions, pinned_versions(), env.hardware.tier
    )
    tok = tokenize_document(loaded, resolved, use_cache=False)
    if tok.stream_root != manifest.tokens.root:
        raise OtherStream(manifest.tokens.root, tok.stream_root, resolved.tokenizer_sha256)
    if not tok.sequences:
        raise DlmGitError("segments", "the commit's document has no training sequences")
    replay = Replay(resolved.path, training, device, tok)
    ends = replay.ends_short(boundaries)
    if ends is not None:  # nothing to replay: the chain is not this training's
        return Replays([ends], expectation)
    start = genesis(manifest.config_sha256, manifest.tokens.root, manifest.base.tensor_root)
    found = [replay.start(boundaries[0], digests[0], start)]
    found += [replay.segment(i, boundaries, digests) for i in picks]
    return Replays(found, expectation)


@dataclass(frozen=True)
class Replay:
    """What every sampled segment is replayed with: the base, the training config, the
    device and the commit's re-tokenized stream."""

    base: Path
    training: TrainingConfig
    device: str
    tok: TokenizeResult

    def start(self, first: Boundary, digest: str, genesis_digest: str) -> Replayed:
        """The state training starts from (a fresh model, `train_loop` run to its step-0
        boundary), encoded as training encodes it and compared with the commit's first
        boundary (`digest`)."""
        from dlm_git.train.loop import train_loop
        from dlm_git.train.segments import capture, encode_boundary

        model, cfg = self._fresh()
        taken: list[tuple[dict[str, Any], dict[str, Any]]] = []
        train_loop(
            model,
            self.tok.sequences,
            cfg,
            boundary_every=1,
            on_boundary=lambda _step, m, t, _result: taken.append(capture(m, t)),
            stop_at=0,
        )
        tensors, scalars = taken[0]
        blob, data, mine = encode_boundary(tensors, scalars, [], genesis_digest)
        if mine == digest:
            return Replayed("segments.start", Found.SAME, "boundary 0 is the seeded start")
        older = {**scalars, "rng_python": _after_rich_import(scalars["rng_python"])}
        if encode_boundary(tensors, older, [], genesis_digest)[2] == digest:
            return Replayed("segments.start", Found.SAME, TERMINAL_START)
        differs = _difference(first, (0, data, blob))
        detail = f"boundary 0 is not the start training makes from the seed: {differs} differs"
        return Replayed("segments.start", Found.DIVERGED, detail)

    def segment(self, index: int, boundaries: list[Boundary], digests: list[str]) -> Replayed:
        """Restore boundary `index - 1` into a fresh model, train to boundary `index` and
        compare."""
        from dlm_git.hashing import float_hex
        from dlm_git.train.loop import make_trainer, train_loop
        from dlm_git.train.segments import (
            BoundaryError,
            capture,
            encode_boundary,
            parse_meta,
            read_tensors,
            restore,
        )

        start_step, start_meta, start_blob = boundaries[index - 1]
        end_step, end_meta, _ = boundaries[index]
        what = f"segment {index} (steps {start_step + 1}-{end_step})"
        model, cfg = self._fresh()
        trainer = make_trainer(model, len(self.tok.sequences), cfg)
        try:
            restore(model, trainer, read_tensors(start_step, start_blob), parse_meta(start_meta))
        except BoundaryError as exc:
            return Replayed("segments.replay", Found.REFUSED, f"{what}: {exc.one_line()}")
        result = train_loop(model, self.tok.sequences, cfg, trainer=trainer, stop_at=end_step)
        tensors, scalars = capture(model, trainer)
        _, _, digest = encode_boundary(tensors, scalars, result.losses, digests[index - 1])
        if digest == digests[index]:
            return Replayed("segments.replay", Found.SAME, f"{what} bitwise identical")
        recorded = parse_meta(end_meta).get("losses_hex") or []
        replayed = [float_hex(v) for v in result.losses]
        pairs = enumerate(zip(recorded, replayed, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), None)
        step = start_step + 1 + first if first is not None else end_step
        detail = f"{what} diverges; first divergent step {step}"
        return Replayed("segments.replay", Found.DIVERGED, detail)

    def ends_short(self, boundaries: list[Boundary]) -> Replayed | None:
        """A refused `segments.chain` where the chain's last boundary is not the step the
        commit's document trains to (a training stopped early, or a boundary past its
        end; the names put the steps in order), else None."""
        from dlm_git.train.loop import total_steps

        total, last = total_steps(len(self.tok.sequences), self._loop()), boundaries[-1][0]
        if last == total:
            return None
        detail = f"the chain ends at step {last}, and the document trains to step {total}"
        return Replayed("segments.chain", Found.REFUSED, detail)

    def _fresh(self) -> tuple[PeftModel, LoopConfig]:
        """A model with fresh LoRA layers from the seed and the loop's configuration, as
        training builds them."""
        from dlm_git.train.assemble import build_model, quiet_libraries

        quiet_libraries()  # no loading bars or advisory warnings in a verify's output
        model, _ = build_model(self.base, self.training, self.device)
        return model, self._loop()

    def _loop(self) -> LoopConfig:
        """The loop's configuration, as training builds it for this document."""
        from dlm_git.train.assemble import loop_config, resolve_precision

        precision = resolve_precision(self.training.precision, self.device)
        return loop_config(self.training, self.device, precision, self.tok.pad_id)


TERMINAL_START = (
    "boundary 0 is the seeded start, its Python RNG one getrandbits(24) on: a chain made"
    " on a terminal before the loop guarded its RNGs (rich's import drew it; class 9)"
)


def _after_rich_import(state: dict[str, Any]) -> dict[str, Any]:
    """The captured Python RNG state moved on by one `getrandbits(24)`: what `rich.style`
    drew when imported, before the training loop guarded its RNGs (docs/verify.md class
    9): the one older form of an honest start, and only that draw."""
    import random

    from dlm_git.hashing import float_hex

    gauss = None if state["gauss_next"] is None else float.fromhex(state["gauss_next"])
    rng = random.Random()
    rng.setstate((state["version"], tuple(state["state"]), gauss))
    rng.getrandbits(24)
    version, words, gauss_next = rng.getstate()
    return {
        "version": version,
        "state": list(words),
        "gauss_next": None if gauss_next is None else float_hex(gauss_next),
    }


def _difference(recorded: Boundary, rebuilt: Boundary) -> str:
    """The first tensor (by name) or else JSON field in which two boundaries differ."""
    from dlm_git.train.segments import BoundaryError, parse_meta, read_tensors

    try:
        theirs = read_tensors(recorded[0], recorded[2])
    except BoundaryError:
        return "its tensors file"
    mine = read_tensors(rebuilt[0], rebuilt[2])
    for name in sorted(set(theirs) | set(mine)):
        a, b = theirs.get(name), mine.get(name)
        if (
            a is None
            or b is None
            or (a.dtype, a.shape, a.tobytes()) != (b.dtype, b.shape, b.tobytes())
        ):
            return f"tensor {name!r}"
    fields, ours = parse_meta(recorded[1]), parse_meta(rebuilt[1])
    keys = sorted(set(fields) | set(ours), key=str)
    return next((f"field {k!r}" for k in keys if fields.get(k) != ours.get(k)), "its JSON")
