"""The token cache: keys, entry format, parity, invalidation, corruption, eviction, sweeping,
concurrent writers and layout.

Documents here pull a directory of small generated text files in through
`training.sources`, so there are many cheap rows; tokenizing them with the tiny base takes
a fraction of a second. The cache lives in `<repo>/.git/dlm-git/token-cache` (the
`DLM_GIT_CACHE_DIR` override is removed by tests/conftest.py unless a test sets it).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dlm_git.base.resolve import ResolvedBase, resolve_base
from dlm_git.base.tiny import ensure_tiny_base
from dlm_git.cache.entry import CorruptEntry, decode_entry, encode_entry, entry_key
from dlm_git.cache.index import SWEEP_GRACE_SECONDS
from dlm_git.cache.layout import INDEX_NAME, PACK_PREFIX, default_cache_dir
from dlm_git.cache.pack import MAGIC as PACK_MAGIC
from dlm_git.cache.pack import decode_pack, encode_pack
from dlm_git.cache.store import TokenCache
from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.token_stream import RowTokens, Sequence, TokenStream, row_leaf_hash, row_payload
from dlm_git.train.pipeline import TokenizeResult, tokenize_document
from tests.support.corpus import file_text, make_corpus_doc, write_corpus_doc
from tests.support.docs import DLM_ID
from tests.support.env import subprocess_env
from tests.support.files import tree_state

N_FILES = 30
ROWS = N_FILES + 2  # the sources, one prose section and one instruction pair
BODY = """
# Cached notes

The body prose is one row; each source file is another.

::instruction::
### Q
What does the token cache key on?

### A
The row id, the tokenizer's sha256 and the sequence length.
"""
TOK = "0123456789abcdef" * 4  # a stand-in tokenizer sha256


# --- helpers ---------------------------------------------------------------------------------


write_doc = functools.partial(write_corpus_doc, body=BODY, seq_len=32)
make_doc = functools.partial(make_corpus_doc, n_files=N_FILES, body=BODY, seq_len=32)


def resolve(doc_dir: Path) -> tuple[LoadedDocument, ResolvedBase]:
    loaded = load_document(doc_dir)
    fm = loaded.doc.frontmatter
    return loaded, resolve_base(fm.base_model, loaded.doc.directory, loaded.repo_root)


def tokenize(doc_dir: Path, use_cache: bool = True) -> TokenizeResult:
    loaded, resolved = resolve(doc_dir)
    return tokenize_document(loaded, resolved, use_cache=use_cache)


def stats(result: TokenizeResult) -> dict[str, object]:
    assert result.cache_stats is not None
    return result.cache_stats


def hits_misses(result: TokenizeResult) -> tuple[int, int, int]:
    s = stats(result)
    return int(s["hits"]), int(s["misses"]), int(s["corrupt"])  # type: ignore[call-overload]


def cache_dir(repo: Path) -> Path:
    return repo / ".git" / "dlm-git" / "token-cache"  # in the git dir: no commit reaches it


def entry_files(root: Path) -> dict[str, Path]:
    return {p.name.removesuffix(".tok"): p for p in (root / "entries").rglob("*.tok")}


def pack_files(root: Path) -> dict[str, Path]:
    """Index key (`pack-<dlm_id>`) -> pack file."""
    return {PACK_PREFIX + p.name.removesuffix(".pack"): p for p in root.glob("packs/*.pack")}


def index_rows(root: Path, packs: bool = False) -> dict[str, int]:
    """The index's entries (key -> size); pack rows only if `packs`."""
    conn = sqlite3.connect(root / INDEX_NAME)
    try:
        rows = dict(conn.execute("SELECT key, size FROM entries"))
    finally:
        conn.close()
    return {k: v for k, v in rows.items() if packs or not k.startswith(PACK_PREFIX)}


def row_keys(doc_dir: Path) -> dict[str, str]:
    """Source relpath -> the row's cache key, as a run of the document now computes it."""
    loaded, resolved = resolve(doc_dir)
    seq_len = loaded.doc.frontmatter.training.sequence_len
    tok = resolved.identity.tokenizer_sha256
    return {
        f.relpath: entry_key(f.section().section_id, tok, seq_len) for f in loaded.sources.files
    }


def assert_same_tokens(a: TokenizeResult, b: TokenizeResult) -> None:
    """Element-wise equality of every sequence, the row structure and the stream root."""
    assert a.row_counts == b.row_counts
    assert len(a.sequences) == len(b.sequences)
    for x, y in zip(a.sequences, b.sequences, strict=True):
        assert x.row_id == y.row_id
        assert x.input_ids.dtype == y.input_ids.dtype == np.int32
        assert x.labels.dtype == y.labels.dtype == np.int32
        np.testing.assert_array_equal(x.input_ids, y.input_ids)
        np.testing.assert_array_equal(x.labels, y.labels)
    assert a.tokens == b.tokens
    assert a.stream_root == b.stream_root


