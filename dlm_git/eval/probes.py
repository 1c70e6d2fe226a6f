"""Which questions an evaluation asks, and how an answer is judged.

Invariants:
- Probes follow the original `dlm` tool's rule: the instruction pairs marked
  `### Q !probe` first, in document order, up to `PROBE_SAMPLE`; the rest filled with a
  seed-stable sample of the other instruction pairs (ordered by
  `sha256(f"{seed}\\x00{question}")`, smallest first; a question already taken is not
  asked twice). The selection depends on the document's sections and seed only.
- Exact match compares the generated text with the reference answer after stripping
  surrounding whitespace from both, and nothing else (case and inner spacing count).
- Imports no torch.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from dlm_git.doc.sections import Section

PROBE_SAMPLE = 3
"""How many probes an evaluation asks at most (the original tool's `k`)."""


class Probe(NamedTuple):
    """One question to answer greedily, with its section and reference answer."""

    section: Section
    marked: bool
    """True when the document marks it `### Q !probe`; False when sampled."""

    @property
    def question(self) -> str:
        return self.section.question or ""

    @property
    def reference(self) -> str:
        return self.section.answer or ""


def _marked(section: Section) -> bool:
    return section.probe


def _sample_key(question: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}\x00{question}".encode()).hexdigest()


def select_probes(sections: tuple[Section, ...], seed: int, k: int = PROBE_SAMPLE) -> list[Probe]:
    """The probes of a document: marked pairs first, then a seed-stable sample."""
    pairs = [s for s in sections if s.kind == "instruction"]
    chosen = [Probe(s, True) for s in pairs if _marked(s)][:k]
    asked = {p.question for p in chosen}
    rest: dict[str, Section] = {}
    for s in pairs:
        question = s.question or ""
        if not _marked(s) and question not in asked and question not in rest:
            rest[question] = s
    ordered = sorted(rest, key=lambda q: _sample_key(q, seed))
    return [*chosen, *(Probe(rest[q], False) for q in ordered[: k - len(chosen)])]


def exact_match(generated: str, reference: str) -> bool:
    """Equal after stripping surrounding whitespace from both (nothing else normalised)."""
    return generated.strip() == reference.strip()
