"""Benchmark: tokenize step with a cold vs a warm token cache, against a read+hash floor.

Generates a corpus of N text files (default 1,000; `--files 50000` for the big run) in a
temp git repository, a `.dlm` that pulls all of it in through `training.sources`, then in ONE
process times:
  cold   load the document + tokenize every row (empty cache; tokenizer loaded)
  warm   the same again (every row a cache hit)
  floor  walk the corpus, read every file and sha256 it (nothing else)
Imports (torch, transformers) and the tiny base build are done before any timing, and
the objects they create are frozen out of the garbage collector's way. Each of --repeat
rounds empties the cache, times one cold run, syncs (so its writeback does not land on
the warm runs), then --warm warm runs, each followed by a floor. Prints the best of each
(and the medians: this machine is noisy), the cold/warm ratio (target >= 20x) and
warm/floor (target <= 1.5x), also as the median of each warm run over the floor timed right
after it (the pair shares the machine's load at that moment). A `--no-cache` run first
gives the token stream root every cached run must reproduce. Not a test: it always
exits 0.

Run: .venv/bin/python benchmarks/token_cache.py [--files N] [--repeat R] [--warm W] [--profile]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path
from statistics import median

from _timing import load, timed

WORDS = [
    "adapter",
    "lock",
    "manifest",
    "hash",
    "tensor",
    "seed",
    "thread",
    "replay",
    "verify",
    "commit",
    "tree",
    "blob",
    "cache",
    "token",
    "sequence",
    "window",
    "prose",
    "answer",
    "question",
    "source",
    "document",
    "base",
    "model",
    "revision",
    "determinism",
    "pipeline",
    "stage",
    "output",
    "input",
    "digest",
    "merkle",
    "root",
    "proof",
    "chain",
    "boundary",
    "step",
]

DOC = """---
dlm_id: 01M800GRBP0GEV3WAMXAHDD42B
base_model: builtin:tiny
training:
  sequence_len: 256
  sources:
    - path: corpus
      include: ["*.md"]
      max_files: {max_files}
---

# Benchmark corpus

::instruction::
### Q
What is cached?