def assert_index_consistent(root: Path) -> None:
    """The index lists exactly the entry and pack files on disk, with their sizes; no tmp
    files are left; SQLite finds the database intact."""
    rows = index_rows(root, packs=True)
    files = {**entry_files(root), **pack_files(root)}
    assert set(rows) == set(files)
    assert rows == {k: p.stat().st_size for k, p in files.items()}
    assert not list(root.rglob("*.tmp"))
    conn = sqlite3.connect(root / INDEX_NAME)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def seqs(row_id: str, *windows: list[int], masked: int = 0) -> list[Sequence]:
    out = []
    for w in windows:
        ids = np.asarray(w, dtype=np.int32)
        labels = ids.copy()
        labels[:masked] = -100
        out.append(Sequence(row_id, ids, labels))
    return out


METRICS = {"dlm_id": DLM_ID, "total_rows": 1, "hits": 0, "misses": 1, "tokenize_seconds": 0.0}


# --- keys and the entry format ---------------------------------------------------------------


def test_key_changes_with_each_component_and_nothing_else() -> None:
    base = entry_key("aaaaaaaaaaaaaaaa", TOK, 256)
    assert base == entry_key("aaaaaaaaaaaaaaaa", TOK, 256)
    assert len(base) == 32 and all(c in "0123456789abcdef" for c in base)
    variants = {
        entry_key("aaaaaaaaaaaaaaab", TOK, 256),
        entry_key("aaaaaaaaaaaaaaaa", TOK[:-1] + "0", 256),
        entry_key("aaaaaaaaaaaaaaaa", TOK, 257),
    }
    assert base not in variants and len(variants) == 3


def payload_of(sequences: list[Sequence]) -> bytes:
    """The canonical row payload, built straight from the sequences (int32 ids + labels)."""
    ids = [int(t) for s in sequences for t in s.input_ids]
    labels = [int(t) for s in sequences for t in s.labels]
    return (
        len(sequences).to_bytes(4, "little")
        + b"".join(len(s.input_ids).to_bytes(4, "little") for s in sequences)
        + b"".join(t.to_bytes(4, "little", signed=True) for t in ids + labels)
    )


def test_entry_roundtrip_and_leaf() -> None:
    rows = seqs("r1", [5, 6, 7, 8], [9, 10], masked=1)
    tokens = RowTokens.from_sequences("r1", rows)
    assert tokens.leaf == row_leaf_hash("r1", payload_of(rows))
    assert row_payload(tokens.lengths, tokens.ids, TokenStream.from_rows([tokens]).labels) == (
        payload_of(rows)
    )
    key = entry_key("r1", TOK, 4)
    data = encode_entry(key, tokens)
    got = decode_entry(data, key, "r1")
    assert got.leaf == tokens.leaf and got.ids.dtype == np.dtype("<u2")  # small ids: 2 bytes
    back = got.sequences()
    assert [s.row_id for s in back] == ["r1", "r1"]
    for a, b in zip(back, rows, strict=True):
        assert a.input_ids.dtype == a.labels.dtype == np.int32
        np.testing.assert_array_equal(a.input_ids, b.input_ids)
        np.testing.assert_array_equal(a.labels, b.labels)
    # a row with no sequences (a one-token row) is a valid entry too
    empty = RowTokens.from_sequences("r1", [])
    assert decode_entry(encode_entry(key, empty), key, "r1").sequences() == []
    # ids beyond uint16 are stored as int32 and come back exactly
    wide = seqs("r1", [70_000, 5, 2**31 - 1], masked=2)
    got = decode_entry(encode_entry(key, RowTokens.from_sequences("r1", wide)), key, "r1")
    assert got.ids.dtype == np.dtype("<i4")
    np.testing.assert_array_equal(got.sequences()[0].labels, wide[0].labels)


def test_only_masked_prefix_labels_are_cacheable() -> None:
    ids = np.asarray([1, 2, 3, 4], dtype=np.int32)
    for labels in ([1, -100, 3, 4], [1, 2, 3, 5], [-100, -100, 9, 4]):
        bad = Sequence("r1", ids, np.asarray(labels, dtype=np.int32))
        with pytest.raises(ValueError, match="masked prefix"):
            RowTokens.from_sequences("r1", [bad])


def test_every_truncation_flip_and_extension_is_detected() -> None:
    rows = seqs("r1", [1, 2, 3], [4, 5], masked=2)
    key = entry_key("r1", TOK, 3)
    data = encode_entry(key, RowTokens.from_sequences("r1", rows))
    for n in range(len(data)):
        with pytest.raises(CorruptEntry):
            decode_entry(data[:n], key, "r1")
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        with pytest.raises(CorruptEntry):
            decode_entry(bytes(flipped), key, "r1")
    with pytest.raises(CorruptEntry):
        decode_entry(data + b"\x00", key, "r1")
    with pytest.raises(CorruptEntry):  # another key's entry under this key's name
        decode_entry(data, entry_key("r1", TOK, 4), "r1")
    with pytest.raises(CorruptEntry):  # right key, asked for another row
        decode_entry(data, key, "r2")


