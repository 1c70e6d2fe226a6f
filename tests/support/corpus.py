"""A document over a generated corpus: `training.sources` pulls in a directory of small
generated text files, so a document has many cheap rows (the token cache's tests).

The files' text is a pure function of their number and version, so a test can rewrite
one file and know exactly which rows changed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tests.support.docs import DLM_ID, write_doc

VOCAB = (
    "adapter lock manifest hash tensor seed replay verify commit tree blob cache token "
    "sequence window prose answer question source document base model revision merkle"
)


def file_text(i: int, version: int = 0) -> str:
    """Generated file number `i` (in its `version`): a heading and 25-60 words."""
    rng, vocab = random.Random(i * 1000 + version), VOCAB.split()
    words = " ".join(rng.choice(vocab) for _ in range(rng.randint(25, 60)))
    return f"# File {i} v{version}\n\n{words}.\n"


def corpus_frontmatter(
    *,
    seq_len: int,
    base: str = "builtin:tiny",
    system_prompt: str = "Answer briefly.",
    training: str = "",
    cache_yaml: str = "",
) -> str:
    """Frontmatter (after `dlm_id`) training on `corpus/*.md`; `training` adds lines to
    the training block, `cache_yaml` is its `cache:` block."""
    lines = [
        f"base_model: {base}",
        f"system_prompt: {system_prompt}",
        "training:",
        f"  sequence_len: {seq_len}",
        *training.rstrip("\n").splitlines(),
        "  sources:",
        "    - path: corpus",
        '      include: ["*.md"]',
    ]
    if cache_yaml:
        lines += ["  cache:", *(f"    {line}" for line in cache_yaml.strip().splitlines())]
    return "\n".join(lines)


def write_corpus_doc(
    doc_dir: Path,
    *,
    body: str,
    seq_len: int,
    name: str = "doc.dlm",
    dlm_id: str = DLM_ID,
    **frontmatter: Any,
) -> Path:
    """`<doc_dir>/<name>` training on the corpus (`corpus_frontmatter`'s keywords)."""
    return write_doc(
        doc_dir,
        body,
        frontmatter=corpus_frontmatter(seq_len=seq_len, **frontmatter),
        name=name,
        dlm_id=dlm_id,
    )


def make_corpus_doc(repo: Path, *, n_files: int, **doc: Any) -> Path:
    """`<repo>/doc/doc.dlm` with `n_files` generated sources in `<repo>/doc/corpus/`
    (`doc`: `write_corpus_doc`'s keywords); the document's directory."""
    doc_dir = repo / "doc"
    (doc_dir / "corpus").mkdir(parents=True)
    for i in range(n_files):
        (doc_dir / "corpus" / f"f{i:02d}.md").write_text(file_text(i), "utf-8")
    write_corpus_doc(doc_dir, **doc)
    return doc_dir
