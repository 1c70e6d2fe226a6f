"""Parse a `.dlm` file: YAML frontmatter + Markdown body into typed sections.

Invariants:
- Input is strict UTF-8; a leading BOM is stripped; CRLF and lone CR become LF
  (`normalize_text`). Section ids are computed on that normalized text only.
- `Document.sha256` is the digest of the canonical form (`hashing.canonical_text`: CRLF
  as LF), of which the normalized text is a function: an LF and a CRLF checkout of a
  document give the same digest, sections and ids.
- Line 1 is exactly `---`; the next line that is exactly `---` closes the frontmatter.
- Fence lines (`::instruction::`, `::preference::`, `::prose::`, each with an optional
  `#adapter` suffix) switch section type; inside a ``` or ~~~ code block they are text.
- Every error names `path:line:col`; nothing here raises anything but `DocError` for bad input.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dlm_git.doc.errors import BodyError, DocError, FrontmatterError
from dlm_git.doc.schema import Frontmatter
from dlm_git.doc.sections import (
    Section,
    SectionKind,
    instruction_section,
    preference_section,
    prose_section,
)
from dlm_git.hashing import digest_text
from dlm_git.safeparse import load_yaml

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""A .dlm is prose and Q/A written by people; tokenizing one section costs memory in
proportion to its size (a 10 MB document peaked at 1.9 GB), so bulk text belongs in
`training.sources` files, each bounded by `max_bytes_per_file`."""
FENCE_RE = re.compile(r"^::(?P<body>[^:\s]*)::\s*$")
FENCE_BODY_RE = re.compile(r"^(?P<kind>[a-z_]+)(?:#(?P<adapter>[A-Za-z0-9_.-]+))?$")
CODE_OPEN_RE = re.compile(r"^ {0,3}(?P<marker>`{3,}|~{3,})")
KNOWN_FENCES: tuple[SectionKind, ...] = ("prose", "instruction", "preference")
FENCE_HINT = (
    "known fences: ::instruction::, ::preference::, ::prose:: (optionally ::kind#adapter::)"
)