def test_every_pack_truncation_flip_and_extension_is_detected() -> None:
    rows = [
        RowTokens.from_sequences(r, seqs(r, [1, 2, 3], [4, 5], masked=m))
        for r, m in (("r1", 0), ("r2", 2))
    ]
    src = "fedcba9876543210" * 4  # a stand-in source_rows_digest
    data = encode_pack(rows, tokenizer_sha256=TOK, sequence_len=3, sources_digest=src)
    pack = decode_pack(data)
    assert pack.keys == [entry_key(r, TOK, 3) for r in ("r1", "r2")]
    assert pack.leaves == [t.leaf for t in rows] and pack.row_ids == ["r1", "r2"]
    # "r1" a section row, "r2" the one source file row
    assert pack.holds(TOK, 3, ["r1"], src, 1) and pack.holds(TOK, 3, ["r1", "r2"], src, 0)
    other_tok = TOK[:-1] + ("0" if TOK[-1] != "0" else "1")
    other_src = src[:-1] + ("1" if src[-1] == "0" else "0")
    for tok, seq_len, ids, digest, n_sources in (
        (other_tok, 3, ["r1"], src, 1),
        (TOK, 4, ["r1"], src, 1),
        (TOK, 3, ["r1"], other_src, 1),
        (TOK, 3, ["r2"], src, 1),
        (TOK, 3, ["r1"], src, 2),
        (TOK, 3, [], src, 1),
        (TOK, 3, ["r2", "r1"], src, 0),
    ):
        assert not pack.holds(tok, seq_len, ids, digest, n_sources)
    stream = pack.stream()
    assert stream.row_ids == ["r1", "r2"]
    for got, want in zip(stream, [*rows[0].sequences(), *rows[1].sequences()], strict=True):
        np.testing.assert_array_equal(got.labels, want.labels)
    for n in range(len(data)):
        with pytest.raises(CorruptEntry):
            decode_pack(data[:n])
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x01
        with pytest.raises(CorruptEntry):
            decode_pack(bytes(flipped))
    with pytest.raises(CorruptEntry):
        decode_pack(data + b"\x00")


def test_store_get_put_and_misplaced_entry(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "c")
    k1, k2 = entry_key("r1", TOK, 8), entry_key("r2", TOK, 8)
    assert cache.get(k1, "r1") is None and cache.corrupt == 0  # absent: a plain miss
    tokens = RowTokens.from_sequences("r1", seqs("r1", [1, 2, 3]))
    data = encode_entry(k1, tokens)
    assert cache.put(k1, data) == len(data)
    assert cache.layout.path_of(k1) == tmp_path / "c" / "entries" / k1[:2] / f"{k1}.tok"
    found = cache.get(k1, "r1")
    assert found is not None and found.leaf == tokens.leaf
    target = cache.layout.path_of(k2)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(cache.layout.path_of(k1).read_bytes())  # k1's entry under k2's name
    assert cache.get(k2, "r2") is None and cache.corrupt == 1


# --- parity ----------------------------------------------------------------------------------


