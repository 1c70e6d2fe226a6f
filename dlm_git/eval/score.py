"""The scoring itself: the base with the document's adapter, val losses and greedy answers.

Invariants:
- Runs in a process whose numerics profile is already pinned and seeded
  (`numerics.prepare`, called by `eval.run`); builds nothing at random: the model is the
  base's weights with the adapter loaded from `adapter/`, in eval mode, fp32.
- One sequence per forward pass (`record.BATCH_SIZE`): no padding. A sequence's loss is
  the summed cross-entropy of its next-token targets that carry a label (as training
  counts them: the answer tokens of an instruction row, every token of a prose row),
  accumulated in float64 in row order.
- Probes are answered with greedy decoding (`do_sample=False`, one beam, no repetition
  penalty) from the prompt training renders for the same pair (the ids before the answer
  in the row's training sequence), for at most `record.MAX_NEW_TOKENS` new tokens.
- torch, peft and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.eval.probes import Probe, exact_match
from dlm_git.eval.record import MAX_NEW_TOKENS, LossSum, val_section
from dlm_git.token_stream import IGNORE_INDEX, Sequence, masked_prefix
from dlm_git.train.rows import Row, chat_row_id, section_rows
from dlm_git.train.tokenize import RowTokenizer

if TYPE_CHECKING:
    from peft import PeftModel

    from dlm_git.base.resolve import ResolvedBase
    from dlm_git.doc.load import LoadedDocument


def load_model(base_path: Path, adapter_dir: Path, device: str) -> PeftModel:
    """The base (fp32, no remote code) with the adapter's weights, in eval mode."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from dlm_git.base.resolve import check_native_model
    from dlm_git.train.assemble import quiet_libraries

    quiet_libraries()
    check_native_model(base_path)
    base: Any = AutoModelForCausalLM.from_pretrained(
        str(base_path), dtype=torch.float32, trust_remote_code=False
    )
    model = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=False)
    model.to(device)
    model.eval()
    return model


def sequence_loss(model: PeftModel, seq: Sequence, device: str) -> LossSum:
    """The summed loss of one sequence's labelled next-token targets (one row)."""
    import torch

    ids = torch.as_tensor(seq.input_ids, dtype=torch.long, device=device).unsqueeze(0)
    labels = torch.as_tensor(seq.labels[1:], dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1].float()
    kept = labels != IGNORE_INDEX
    n = int(kept.sum())
    if n == 0:
        return LossSum(0.0, 0, 0)
    nll = torch.nn.functional.cross_entropy(logits[kept], labels[kept], reduction="sum")
    return LossSum(float(nll.double().cpu()), n, 0)


def rows_loss(model: PeftModel, sequences: Iterable[Sequence], device: str) -> LossSum:
    """Summed loss over `sequences` in order, counting the rows they come from."""
    total, rows = LossSum(0.0, 0, 0), set()
    for seq in sequences:
        total = total.plus(sequence_loss(model, seq, device))
        rows.add(seq.row_id)
    return LossSum(total.nll, total.tokens, len(rows))


def held_out_losses(
    loaded: LoadedDocument,
    resolved: ResolvedBase,
    model: PeftModel,
    device: str,
    *,
    use_cache: bool = True,
) -> dict[str, Any] | None:
    """`val` of the record: the losses of the rows `training.val_fraction` holds out, by
    mode; None when the split is off. The held-out rows' tokens come from `tokens/` or
    the token cache where they hold them (`train.pipeline.load_or_tokenize`)."""
    from dlm_git.train.pipeline import load_or_tokenize

    training = loaded.doc.frontmatter.training
    if training.val_fraction is None:
        return None
    # a replay's temp tree has no git directory for the token cache: it tokenizes afresh
    tok = load_or_tokenize(loaded, resolved, use_cache=use_cache and training.cache.enabled)
    chat = _chat_row_ids(loaded, tok.template_kind)
    held = list(tok.held_out or [])
    by_mode = {
        "prose": rows_loss(model, [s for s in held if s.row_id not in chat], device),
        "instruction": rows_loss(model, [s for s in held if s.row_id in chat], device),
    }
    return val_section(by_mode, training.val_fraction, str(loaded.doc.path))


def _chat_row_ids(loaded: LoadedDocument, template_kind: str) -> set[str]:
    """The row ids of the document's instruction rows (every other row is prose)."""
    fm = loaded.doc.frontmatter
    rows, _ = section_rows(loaded.doc.sections, fm.system_prompt, template_kind == "chat_template")
    return {r.row_id for r in rows if r.kind == "chat"}


def answer_probe(
    model: PeftModel, tokenizer: RowTokenizer, probe: Probe, device: str, template: str
) -> dict[str, Any]:
    """One probe's record: the greedy answer to the prompt training renders for it."""
    import torch
    from transformers import GenerationConfig

    row_id = chat_row_id(probe.section.section_id, tokenizer.system_prompt, template)
    (seq,) = tokenizer.tokenize(Row(row_id, probe.section.section_id, "chat", probe.section))
    prompt = seq.input_ids[: masked_prefix(seq)]
    ids = torch.as_tensor(prompt, dtype=torch.long, device=device).unsqueeze(0)
    tok = tokenizer.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tokenizer.eos_id()
    config = GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=False,
        num_beams=1,
        max_new_tokens=MAX_NEW_TOKENS,
        repetition_penalty=1.0,
        eos_token_id=tokenizer.eos_id(),
        pad_token_id=int(pad),
    )
    with torch.no_grad():
        out = model.generate(  # type: ignore[no-untyped-call]
            input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config
        )
    generated = [int(t) for t in out[0, len(prompt) :].tolist()]
    text = tok.decode(generated, skip_special_tokens=True)
    return {
        "section_id": probe.section.section_id,
        "marked": probe.marked,
        "question": probe.question,
        "reference": probe.reference,
        "generated": text,
        "generated_ids": generated,
        "prompt_tokens": len(prompt),
        "exact_match": exact_match(text, probe.reference),
    }