@dataclass(frozen=True)
class Document:
    path: Path
    sha256: str
    """sha256 of the file's bytes with CRLF written as LF (`hashing.canonical_text`, what
    git stores): what `dlm.lock` and the manifest call `dlm_sha256`. The parse is a
    function of the same form, so equal digests mean equal documents on any checkout."""
    frontmatter: Frontmatter
    frontmatter_text: str
    sections: tuple[Section, ...]

    @property
    def directory(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class _Line:
    number: int
    text: str
    in_code: bool


def decode_utf8(data: bytes, path: Path) -> str:
    """Strict UTF-8 decode; the error names the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # count lines and columns the way the parser sees the text (BOM dropped, CRLF and
        # lone CR as one line break, columns in characters); the prefix is valid UTF-8
        before = normalize_text(data[: exc.start].decode("utf-8"))
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        raise DocError(
            path,
            f"invalid UTF-8 (byte 0x{data[exc.start]:02x})",
            line=line,
            col=col,
            hint="save the file as UTF-8",
        ) from None


def normalize_text(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_document(path: Path) -> Document:
    path = Path(path)
    try:
        raw = read_regular_file(path)
    except FileNotFoundError:
        raise DocError(path, "no such file", hint="check the document path") from None
    except IsADirectoryError:
        raise DocError(path, "is a directory, not a .dlm file") from None
    except OSError as exc:
        raise DocError(path, f"cannot be read ({exc.strerror})") from None
    return parse_bytes(raw, path)


def read_regular_file(path: Path) -> bytes:
    """The bytes of `path`, refusing anything but a regular file (`IsADirectoryError` for
    a directory, `DocError` for a FIFO, socket or device). Opened non-blocking and
    checked on the open descriptor, so a FIFO can neither hang the read nor be swapped
    in between a check and the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise DocError(path, "is not a regular file", hint="give the path of a .dlm file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_DOCUMENT_BYTES + 1)  # more is refused by parse_bytes
    finally:
        os.close(fd)


def parse_bytes(raw: bytes, path: Path) -> Document:
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocError(
            path,
            f"document is over the {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB limit for a .dlm",
            hint="move bulk text into files under training.sources (each up to max_bytes_per_file)",
        )
    text = normalize_text(decode_utf8(raw, path))
    lines = text.split("\n")
    if lines[0] != "---":
        raise FrontmatterError(
            path,
            "line 1 must be exactly '---' (YAML frontmatter start)",
            line=1,
            col=1,
            hint="start the document with a '---' line, the frontmatter, and another '---' line",
        )
    close = next((i for i in range(1, len(lines)) if lines[i] == "---"), None)
    if close is None:
        raise FrontmatterError(path, "frontmatter is not closed by a '---' line", line=1, col=1)
    fm_text = "\n".join(lines[1:close]) + "\n"
    frontmatter = parse_frontmatter(fm_text, path)
    body = [(close + 2 + i, line) for i, line in enumerate(lines[close + 1 :])]
    sections = parse_body(body, path)
    return Document(
        path=path,
        sha256=digest_text(raw).sha256,
        frontmatter=frontmatter,
        frontmatter_text=fm_text,
        sections=tuple(sections),
    )


# --- frontmatter ---------------------------------------------------------------------------


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when available


class _UniqueKeyLoader(_SAFE_LOADER):  # type: ignore[misc,valid-type]
    """A safe loader (libyaml's parser when available: several times faster) that refuses
    a mapping with the same key twice (last-wins would silently drop, e.g., a whole first
    `training:` block)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def parse_frontmatter(fm_text: str, path: Path) -> Frontmatter:
    try:
        data = load_yaml(fm_text, _UniqueKeyLoader)  # nesting bounded first: no overflow
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontmatterError(
            path,
            f"frontmatter is not valid YAML: {problem}",
            line=mark.line + 2 if mark is not None else 2,
            col=mark.column + 1 if mark is not None else None,
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError(path, "frontmatter must be a YAML mapping", line=2, col=1)
    try:
        return Frontmatter.model_validate(data)
    except ValidationError as exc:
        raise _schema_error(exc, fm_text, path, data) from None


def _schema_error(exc: ValidationError, fm_text: str, path: Path, data: Any) -> FrontmatterError:
    errors = exc.errors()
    first = errors[0]
    loc = tuple(first["loc"])
    key = ".".join(str(p) for p in loc)
    if first["type"] == "extra_forbidden":
        message = f"unknown key '{key}'"
        hint = "remove it or fix its spelling; see docs/format.md for the schema"
    elif first["type"] == "missing":
        message = f"missing required key '{key}'"
        hint = "see docs/format.md for the schema"
    else:
        msg = str(first["msg"]).removeprefix("Value error, ")
        message = f"invalid value for '{key}': {msg}"
        hint = None
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    # a missing top-level key has no line of its own: point at the frontmatter's start
    line = key_line(fm_text, loc) or 1
    return FrontmatterError(path, message, line=line, col=None, hint=hint)


def key_line(fm_text: str, loc: Sequence[str | int]) -> int | None:
    """1-based line in the `.dlm` of the deepest node of `loc` found in the frontmatter."""
    try:
        node = yaml.compose(fm_text)
    except yaml.YAMLError:
        return None
    best: int | None = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = None
            for key_node, value_node in node.value:
                if key_node.value == part:
                    best = key_node.start_mark.line + 2
                    found = value_node
                    break
            if found is None:
                break
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            best = node.start_mark.line + 2
        else:
            break
    return best


# --- body ------------------------------------------------------------------------------------


def _mark_code(body: list[tuple[int, str]], path: Path) -> list[_Line]:
    out: list[_Line] = []
    marker: str | None = None
    opened_at = 0
    for number, text in body:
        if marker is not None:
            stripped = text.strip()
            if stripped.startswith(marker[0] * len(marker)) and set(stripped) == {marker[0]}:
                marker = None
            out.append(_Line(number, text, True))
            continue
        m = CODE_OPEN_RE.match(text)
        if m:
            marker = m.group("marker")
            opened_at = number
            out.append(_Line(number, text, True))
            continue
        out.append(_Line(number, text, False))
    if marker is not None:
        raise BodyError(
            path,
            f"unterminated code block (opened with {marker})",
            line=opened_at,
            col=1,
            hint=f"close it with a line of {marker}",
        )
    return out


def _trim(lines: Sequence[_Line]) -> tuple[str, int | None]:
    """Join lines, dropping blank lines at both ends; returns (text, first line number)."""
    start, end = 0, len(lines)
    while start < end and not lines[start].text.strip():
        start += 1
    while end > start and not lines[end - 1].text.strip():
        end -= 1
    if start == end:
        return "", None
    return "\n".join(line.text for line in lines[start:end]), lines[start].number


def parse_body(body: list[tuple[int, str]], path: Path) -> list[Section]:
    lines = _mark_code(body, path)
    sections: list[Section] = []
    kind: SectionKind = "prose"
    adapter: str | None = None
    fence_line = body[0][0] if body else 1
    block: list[_Line] = []
    for line in lines:
        m = None if line.in_code else FENCE_RE.match(line.text)
        if m is None:
            block.append(line)
            continue
        sections.extend(_flush(kind, adapter, fence_line, block, path))
        fm = FENCE_BODY_RE.match(m.group("body"))
        if fm is None or fm.group("kind") not in KNOWN_FENCES:
            raise BodyError(
                path,
                f"unknown section fence '{line.text.strip()}'",
                line=line.number,
                col=1,
                hint=FENCE_HINT,
            )
        kind = fm.group("kind")  # type: ignore[assignment]
        adapter = fm.group("adapter")
        fence_line = line.number
        block = []
    sections.extend(_flush(kind, adapter, fence_line, block, path))
    return sections


def _flush(
    kind: SectionKind, adapter: str | None, fence_line: int, block: list[_Line], path: Path
) -> list[Section]:
    if kind == "prose":
        text, first = _trim(block)
        return [prose_section(text, first, adapter)] if text else []
    if kind == "instruction":
        return _parse_headed(block, path, fence_line, "instruction", ("### Q", "### A"), adapter)
    return _parse_headed(
        block, path, fence_line, "preference", ("### Prompt", "### Chosen", "### Rejected"), adapter
    )


def _parse_headed(
    block: list[_Line],
    path: Path,
    fence_line: int,
    kind: str,
    headers: tuple[str, ...],
    adapter: str | None,
) -> list[Section]:
    """Split a block into groups of parts, each introduced by `headers` in order."""
    sections: list[Section] = []
    parts: list[list[_Line]] = []
    header_lines: list[int] = []
    expected = 0  # index into headers of the next header we accept

    def finish() -> None:
        texts = []
        for header, header_line, part in zip(headers, header_lines, parts, strict=True):
            text, _ = _trim(part)
            if not text:
                raise BodyError(
                    path,
                    f"empty '{header}' in ::{kind}:: section",
                    line=header_line,
                    col=1,
                    hint=f"write the text below '{header}' or remove the group",
                )
            texts.append(text)
        if kind == "instruction":
            sections.append(instruction_section(texts[0], texts[1], header_lines[0], adapter))
        else:
            sections.append(
                preference_section(texts[0], texts[1], texts[2], header_lines[0], adapter)
            )

    for line in block:
        header = line.text.rstrip() if not line.in_code else None
        if header in headers:
            index = headers.index(header)
            if index == 0 and expected == len(headers):
                finish()
                parts, header_lines, expected = [], [], 0
            if index != expected:
                want = headers[expected % len(headers)]
                raise BodyError(
                    path,
                    f"'{header}' where '{want}' was expected in ::{kind}:: section",
                    line=line.number,
                    col=1,
                    hint=f"each group is {' / '.join(headers)} in order",
                )
            parts.append([])
            header_lines.append(line.number)
            expected = index + 1
            continue
        if not parts:
            if line.text.strip():
                raise BodyError(
                    path,
                    f"text before the first '{headers[0]}' in ::{kind}:: section",
                    line=line.number,
                    col=1,
                    hint=f"start the section with '{headers[0]}' or move the text above the fence",
                )
            continue
        parts[-1].append(line)
    if not parts:
        raise BodyError(
            path,
            f"::{kind}:: section has no '{headers[0]}' group",
            line=fence_line,
            col=1,
            hint=f"add {' / '.join(headers)}",
        )
    if expected != len(headers):
        raise BodyError(
            path,
            f"'{headers[expected - 1]}' has no following '{headers[expected]}'",
            line=header_lines[-1],
            col=1,
        )
    finish()
    return sections
