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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git import docat
from dlm_git.errors import DlmGitError
from dlm_git.numerics.activate import activate
from dlm_git.numerics.judge import Expectation, expect_bits
from dlm_git.numerics.plan import Plan
from dlm_git.verify.profile import Setup

if TYPE_CHECKING:
    from dlm_git.doc.schema import TrainingConfig
    from dlm_git.manifest.schema import Manifest
    from dlm_git.train.pipeline import TokenizeResult
    from dlm_git.train.segments import Boundary


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
) -> tuple[list[tuple[int, str | None]], Expectation]:
    """Replay the segments `picks` of the commit's chain (`boundaries`, their `digests`)
    under the recorded setup: (index, None or where it diverged) each, and whether bits
    were expected."""
    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.doc.sources import Outside
    from dlm_git.numerics.prepare import prepare
    from dlm_git.train.doc_params import doc_key, read_doc_params, with_params
    from dlm_git.train.pipeline import tokenize_document
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
        raise DlmGitError("segments", "re-tokenized stream differs from the manifest's token root")
    replay = Replay(resolved.path, training, device, tok)
    return [(i, replay.segment(i, boundaries, digests)) for i in picks], expectation


@dataclass(frozen=True)
class Replay:
    """What every sampled segment is replayed with: the base, the training config, the
    device and the commit's re-tokenized stream."""

    base: Path
    training: TrainingConfig
    device: str
    tok: TokenizeResult

    def segment(self, index: int, boundaries: list[Boundary], digests: list[str]) -> str | None:
        """Restore boundary `index - 1` into a fresh model, train to boundary `index`:
        None when it comes back byte for byte, else where it diverged."""
        from safetensors.numpy import load

        from dlm_git.hashing import float_hex
        from dlm_git.train.assemble import (
            build_model,
            loop_config,
            quiet_libraries,
            resolve_precision,
        )
        from dlm_git.train.loop import make_trainer, train_loop
        from dlm_git.train.segments import capture, encode_boundary, parse_meta, restore

        start_step, start_meta, start_blob = boundaries[index - 1]
        end_step, end_meta, _ = boundaries[index]
        training, device, tok = self.training, self.device, self.tok
        quiet_libraries()  # no loading bars or advisory warnings in a verify's output
        model, _ = build_model(self.base, training, device)
        precision = resolve_precision(training.precision, device)
        cfg = loop_config(training, device, precision, tok.pad_id)
        trainer = make_trainer(model, len(tok.sequences), cfg)
        restore(model, trainer, load(start_blob), parse_meta(start_meta))
        result = train_loop(model, tok.sequences, cfg, trainer=trainer, stop_at=end_step)
        tensors, scalars = capture(model, trainer)
        _, _, digest = encode_boundary(tensors, scalars, result.losses, digests[index - 1])
        if digest == digests[index]:
            return None
        recorded = parse_meta(end_meta).get("losses_hex") or []
        replayed = [float_hex(v) for v in result.losses]
        pairs = enumerate(zip(recorded, replayed, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), None)
        step = start_step + 1 + first if first is not None else end_step
        return (
            f"segment {index} (steps {start_step + 1}-{end_step}) diverges;"
            f" first divergent step {step}"
        )