def test_cached_and_uncached_tokenization_are_identical(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    uncached = tokenize(doc_dir, use_cache=False)
    assert uncached.cache_stats is None
    assert not (git_repo / ".dlm-git").exists()  # use_cache=False creates nothing
    cold = tokenize(doc_dir)
    assert hits_misses(cold) == (0, ROWS, 0)
    warm = tokenize(doc_dir)
    assert hits_misses(warm) == (ROWS, 0, 0)
    assert uncached.rows == cold.rows == warm.rows == ROWS
    assert len(uncached.sequences) > ROWS  # some rows span several windows
    assert_same_tokens(cold, uncached)
    assert_same_tokens(warm, uncached)
    assert warm.template_kind == uncached.template_kind == "chat_template"
    assert warm.tokenizer._tok is None  # all hits: the tokenizer was never loaded
    for pack in pack_files(cache_dir(git_repo)).values():
        pack.unlink()
    from_entries = tokenize(doc_dir)  # the same hits, one entry file per row
    assert hits_misses(from_entries) == (ROWS, 0, 0)
    assert_same_tokens(from_entries, uncached)


def test_warm_run_from_the_pack_computes_no_source_row_id(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pack recognises its rows by the section row ids and one digest of the sources:
    a warm run neither computes a row id per source file nor reads one again."""
    doc_dir = make_doc(git_repo)
    uncached = tokenize(doc_dir, use_cache=False)
    tokenize(doc_dir)
    import dlm_git.doc.walk as walk

    def refuse(*args: object) -> None:
        raise AssertionError("a source row id or text was computed on a warm run")

    monkeypatch.setattr(walk, "source_section_id", refuse)
    monkeypatch.setattr(walk.SourceFile, "read_text", refuse)
    warm = tokenize(doc_dir)
    assert hits_misses(warm) == (ROWS, 0, 0)
    assert warm.sequences.row_ids == uncached.sequences.row_ids
    assert_same_tokens(warm, uncached)


def test_warm_run_is_logged_while_another_process_holds_the_lock(git_repo: Path) -> None:
    """A run served by a fresh pack that writes nothing changes no entry, so it logs its
    metrics in one SQLite transaction without waiting for the cache's file lock."""
    from filelock import FileLock

    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(root / ".lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(TimeoutError):
            FileLock(str(root / ".lock"), timeout=0.05).acquire()
        warm = tokenize(doc_dir)
        assert hits_misses(warm) == (ROWS, 0, 0)
    finally:
        holder.kill()
        holder.wait()
    conn = sqlite3.connect(root / INDEX_NAME)
    try:
        (runs,) = conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    finally:
        conn.close()
    assert runs == 2


HOLD_LOCK = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_repeated_row_hits_and_leaves_the_pack_alone(git_repo: Path) -> None:
    """Identical Q/A pairs are one row id twice: one entry, one pack slot, and a warm run
    rewrites nothing."""
    pair = BODY[BODY.index("::instruction::") :]
    doc_dir = make_doc(git_repo, body=BODY + "\n" + pair)
    root = cache_dir(git_repo)
    first = tokenize(doc_dir)
    assert first.rows == ROWS + 1
    assert first.row_counts[1] == first.row_counts[2]  # the same row, twice
    assert len(entry_files(root)) == ROWS
    before = tree_state(root / "packs")
    warm = tokenize(doc_dir)
    assert hits_misses(warm) == (ROWS + 1, 0, 0)
    assert tree_state(root / "packs") == before
    assert_same_tokens(warm, tokenize(doc_dir, use_cache=False))
    assert_index_consistent(root)


# --- invalidation ----------------------------------------------------------------------------


def test_edited_file_misses_alone(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    before = tokenize(doc_dir)
    old_keys = row_keys(doc_dir)
    (doc_dir / "corpus" / "f07.md").write_text(file_text(7, version=1), "utf-8")
    new_keys = row_keys(doc_dir)
    after = tokenize(doc_dir)
    assert hits_misses(after) == (ROWS - 1, 1, 0)
    assert {k for k in new_keys if new_keys[k] != old_keys[k]} == {"corpus/f07.md"}
    # the miss wrote exactly the edited row's new entry; the old one is still there
    files = entry_files(cache_dir(git_repo))
    assert new_keys["corpus/f07.md"] in files and old_keys["corpus/f07.md"] in files
    assert len(files) == ROWS + 1
    assert after.stream_root != before.stream_root
    assert_same_tokens(after, tokenize(doc_dir, use_cache=False))


def test_moved_file_misses_alone(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    (doc_dir / "corpus" / "sub").mkdir()
    os.replace(doc_dir / "corpus" / "f11.md", doc_dir / "corpus" / "sub" / "f11.md")
    after = tokenize(doc_dir)
    assert hits_misses(after) == (ROWS - 1, 1, 0)
    assert "corpus/sub/f11.md" in row_keys(doc_dir)
    assert_same_tokens(after, tokenize(doc_dir, use_cache=False))


def test_sequence_len_change_misses_everything(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo, seq_len=32)
    short = tokenize(doc_dir)
    write_doc(doc_dir, seq_len=48)
    longer = tokenize(doc_dir)
    assert hits_misses(longer) == (0, ROWS, 0)
    assert len(longer.sequences) < len(short.sequences)
    assert_same_tokens(longer, tokenize(doc_dir, use_cache=False))
    write_doc(doc_dir, seq_len=32)  # back: the first entries are still valid
    again = tokenize(doc_dir)
    assert hits_misses(again) == (ROWS, 0, 0)
    assert_same_tokens(again, short)


def test_system_prompt_change_misses_only_the_chat_row(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    before = tokenize(doc_dir)
    write_doc(doc_dir, system_prompt="Answer at length.")
    after = tokenize(doc_dir)
    assert hits_misses(after) == (ROWS - 1, 1, 0)
    assert after.stream_root != before.stream_root
    assert_same_tokens(after, tokenize(doc_dir, use_cache=False))


def _swap_vocab_ids(tokenizer_json: Path, a: str, b: str) -> None:
    data = json.loads(tokenizer_json.read_text("utf-8"))
    vocab = data["model"]["vocab"]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    tokenizer_json.write_text(json.dumps(data), "utf-8")


def test_tokenizer_change_misses_everything(git_repo: Path) -> None:
    base = git_repo / "bases" / "mytiny"
    shutil.copytree(ensure_tiny_base(), base)
    doc_dir = make_doc(git_repo)
    original = tokenize(doc_dir)
    # a byte-identical copy of the base is the same tokenizer: all hits
    write_doc(doc_dir, base="bases/mytiny")
    copy = tokenize(doc_dir)
    assert hits_misses(copy) == (ROWS, 0, 0)
    assert_same_tokens(copy, original)

    # another chat template: every row misses (the key binds all tokenizer files)
    config_path = base / "tokenizer_config.json"
    config = json.loads(config_path.read_text("utf-8"))
    config["chat_template"] = config["chat_template"].replace("<|im_start|>", ">> ")
    config_path.write_text(json.dumps(config), "utf-8")
    templated = tokenize(doc_dir)
    assert hits_misses(templated) == (0, ROWS, 0)
    assert templated.stream_root != original.stream_root
    assert_same_tokens(templated, tokenize(doc_dir, use_cache=False))

    # another vocabulary (two ids swapped in tokenizer.json): every row misses
    _swap_vocab_ids(base / "tokenizer.json", "e", "t")
    swapped = tokenize(doc_dir)
    assert hits_misses(swapped) == (0, ROWS, 0)
    uncached = tokenize(doc_dir, use_cache=False)
    assert_same_tokens(swapped, uncached)
    changed = [
        i
        for i, (x, y) in enumerate(zip(swapped.sequences, templated.sequences, strict=False))
        if not np.array_equal(x.input_ids, y.input_ids)
    ]
    assert changed, "swapping vocabulary ids should change the tokens"
    # and the builtin base again: its entries were never overwritten
    write_doc(doc_dir)
    back = tokenize(doc_dir)
    assert hits_misses(back) == (ROWS, 0, 0)
    assert_same_tokens(back, original)


# --- corruption ------------------------------------------------------------------------------


def source_ids(doc_dir: Path) -> dict[str, str]:
    loaded = load_document(doc_dir)
    return {f.relpath: f.section().section_id for f in loaded.sources.files}


def corrupt_four_ways(files: dict[str, Path], victims: list[str], donor: str) -> None:
    """Truncate, flip a byte in, overwrite with garbage, and put `donor`'s entry under the
    name of the four `victims` entries."""
    truncated, flipped, garbage, misplaced = victims
    data = files[truncated].read_bytes()
    files[truncated].write_bytes(data[: len(data) // 2])
    raw = bytearray(files[flipped].read_bytes())
    raw[len(raw) // 2] ^= 0x40
    files[flipped].write_bytes(bytes(raw))
    files[garbage].write_bytes(b"\x00not a cache entry\xff" * 20)
    shutil.copyfile(files[donor], files[misplaced])


def test_corrupt_entry_files_are_misses_and_rewritten(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    uncached = tokenize(doc_dir, use_cache=False)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    keys = row_keys(doc_dir)
    names = [f"corpus/f{i:02d}.md" for i in (1, 2, 3, 4)]
    victims = [keys[n] for n in names]
    corrupt_four_ways(entry_files(root), victims, donor=keys["corpus/f05.md"])
    for pack in pack_files(root).values():  # else the rows are served from the pack
        pack.unlink()

    result = tokenize(doc_dir)
    assert hits_misses(result) == (ROWS - 4, 4, 4)
    assert_same_tokens(result, uncached)
    ids = source_ids(doc_dir)
    files = entry_files(root)
    for name, key in zip(names, victims, strict=True):  # rewritten: each decodes again
        decode_entry(files[key].read_bytes(), key, ids[name])
    for _ in range(2):  # from the rewritten pack, then from the entry files alone
        again = tokenize(doc_dir)
        assert hits_misses(again) == (ROWS, 0, 0)
        assert_same_tokens(again, uncached)
        assert_index_consistent(root)
        for pack in pack_files(root).values():
            pack.unlink()


def test_corrupt_pack_falls_back_to_entry_files_and_is_rewritten(git_repo: Path) -> None:
    """A pack that fails its checksum is one corrupt read: every row comes from its entry
    file (or the tokenizer, where that is gone too) and the pack is rewritten."""
    doc_dir = make_doc(git_repo)
    uncached = tokenize(doc_dir, use_cache=False)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    keys = row_keys(doc_dir)
    (pack,) = pack_files(root).values()
    good = pack.read_bytes()
    for where in (20, len(good) // 2, len(good) - 40, len(good) - 1):  # head, ids, checksum
        raw = bytearray(good)
        raw[where] ^= 0x01
        pack.write_bytes(bytes(raw))
        result = tokenize(doc_dir)
        assert hits_misses(result) == (ROWS, 0, 1)
        assert_same_tokens(result, uncached)
        assert pack.read_bytes() == good  # rewritten
    # with the pack corrupt and one entry file gone, that row alone is tokenized again
    raw = bytearray(good)
    raw[len(good) // 2] ^= 0x01
    pack.write_bytes(bytes(raw))
    entry_files(root)[keys["corpus/f03.md"]].unlink()
    result = tokenize(doc_dir)
    assert hits_misses(result) == (ROWS - 1, 1, 1)
    assert_same_tokens(result, uncached)
    again = tokenize(doc_dir)  # nothing corrupt is left
    assert hits_misses(again) == (ROWS, 0, 0)
    assert_same_tokens(again, uncached)
    assert_index_consistent(root)


def test_garbage_or_truncated_pack_is_never_fatal(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    uncached = tokenize(doc_dir, use_cache=False)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    (pack,) = pack_files(root).values()
    data = pack.read_bytes()
    for bad, corrupt in (
        (data[: len(data) // 3], 1),
        (PACK_MAGIC + b"\xff" * 64, 1),
        (b"garbage" * 99, 1),
        (b"", 1),
        (b"DLMPACK1" + data[8:], 0),  # an older version's pack: rewritten, not corrupt
        (b"DLMPACK2" + data[8:], 0),
    ):
        pack.write_bytes(bad)
        result = tokenize(doc_dir)
        assert hits_misses(result) == (ROWS, 0, corrupt)  # every row from its entry file
        assert_same_tokens(result, uncached)
        assert pack.read_bytes() == data  # rewritten
    assert_index_consistent(root)


def test_missing_entry_file_is_a_plain_miss(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    key = row_keys(doc_dir)["corpus/f09.md"]
    entry_files(root)[key].unlink()  # the index still lists it
    for pack in pack_files(root).values():
        pack.unlink()
    result = tokenize(doc_dir)
    assert hits_misses(result) == (ROWS - 1, 1, 0)
    assert_same_tokens(result, tokenize(doc_dir, use_cache=False))
    assert_index_consistent(root)


def test_pack_hit_does_not_relist_an_evicted_entry(git_repo: Path) -> None:
    """An entry evicted (file and index row gone) while its document's pack survives is
    still served from the pack, but the index must not list a file that is not there."""
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    key = row_keys(doc_dir)["corpus/f09.md"]
    cache = TokenCache(root)
    with cache.index.locked() as conn:
        cache.index.delete(conn, [key])
    result = tokenize(doc_dir)
    assert hits_misses(result) == (ROWS, 0, 0)
    assert key not in index_rows(root)
    assert_index_consistent(root)
    assert_same_tokens(result, tokenize(doc_dir, use_cache=False))


def test_corrupt_index_is_rebuilt_not_fatal(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    for suffix in ("-wal", "-shm"):
        (root / (INDEX_NAME + suffix)).unlink(missing_ok=True)
    (root / INDEX_NAME).write_bytes(b"this is not an sqlite database\n" * 64)
    cache = TokenCache(root)
    assert cache.index.stats().entries == 0  # unreadable: reported empty, never a crash
    assert cache.index.last_run(DLM_ID) is None
    result = tokenize(doc_dir)
    assert hits_misses(result) == (ROWS, 0, 0)  # the entries themselves are intact
    assert_same_tokens(result, tokenize(doc_dir, use_cache=False))
    assert_index_consistent(root)
    last = TokenCache(root).index.last_run(DLM_ID)
    assert last is not None and last.hits == ROWS


def test_index_with_damaged_pages_is_replaced_not_fatal(git_repo: Path) -> None:
    """The header is intact (so opening works) but the tables' pages are garbage: the run
    still succeeds, on a new index that lists the entry files again."""
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    for suffix in ("-wal", "-shm"):
        (root / (INDEX_NAME + suffix)).unlink(missing_ok=True)
    raw = bytearray((root / INDEX_NAME).read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    assert len(raw) > 2 * page, "the index should have more than its first page"
    raw[page:] = b"\xa5" * (len(raw) - page)  # every page after the schema's
    (root / INDEX_NAME).write_bytes(bytes(raw))
    result = tokenize(doc_dir)
    assert hits_misses(result)[:2] == (ROWS, 0)
    assert_same_tokens(result, tokenize(doc_dir, use_cache=False))
    assert_index_consistent(root)
    last = TokenCache(root).index.last_run(DLM_ID)
    assert last is not None and last.hits == ROWS
    assert TokenCache(root).index.prune(0) == (ROWS + 1, 0)  # prune works on the new index too


# --- eviction, prune, clear, sweep -----------------------------------------------------------


def _key(i: int) -> str:
    return f"{i:02x}" + "0" * 30


def _age_entries(root: Path, keys: list[str], seconds: float) -> None:
    """Set the index's last access of `keys` to `seconds` ago."""
    conn = sqlite3.connect(root / INDEX_NAME)
    try:
        ns = time.time_ns() - int(seconds * 1e9)
        conn.executemany(
            "UPDATE entries SET last_access_ns = ? WHERE key = ?", [(ns, k) for k in keys]
        )
        conn.commit()
    finally:
        conn.close()


def test_lru_eviction_order_and_protection(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "c")
    big = 10**9
    keys = [_key(i) for i in range(7)]
    for k in keys[:6]:
        cache.put(k, b"x" * 100)
    cache.record_run({}, dict.fromkeys(keys[:6], 100), big, METRICS)
    for i, k in enumerate(keys[:6]):  # key i last used (10 - i) hours ago
        _age_entries(cache.root, [k], (10 - i) * 3600)
    cache.record_run({keys[0]: 100}, {}, big, METRICS)  # key 0 becomes the most recent
    cache.put(keys[6], b"x" * 100)
    run = cache.record_run({}, {keys[6]: 100}, 400, METRICS)
    # LRU order was 1,2,3,4,5,0: three evicted to get from 700 down to 400 bytes
    assert run.evicted == 3 and run.cache_bytes == 400
    assert set(index_rows(cache.root)) == {keys[4], keys[5], keys[0], keys[6]}
    assert set(entry_files(cache.root)) == set(index_rows(cache.root))
    # a run that alone exceeds max_bytes keeps everything it used
    run = cache.record_run({keys[4]: 100, keys[5]: 100}, {}, 100, METRICS)
    assert run.evicted == 2 and run.cache_bytes == 200
    assert set(index_rows(cache.root)) == set(entry_files(cache.root)) == {keys[4], keys[5]}
    assert cache.index.stats().entries == 2 and cache.index.stats().bytes == 200


def test_run_evicts_stale_rows_and_protects_its_own(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo, cache_yaml="max_bytes: 1000")
    first = tokenize(doc_dir)
    root = cache_dir(git_repo)
    assert stats(first)["evicted"] == 0  # the run alone exceeds max_bytes: nothing evicted
    assert len(index_rows(root)) == ROWS and int(stats(first)["cache_bytes"]) > 1000
    old = row_keys(doc_dir)
    for i in range(5):
        (doc_dir / "corpus" / f"f{i:02d}.md").write_text(file_text(i, version=2), "utf-8")
    second = tokenize(doc_dir)
    assert hits_misses(second) == (ROWS - 5, 5, 0)
    assert stats(second)["evicted"] == 5
    new = row_keys(doc_dir)
    current = set(index_rows(root))
    assert len(current) == ROWS
    assert {new[f"corpus/f{i:02d}.md"] for i in range(5)} <= current
    assert not {old[f"corpus/f{i:02d}.md"] for i in range(5)} & set(entry_files(root))
    assert_index_consistent(root)
    assert_same_tokens(tokenize(doc_dir), tokenize(doc_dir, use_cache=False))


def _set_mtime(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def test_prune_drops_only_old_entries_and_sweeps_old_strays(tmp_path: Path) -> None:
    cache = TokenCache(tmp_path / "c")
    keys = [_key(i) for i in range(6)]
    for k in keys:
        cache.put(k, b"y" * 50)
    cache.record_run({}, dict.fromkeys(keys, 50), 10**9, METRICS)
    _age_entries(cache.root, keys[:2], 10 * 86400)
    _age_entries(cache.root, keys[2:4], 2 * 86400)
    for k in keys:  # entry files are old by mtime; only the index says when they were used
        _set_mtime(cache.layout.path_of(k), 30 * 86400)
    shard = cache.layout.path_of(keys[0]).parent
    old_orphan, young_orphan = shard / f"{'a' * 32}.tok", shard / f"{'b' * 32}.tok"
    old_tmp, young_tmp = shard / f".{'c' * 32}.x1.tmp", shard / f".{'d' * 32}.x2.tmp"
    for p in (old_orphan, young_orphan, old_tmp, young_tmp):
        p.write_bytes(b"z")
    _set_mtime(old_orphan, SWEEP_GRACE_SECONDS + 60)
    _set_mtime(old_tmp, SWEEP_GRACE_SECONDS + 60)

    removed, swept = cache.index.prune(5 * 86400)
    assert (removed, swept) == (2, 2)
    assert set(index_rows(cache.root)) == set(keys[2:])
    assert all(cache.layout.path_of(k).exists() for k in keys[2:])
    assert not any(cache.layout.path_of(k).exists() for k in keys[:2])
    assert not old_orphan.exists() and not old_tmp.exists()
    assert young_orphan.exists() and young_tmp.exists()  # a writer may still record them

    removed, swept = cache.index.prune(86400)
    assert removed == 2 and set(index_rows(cache.root)) == set(keys[4:])

    removed, swept = cache.index.clear()
    assert removed == 2 and swept == 1  # the young orphan; the young tmp is in flight
    assert index_rows(cache.root) == {} and entry_files(cache.root) == {}
    assert young_tmp.exists()
    _set_mtime(young_tmp, SWEEP_GRACE_SECONDS + 60)
    assert cache.index.clear() == (0, 1) and not young_tmp.exists()
    assert cache.index.stats().entries == 0 and cache.index.stats().bytes == 0


def test_prune_and_clear_never_descend_a_link_where_a_shard_should_be(tmp_path: Path) -> None:
    """The sweep removes only the cache's own files: a symbolic link in place of a shard
    directory is not followed, so nothing it points at is removed."""
    cache = TokenCache(tmp_path / "c")
    cache.put(_key(0), b"y" * 50)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / f"{'e' * 32}.tok"
    victim.write_bytes(b"not the cache's")
    _set_mtime(victim, SWEEP_GRACE_SECONDS + 60)
    os.symlink(outside, cache.layout.entries_dir / "ee")
    cache.index.prune(86400)
    cache.index.clear()
    assert victim.read_bytes() == b"not the cache's"
    assert (cache.layout.entries_dir / "ee").is_symlink()


# --- --no-cache ------------------------------------------------------------------------------


def test_no_cache_touches_nothing(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    root = cache_dir(git_repo)
    before = tree_state(root)
    # an edit that a cached run would write as a new entry, and record in the index
    (doc_dir / "corpus" / "f03.md").write_text(file_text(3, version=5), "utf-8")
    result = tokenize(doc_dir, use_cache=False)
    assert result.cache_stats is None
    assert tree_state(root) == before


# --- layout ----------------------------------------------------------------------------------


def test_entries_are_sharded_by_key_prefix(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    result = tokenize(doc_dir)
    root = cache_dir(git_repo)
    assert stats(result)["path"] == str(root) == str(default_cache_dir(git_repo))
    files = entry_files(root)
    assert len(files) == ROWS
    shards = set()
    for key, path in files.items():
        rel = path.relative_to(root).parts
        assert rel == ("entries", key[:2], f"{key}.tok")
        shards.add(rel[1])
    assert len(shards) > 1 and all(len(s) == 2 and int(s, 16) >= 0 for s in shards)
    assert not [p for p in (root / "entries").iterdir() if p.is_file()]
    assert list(pack_files(root)) == [f"{PACK_PREFIX}{DLM_ID}"]
    assert {p.name for p in root.iterdir() if p.is_file()} <= {
        ".gitignore",
        ".lock",
        INDEX_NAME,
        INDEX_NAME + "-journal",
    }


def test_cache_dir_override(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc_dir = make_doc(git_repo)
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("DLM_GIT_CACHE_DIR", str(elsewhere))
    result = tokenize(doc_dir)
    assert stats(result)["path"] == str(elsewhere)
    assert len(entry_files(elsewhere)) == ROWS
    assert not (git_repo / ".dlm-git").exists()


def test_runs_table_records_per_run_metrics(git_repo: Path) -> None:
    doc_dir = make_doc(git_repo)
    tokenize(doc_dir)
    tokenize(doc_dir)
    conn = sqlite3.connect(cache_dir(git_repo) / INDEX_NAME)
    try:
        runs = conn.execute(
            "SELECT dlm_id, total_rows, hits, misses, corrupt, tokenize_seconds, cache_bytes,"
            " evicted FROM runs ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    root = cache_dir(git_repo)
    files = [*entry_files(root).values(), *pack_files(root).values()]
    size = sum(p.stat().st_size for p in files)
    assert [r[:5] for r in runs] == [(DLM_ID, ROWS, 0, ROWS, 0), (DLM_ID, ROWS, ROWS, 0, 0)]
    assert all(r[5] > 0 for r in runs)
    assert [r[6] for r in runs] == [size, size] and [r[7] for r in runs] == [0, 0]


# --- concurrent writers ----------------------------------------------------------------------

WRITER = """
import json, sys, time
from pathlib import Path
import transformers  # imported before the start signal: only tokenizing races
from dlm_git.base.resolve import resolve_base
from dlm_git.doc.load import load_document
from dlm_git.train.pipeline import tokenize_document
doc, signals, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
for i in range(rounds):
    while not (signals / f"go-{i}").exists():
        time.sleep(0.001)
    loaded = load_document(doc)
    fm = loaded.doc.frontmatter
    resolved = resolve_base(fm.base_model, loaded.doc.directory, loaded.repo_root)
    result = tokenize_document(loaded, resolved)
    print(json.dumps({"root": result.stream_root, "stats": result.cache_stats}), flush=True)
"""


@pytest.fixture
def writer() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_concurrent_writers_share_one_cache(
    git_repo: Path, tmp_path: Path, writer: list[subprocess.Popen[str]]
) -> None:
    """This process and a spawned one tokenize the same document into the same cache at
    the same moment, three times: cold, after edits, and after the pack is deleted."""
    n_files, rounds = 40, 3
    rows = n_files + 2
    doc_dir = make_doc(git_repo, n_files=n_files)
    root = cache_dir(git_repo)
    signals = tmp_path / "signals"
    signals.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(doc_dir), str(signals), str(rounds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    writer.append(proc)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    for i in range(rounds):
        if i == 1:
            for j in range(0, n_files, 3):
                (doc_dir / "corpus" / f"f{j:02d}.md").write_text(file_text(j, 9), "utf-8")
        if i == 2:
            for pack in pack_files(root).values():
                pack.unlink()
        uncached = tokenize(doc_dir, use_cache=False)
        (signals / f"go-{i}").touch()
        mine = tokenize(doc_dir)
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        theirs = json.loads(line)
        assert mine.stream_root == theirs["root"] == uncached.stream_root
        assert_same_tokens(mine, uncached)
        for s in (stats(mine), theirs["stats"]):
            assert s["hits"] + s["misses"] == rows and s["corrupt"] == 0
        assert_index_consistent(root)
        edited = len(range(0, n_files, 3)) if i else 0  # old versions stay until evicted
        assert len(index_rows(root)) == rows + edited and len(pack_files(root)) == 1
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    conn = sqlite3.connect(root / INDEX_NAME)
    try:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2 * rounds
    finally:
        conn.close()
    warm = tokenize(doc_dir)
    assert hits_misses(warm) == (rows, 0, 0)
