"""Parser edge cases: frontmatter rules, body sections, code blocks, errors with path:line:col."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.doc.errors import BodyError, DocError, FrontmatterError
from dlm_git.doc.parser import Document, parse_document
from dlm_git.doc.schema import MAX_DLM_VERSION, Frontmatter

ULID = "01M800GRBP0GEV3WAMXAHDD42B"
HEAD = f"---\ndlm_id: {ULID}\n---\n"  # the body starts on line 4


def sid(type_name: str, content: str) -> str:
    """The documented section id, computed independently of the library."""
    return hashlib.sha256((type_name + "\n" + content).encode("utf-8")).hexdigest()[:16]


def write(tmp_path: Path, data: str | bytes, name: str = "doc.dlm") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def parse(tmp_path: Path, data: str | bytes) -> Document:
    return parse_document(write(tmp_path, data))


def error(
    tmp_path: Path, data: str | bytes, kind: type[DocError], line: int, col: int | None = None
) -> str:
    """Parse `data`, expect `kind`, check the `path:line[:col]: ` prefix, return the text."""
    path = write(tmp_path, data)
    with pytest.raises(DocError) as info:
        parse_document(path)
    exc = info.value
    assert type(exc) is kind, f"{type(exc).__name__}: {exc}"
    text = str(exc)
    prefix = f"{path}:{line}:" if col is None else f"{path}:{line}:{col}: "
    assert text.startswith(prefix), text
    assert exc.line == line
    if col is not None:
        assert exc.col == col
    assert "\n" not in text
    return text


# --- encoding and normalization --------------------------------------------------------------

DEMO_BODY = (
    "Intro prose line.\n\n::instruction::\n### Q\nWhat is it?\n### A\nA test.\nSecond line.\n"
)


def test_lf_document_ids_and_lines(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + DEMO_BODY)
    assert [(s.type_name, s.line) for s in doc.sections] == [("prose", 4), ("instruction", 7)]
    assert doc.sections[0].content == "Intro prose line."
    assert doc.sections[1].content == "### Q\nWhat is it?\n### A\nA test.\nSecond line."
    assert doc.sections[1].section_id == sid("instruction", doc.sections[1].content)
    assert doc.frontmatter.dlm_id == ULID


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda b: b"\xef\xbb\xbf" + b, id="bom"),
        pytest.param(lambda b: b.replace(b"\n", b"\r\n"), id="crlf"),
        pytest.param(lambda b: b.replace(b"\n", b"\r"), id="lone-cr"),
        pytest.param(lambda b: b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"), id="bom+crlf"),
    ],
)
def test_bom_and_line_endings_normalized(tmp_path: Path, transform) -> None:  # type: ignore[no-untyped-def]
    lf = (HEAD + DEMO_BODY).encode("utf-8")
    raw = transform(lf)
    assert raw != lf
    ref = parse_document(write(tmp_path, lf, "lf.dlm"))
    doc = parse_document(write(tmp_path, raw, "other.dlm"))
    assert [s.section_id for s in doc.sections] == [s.section_id for s in ref.sections]
    assert [s.line for s in doc.sections] == [s.line for s in ref.sections]
    assert [s.content for s in doc.sections] == [s.content for s in ref.sections]
    # dlm_sha256 is of the bytes as git stores them (CRLF as LF; BOM and lone CR kept):
    # a CRLF checkout of the LF document has its digest, other bytes differ
    assert ref.sha256 == hashlib.sha256(lf).hexdigest()
    assert doc.sha256 == hashlib.sha256(raw.replace(b"\r\n", b"\n")).hexdigest()
    assert (doc.sha256 == ref.sha256) == (raw.replace(b"\r\n", b"\n") == lf)


def test_invalid_utf8_names_line_and_col(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD.encode() + b"ok line\nab\xffcd\n", DocError, 5, 3)
    assert "invalid UTF-8" in text and "0xff" in text


@pytest.mark.parametrize(
    "sep", [pytest.param(b"\r\n", id="crlf"), pytest.param(b"\r", id="lone-cr")]
)
def test_invalid_utf8_line_counts_normalized_breaks(tmp_path: Path, sep: bytes) -> None:
    # BOM, then line breaks of the given kind, then a 2-byte character before the bad byte:
    # line and column are those of the normalized text, the column counts characters
    raw = HEAD.encode().replace(b"\n", sep) + b"ok line" + sep + "é".encode() + b"\xff"
    error(tmp_path, b"\xef\xbb\xbf" + raw, DocError, 5, 2)


def test_invalid_utf8_in_frontmatter(tmp_path: Path) -> None:
    error(tmp_path, b"---\ndlm_id: \xc3\n---\n", DocError, 2, 9)


# --- frontmatter -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param("", id="empty"),
        pytest.param("--- \ndlm_id: x\n---\n", id="trailing-space"),
        pytest.param(" ---\n---\n", id="leading-space"),
        pytest.param("----\n---\n", id="four-dashes"),
        pytest.param("# title\n---\n", id="no-frontmatter"),
    ],
)
def test_line_one_must_be_exactly_dashes(tmp_path: Path, data: str) -> None:
    text = error(tmp_path, data, FrontmatterError, 1, 1)
    assert "line 1 must be exactly '---'" in text


def test_unclosed_frontmatter(tmp_path: Path) -> None:
    text = error(tmp_path, f"---\ndlm_id: {ULID}\n--- \nbody\n", FrontmatterError, 1, 1)
    assert "not closed" in text


def test_invalid_yaml_names_line_and_col(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\nbase_model: a: b\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3, 14)
    assert "not valid YAML" in text


def test_yaml_tab_indent_names_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\ntraining:\n\tlora_r: 4\n---\n"
    error(tmp_path, data, FrontmatterError, 4, 1)


@pytest.mark.parametrize(
    "yaml_text", ["- a\n- b\n", "just a string\n", "42\n"], ids=["list", "string", "int"]
)
def test_frontmatter_must_be_mapping(tmp_path: Path, yaml_text: str) -> None:
    text = error(tmp_path, "---\n" + yaml_text + "---\n", FrontmatterError, 2, 1)
    assert "must be a YAML mapping" in text


def test_unknown_top_level_key_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\nbase_model: builtin:tiny\nlearning_rate: 0.1\n---\n"
    text = error(tmp_path, data, FrontmatterError, 4)
    assert "unknown key 'learning_rate'" in text


def test_unknown_nested_key_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\ntraining:\n  lora_r: 4\n  foo: 1\n  seed: 3\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "unknown key 'training.foo'" in text


def test_invalid_nested_value_names_its_line(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\ntraining:\n  lora_r: 4\n  lr_scheduler: exponential\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "invalid value for 'training.lr_scheduler'" in text


def test_missing_dlm_id(tmp_path: Path) -> None:
    text = error(tmp_path, "---\nbase_model: builtin:tiny\n---\n", FrontmatterError, 1)
    assert "missing required key 'dlm_id'" in text


def test_empty_frontmatter_is_missing_dlm_id(tmp_path: Path) -> None:
    text = error(tmp_path, "---\n---\n", FrontmatterError, 1)
    assert "missing required key 'dlm_id'" in text


def test_missing_nested_required_key_points_at_its_parent(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\ntraining:\n  sources:\n    - include: ['*.md']\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "missing required key 'training.sources.0.path'" in text


@pytest.mark.parametrize(
    "bad",
    [
        "nope",
        "01M800GRBP0GEV3WAMXAHDD42",  # 25 chars
        "01M800GRBP0GEV3WAMXAHDD42BX",  # 27 chars
        "81M800GRBP0GEV3WAMXAHDD42B",  # first char > 7 overflows 128 bits
        "01M800GRBP0GEV3WAMXAHDD42U",  # U is not Crockford base32
    ],
)
def test_bad_ulid(tmp_path: Path, bad: str) -> None:
    data = f"---\nbase_model: builtin:tiny\ndlm_id: {bad}\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3)
    assert "invalid value for 'dlm_id'" in text and "ULID" in text


def test_lowercase_ulid_is_uppercased(tmp_path: Path) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {ULID.lower()}\n---\n")
    assert doc.frontmatter.dlm_id == ULID


@pytest.mark.parametrize("version", [0, 16, -1])
def test_dlm_version_out_of_range(tmp_path: Path, version: int) -> None:
    data = f"---\ndlm_id: {ULID}\ndlm_version: {version}\n---\n"
    text = error(tmp_path, data, FrontmatterError, 3)
    assert "invalid value for 'dlm_version'" in text


@pytest.mark.parametrize("version", [1, 7, 15])
def test_dlm_version_in_range(tmp_path: Path, version: int) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {ULID}\ndlm_version: {version}\n---\n")
    assert doc.frontmatter.dlm_version == version
    assert MAX_DLM_VERSION == 15


def test_defaults(tmp_path: Path) -> None:
    fm = parse(tmp_path, HEAD).frontmatter
    assert fm == Frontmatter(dlm_id=ULID)
    assert fm.dlm_version == 1
    assert fm.base_model == "builtin:tiny"
    assert fm.system_prompt is None
    assert fm.export is None
    t = fm.training
    assert (t.adapter, t.lora_r, t.lora_alpha, t.lora_dropout) == ("lora", 8, 16, 0.05)
    assert (t.target_modules, t.sequence_len, t.micro_batch_size, t.grad_accum) == (
        "auto",
        256,
        4,
        1,
    )
    assert (t.learning_rate, t.num_epochs, t.max_steps, t.seed) == (2e-4, 1, None, 42)
    assert (t.lr_scheduler, t.warmup_ratio, t.precision) == ("linear", 0.1, "auto")
    assert (t.sources, t.sources_policy) == ((), "strict")
    assert (t.cache.enabled, t.cache.max_bytes, t.cache.prune_older_than_days) == (
        True,
        10 * 1024**3,
        90,
    )


ORIGINAL_DLM = """\
---
dlm_id: 01JD3Z8X9Q4W5E6R7T8Y9V0A1K
dlm_version: 3
base_model: {base}
system_prompt: You are a terse assistant.
training:
  lora_r: 16
  lora_alpha: 32
  lora_dropout: 0.05
  sequence_len: 2048
  micro_batch_size: 2
  grad_accum: 4
  learning_rate: 0.0002
  num_epochs: 3
  seed: 1234
  sources_policy: permissive
  sources:
    - path: ../shared/notes
      include: ["**/*.md"]