### A
Tokenized rows, keyed by row id, tokenizer and sequence length.
"""


def document(files: int) -> str:
    """The benchmark's `.dlm`: its directive takes every generated file (`max_files`
    defaults to 10,000, which would skip the rest and time a smaller corpus)."""
    return DOC.replace("{max_files}", str(max(files, 1)))


def make_corpus(root: Path, files: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(files):
        sub = root / "corpus" / f"d{i % 32:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        lines = []
        for _ in range(rng.randint(20, 60)):
            lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + ".")
        text = f"# File {i}\n\n" + "\n".join(lines) + "\n"
        (sub / f"f{i:05d}.md").write_text(text, encoding="utf-8")
        total += len(text)
    return total


def read_and_hash(corpus: Path) -> float:
    """Walk, read and sha256 every file: the least any run must do. Read the way the
    sources expansion reads (`walk._read_at_most`: os.open/os.read, no file objects, an
    fstat only for a file over FIRST_READ), so the floor is not slower than our own
    reading."""
    from dlm_git.doc.walk import FIRST_READ

    def walk() -> None:
        for dirpath, dirnames, filenames in os.walk(corpus):
            dirnames.sort()
            for name in sorted(filenames):
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                try:
                    data = os.read(fd, FIRST_READ)
                    if len(data) == FIRST_READ:
                        data += os.read(fd, os.fstat(fd).st_size + 1 - len(data))
                finally:
                    os.close(fd)
                hashlib.sha256(data).hexdigest()

    return timed(walk)[0]


def tokenize_once(doc_dir: Path, use_cache: bool) -> tuple[float, dict[str, object] | None, str]:
    from dlm_git.base.resolve import resolve_base
    from dlm_git.doc.load import load_document
    from dlm_git.train.pipeline import TokenizeResult, tokenize_document

    def tokenize() -> TokenizeResult:
        loaded = load_document(doc_dir)
        fm = loaded.doc.frontmatter
        base = resolve_base(fm.base_model, loaded.doc.directory, loaded.repo_root)
        return tokenize_document(loaded, base, use_cache=use_cache)

    seconds, result = timed(tokenize)
    return seconds, result.cache_stats, result.stream_root


def profile_warm(doc_dir: Path, rows: int = 25) -> None:
    """One more warm run under cProfile: its top rows by own time and by cumulative time
    (the profiler's per-call overhead inflates the Python-heavy rows)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    tokenize_once(doc_dir, use_cache=True)
    profiler.disable()
    stats = pstats.Stats(profiler)
    for order in ("tottime", "cumulative"):
        print(f"\n--- one warm run under cProfile, top {rows} by {order} ---")
        stats.sort_stats(order).print_stats(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="cold runs (each from empty)")
    parser.add_argument("--warm", type=int, default=5, help="warm runs (and floors) per cold")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then profile one more warm run and print its top cProfile rows",
    )
    args = parser.parse_args()

    import gc

    import torch  # noqa: F401  (imports are not what we measure)
    import transformers  # noqa: F401

    from dlm_git.base.tiny import ensure_tiny_base

    ensure_tiny_base()
    # Nor is the garbage collector walking torch's and transformers' objects: a real warm
    # `dlm-git tokenize` never imports them.
    gc.collect()
    gc.freeze()
    work = Path(tempfile.mkdtemp(prefix="dlm-bench-cache-"))
    try:
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        size = make_corpus(work / "doc", args.files)
        (work / "doc" / "bench.dlm").write_text(document(args.files), encoding="utf-8")
        cache_dir = work / "cache"
        os.environ["DLM_GIT_CACHE_DIR"] = str(cache_dir)
        doc_dir = work / "doc"
        read_and_hash(doc_dir / "corpus")  # page cache warm for everyone
        _, _, uncached_root = tokenize_once(doc_dir, use_cache=False)

        colds, warms, floors = [], [], []
        roots = {uncached_root}
        for _ in range(args.repeat):
            shutil.rmtree(cache_dir, ignore_errors=True)
            t, stats, root = tokenize_once(doc_dir, use_cache=True)
            colds.append(t)
            roots.add(root)
            assert stats is not None and stats["hits"] == 0
            os.sync()  # the cold run's writeback is not the warm runs' cost
            for _ in range(args.warm):
                t, stats, root = tokenize_once(doc_dir, use_cache=True)
                warms.append(t)
                roots.add(root)
                assert stats is not None and stats["misses"] == 0
                assert int(stats["total_rows"]) >= args.files, "not every file was taken"
                floors.append(read_and_hash(doc_dir / "corpus"))
        assert len(roots) == 1, "cached and uncached token streams differ"
        cold, warm, floor = min(colds), min(warms), min(floors)
        print(f"corpus: {args.files} files (each a row), {size / 1e6:.1f} MB of text")
        print(f"load: {load()} (after the runs; {os.cpu_count()} CPUs)")
        print(f"cold  (empty cache, tokenize all) {cold * 1000:9.1f} ms")
        mid_warm, mid_floor = median(warms) * 1000, median(floors) * 1000
        print(f"warm  (all hits)                  {warm * 1000:9.1f} ms   median {mid_warm:.1f}")
        print(f"floor (walk + read + sha256)      {floor * 1000:9.1f} ms   median {mid_floor:.1f}")
        ratio = cold / warm
        over = warm / floor
        print(f"cold/warm  {ratio:6.1f}x   target >= 20x  {'PASS' if ratio >= 20 else 'FAIL'}")
        paired = median(w / f for w, f in zip(warms, floors, strict=True))
        print(
            f"warm/floor {over:6.2f}x   target <= 1.5x {'PASS' if over <= 1.5 else 'FAIL'}"
            f"   (medians: {mid_warm / mid_floor:.2f}x; median of each warm run over the"
            f" floor right after it: {paired:.2f}x)"
        )
        if args.profile:
            profile_warm(doc_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