export:
  default_quant: Q4_K_M
  default_temperature: 0.7
  default_top_p: 0.9
---

# Notes

::instruction::
### Q
What is a DLM?

### A
A document that trains a model.
"""


@pytest.mark.parametrize(
    "base",
    [
        "smollm2-135m",
        "smollm2-360m",
        "smollm2-1.7b",
        "qwen2.5-1.5b",
        "qwen2.5-3b",
        "qwen2.5-coder-1.5b",
    ],
)
def test_original_dlm_document_parses(tmp_path: Path, base: str) -> None:
    doc = parse(tmp_path, ORIGINAL_DLM.format(base=base))
    fm = doc.frontmatter
    assert fm.dlm_version == 3
    assert fm.base_model == base
    assert fm.export is not None
    assert fm.export.default_quant == "Q4_K_M"
    assert fm.export.default_temperature == 0.7
    assert fm.export.default_top_p == 0.9
    assert fm.training.sources_policy == "permissive"
    assert fm.training.sources[0].path == "../shared/notes"
    assert fm.training.sources[0].include == ("**/*.md",)
    assert fm.training.lora_r == 16 and fm.training.num_epochs == 3
    assert [(s.type_name, s.line) for s in doc.sections] == [("prose", 26), ("instruction", 29)]


def test_unknown_export_key_is_an_error(tmp_path: Path) -> None:
    data = f"---\ndlm_id: {ULID}\nexport:\n  default_quant: Q8_0\n  gguf: true\n---\n"
    text = error(tmp_path, data, FrontmatterError, 5)
    assert "unknown key 'export.gguf'" in text


# --- body: fences and code blocks ------------------------------------------------------------


@pytest.mark.parametrize("marker", ["```", "~~~", "````"])
def test_fences_inside_code_blocks_are_text(tmp_path: Path, marker: str) -> None:
    body = f"Example:\n{marker}python\n::instruction::\n### Q\n::bogus::\n{marker}\nafter\n"
    doc = parse(tmp_path, HEAD + body)
    assert len(doc.sections) == 1
    s = doc.sections[0]
    assert (s.type_name, s.line) == ("prose", 4)
    assert s.content == body.rstrip("\n")


def test_question_header_in_answer_code_block_stays_in_answer(tmp_path: Path) -> None:
    body = (
        "::instruction::\n"
        "### Q\n"
        "How do I write a pair?\n"
        "### A\n"
        "Like this:\n"
        "```markdown\n"
        "### Q\n"
        "question\n"
        "### A\n"
        "answer\n"
        "::prose::\n"
        "```\n"
    )
    doc = parse(tmp_path, HEAD + body)
    assert len(doc.sections) == 1
    s = doc.sections[0]
    assert s.question == "How do I write a pair?"
    assert s.answer == ("Like this:\n```markdown\n### Q\nquestion\n### A\nanswer\n::prose::\n```")
    assert s.line == 5


def test_tilde_block_not_closed_by_backticks(tmp_path: Path) -> None:
    body = "~~~\n```\n::instruction::\n~~~\n"
    doc = parse(tmp_path, HEAD + body)
    assert [s.content for s in doc.sections] == ["~~~\n```\n::instruction::\n~~~"]


@pytest.mark.parametrize("marker", ["```", "~~~"])
def test_unterminated_code_block(tmp_path: Path, marker: str) -> None:
    body = f"prose\n\n{marker}\n::instruction::\n### Q\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "unterminated code block" in text


def test_unterminated_code_block_closed_by_shorter_marker(tmp_path: Path) -> None:
    error(tmp_path, HEAD + "````\ncode\n```\n", BodyError, 4, 1)


@pytest.mark.parametrize(
    "fence", ["::foo::", "::Instruction::", "::instruction#::", "::instruction#a/b::", "::::"]
)
def test_unknown_fence(tmp_path: Path, fence: str) -> None:
    text = error(tmp_path, HEAD + "prose\n" + fence + "\n", BodyError, 5, 1)
    assert "unknown section fence" in text


def test_fence_trailing_whitespace_allowed(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "::instruction::   \n### Q  \nq\n### A\na\n")
    assert doc.sections[0].content == "### Q\nq\n### A\na"


@pytest.mark.parametrize("line", [" ::instruction::", "::instruction#a b::", "a ::prose::"])
def test_non_fence_lines_are_text(tmp_path: Path, line: str) -> None:
    doc = parse(tmp_path, HEAD + line + "\n")
    assert [s.content for s in doc.sections] == [line]


def test_adapter_suffix(tmp_path: Path) -> None:
    pair = "### Q\nHello?\n### A\nHi.\n"
    doc = parse(tmp_path, HEAD + "::instruction#tone::\n" + pair + "::instruction::\n" + pair)
    tone, plain = doc.sections
    assert tone.type_name == "instruction#tone" and tone.adapter == "tone"
    assert plain.type_name == "instruction" and plain.adapter is None
    assert tone.content == plain.content == "### Q\nHello?\n### A\nHi."
    assert tone.section_id == sid("instruction#tone", tone.content)
    assert plain.section_id == sid("instruction", plain.content)
    assert tone.section_id != plain.section_id
    assert (tone.line, plain.line) == (5, 10)


def test_prose_fence_with_adapter(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "top\n::prose#style::\nstyled text\n::prose::\nplain\n")
    assert [(s.type_name, s.content, s.line) for s in doc.sections] == [
        ("prose", "top", 4),
        ("prose#style", "styled text", 6),
        ("prose", "plain", 8),
    ]


# --- body: instruction pairs -----------------------------------------------------------------


def test_multiple_pairs_each_own_id_and_line(tmp_path: Path) -> None:
    body = (
        "::instruction::\n"  # 4
        "### Q\n"  # 5
        "one?\n"
        "### A\n"
        "1\n"
        "\n"
        "### Q\n"  # 10
        "two?\n"
        "### A\n"
        "2\n"
        "### Q\n"  # 14
        "three?\n"
        "\n"
        "### A\n"
        "\n"
        "3\n"
        "\n"
    )
    doc = parse(tmp_path, HEAD + body)
    assert [s.line for s in doc.sections] == [5, 10, 14]
    assert [(s.question, s.answer) for s in doc.sections] == [
        ("one?", "1"),
        ("two?", "2"),
        ("three?", "3"),
    ]
    assert [s.content for s in doc.sections] == [
        "### Q\none?\n### A\n1",
        "### Q\ntwo?\n### A\n2",
        "### Q\nthree?\n### A\n3",
    ]
    ids = [s.section_id for s in doc.sections]
    assert ids == [sid("instruction", s.content) for s in doc.sections]
    assert len(set(ids)) == 3


def test_identical_pair_twice_same_id(tmp_path: Path) -> None:
    pair = "### Q\nSame?\n### A\nYes.\n"
    doc = parse(tmp_path, HEAD + "::instruction::\n" + pair + pair + "::instruction::\n" + pair)
    assert len(doc.sections) == 3
    assert len({s.section_id for s in doc.sections}) == 1
    assert [s.line for s in doc.sections] == [5, 9, 14]


def test_multiline_question_and_inner_blank_lines_kept(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\n\nline one\n\nline two\n\n### A\n  indented\n\n"
    doc = parse(tmp_path, HEAD + body)
    assert doc.sections[0].question == "line one\n\nline two"
    assert doc.sections[0].answer == "  indented"


def test_empty_question(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD + "::instruction::\n### Q\n\n   \n### A\na\n", BodyError, 5, 1)
    assert "empty '### Q'" in text


def test_empty_answer(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### A\na\n### Q\nq2\n### A\n\n"
    text = error(tmp_path, HEAD + body, BodyError, 11, 1)
    assert "empty '### A'" in text


def test_question_without_answer_at_end(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### A\na\n### Q\ndangling\n"
    text = error(tmp_path, HEAD + body, BodyError, 9, 1)
    assert "'### Q' has no following '### A'" in text


def test_question_without_answer_before_next_fence(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n::prose::\ntext\n"
    error(tmp_path, HEAD + body, BodyError, 5, 1)


def test_two_questions_in_a_row(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### Q\nq2\n### A\na\n"
    text = error(tmp_path, HEAD + body, BodyError, 7, 1)
    assert "'### Q' where '### A' was expected" in text


def test_answer_without_question(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD + "::instruction::\n\n### A\na\n", BodyError, 6, 1)
    assert "'### A' where '### Q' was expected" in text


def test_text_before_first_question(tmp_path: Path) -> None:
    body = "::instruction::\n\nstray text\n### Q\nq\n### A\na\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "text before the first '### Q'" in text


def test_section_with_no_pairs(tmp_path: Path) -> None:
    body = "prose\n\n::instruction::\n\n   \n::prose::\nmore\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "has no '### Q' group" in text


def test_section_with_no_pairs_at_end_of_file(tmp_path: Path) -> None:
    error(tmp_path, HEAD + "::instruction::\n", BodyError, 4, 1)


# --- body: preference triples ----------------------------------------------------------------

PREF = "### Prompt\nWhich?\n\n### Chosen\nThis.\n### Rejected\nThat.\n"


def test_preference_parsing(tmp_path: Path) -> None:
    body = "::preference::\n" + PREF + "\n" + PREF.replace("Which?", "Other?")
    doc = parse(tmp_path, HEAD + body)
    assert [(s.kind, s.line) for s in doc.sections] == [("preference", 5), ("preference", 13)]
    first, second = doc.sections
    assert (first.prompt, first.chosen, first.rejected) == ("Which?", "This.", "That.")
    assert first.content == "### Prompt\nWhich?\n### Chosen\nThis.\n### Rejected\nThat."
    assert first.section_id == sid("preference", first.content)
    assert second.prompt == "Other?"
    assert first.section_id != second.section_id
    assert first.first_line == "Which?"


def test_preference_adapter_suffix(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "::preference#safety::\n" + PREF)
    s = doc.sections[0]
    assert s.type_name == "preference#safety"
    assert s.section_id == sid("preference#safety", s.content)


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\nc\n",
            7,
            "'### Chosen' has no following '### Rejected'",
            id="no-rejected",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n",
            5,
            "'### Prompt' has no following '### Chosen'",
            id="prompt-only",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Rejected\nr\n",
            7,
            "'### Rejected' where '### Chosen' was expected",
            id="rejected-before-chosen",
        ),
        pytest.param(
            "::preference::\n### Chosen\nc\n",
            5,
            "'### Chosen' where '### Prompt' was expected",
            id="chosen-first",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\n\n### Rejected\nr\n",
            7,
            "empty '### Chosen'",
            id="empty-chosen",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\nc\n### Rejected\n",
            9,
            "empty '### Rejected'",
            id="empty-rejected",
        ),
        pytest.param(
            "::preference::\npreamble\n### Prompt\np\n", 5, "text before the first", id="text"
        ),
        pytest.param("::preference::\n\n", 4, "has no '### Prompt' group", id="no-triples"),
        pytest.param(
            "::preference::\n### Q\nq\n### A\na\n", 5, "text before the first", id="qa-in-pref"
        ),
    ],
)
def test_preference_errors(tmp_path: Path, body: str, line: int, needle: str) -> None:
    text = error(tmp_path, HEAD + body, BodyError, line, 1)
    assert needle in text
    assert "::preference::" in text or "### " in text


# --- body: prose -----------------------------------------------------------------------------


def test_whitespace_only_prose_dropped(tmp_path: Path) -> None:
    body = "\n   \n\t\n::instruction::\n### Q\nq\n### A\na\n::prose::\n  \n\n"
    doc = parse(tmp_path, HEAD + body)
    assert [s.kind for s in doc.sections] == ["instruction"]


def test_prose_trimmed_of_blank_lines_only(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "\n\n  indented first\nlast  \n\n\n")
    s = doc.sections[0]
    assert s.content == "  indented first\nlast  "
    assert s.line == 6
    assert s.section_id == sid("prose", "  indented first\nlast  ")


def test_unicode_round_trips(tmp_path: Path) -> None:
    text = "Emoji 🙂👍🏽, CJK 漢字かな한국어, combining e\u0301 (not NFC-composed), RTL שלום"
    q = "Qué es 🤖?"
    body = f"{text}\n::instruction::\n### Q\n{q}\n### A\n答え\u0301\n"
    doc = parse(tmp_path, HEAD + body)
    prose, pair = doc.sections
    assert prose.content == text
    assert "e\u0301" in prose.content and "\u00e9" not in prose.content
    assert pair.question == q
    assert pair.answer == "答え\u0301"
    assert prose.section_id == sid("prose", text)
    assert pair.section_id == sid("instruction", f"### Q\n{q}\n### A\n答え\u0301")


def test_body_may_be_empty(tmp_path: Path) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {ULID}\n---")
    assert doc.sections == ()
    assert doc.frontmatter_text == f"dlm_id: {ULID}\n"


def test_closing_dashes_in_body_are_text(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "before\n---\nafter\n")
    assert [s.content for s in doc.sections] == ["before\n---\nafter"]


# --- section id formula ----------------------------------------------------------------------


def test_section_id_formula_known_answers(tmp_path: Path) -> None:
    body = "Plain prose.\n::instruction::\n### Q\nq\n### A\na\n::preference::\n" + PREF
    doc = parse(tmp_path, HEAD + body)
    expected = [
        ("prose", "Plain prose."),
        ("instruction", "### Q\nq\n### A\na"),
        ("preference", "### Prompt\nWhich?\n### Chosen\nThis.\n### Rejected\nThat."),
    ]
    assert [(s.type_name, s.content) for s in doc.sections] == expected
    for s, (type_name, content) in zip(doc.sections, expected, strict=True):
        digest = hashlib.sha256(f"{type_name}\n{content}".encode()).hexdigest()
        assert s.section_id == digest[:16]
        assert len(s.section_id) == 16
    # pinned value: a change of formula must be deliberate
    assert doc.sections[0].section_id == sid("prose", "Plain prose.")
    assert sid("prose", "Plain prose.") == hashlib.sha256(b"prose\nPlain prose.").hexdigest()[:16]


def test_frontmatter_does_not_change_section_ids(tmp_path: Path) -> None:
    a = parse(tmp_path, HEAD + "same\n")
    b = parse_document(
        write(tmp_path, f"---\ndlm_id: {ULID}\ntraining:\n  seed: 7\n---\n\nsame\n", "b.dlm")
    )
    assert a.sections[0].section_id == b.sections[0].section_id
    assert a.sections[0].line == 4 and b.sections[0].line == 7
    assert a.sha256 != b.sha256


# --- file-level errors -----------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.dlm"
    with pytest.raises(DocError) as info:
        parse_document(path)
    assert str(info.value).startswith(f"{path}: no such file")


def test_directory_is_not_a_document(tmp_path: Path) -> None:
    with pytest.raises(DocError) as info:
        parse_document(tmp_path)
    assert "is a directory" in str(info.value)
