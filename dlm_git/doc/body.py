"""The body of a `.dlm`: its lines split into typed sections with stable ids.

Invariants:
- Input is strict UTF-8; a leading BOM is stripped; CRLF and lone CR become LF
  (`normalize_text`). Section ids are computed on that normalized text only.
- Fence lines (`::instruction::`, `::preference::`, `::prose::`, each with an optional
  `#adapter` suffix) switch section type; inside a ``` or ~~~ code block they are text.
- Every error names `path:line:col` (`BodyError`, a `DocError`).
- No schema and nothing heavy is imported: the pre-commit hook computes a document's
  own section ids here (`section_ids`) without loading the frontmatter schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlm_git.doc.errors import BodyError, DocError
from dlm_git.doc.sections import (
    Section,
    SectionKind,
    instruction_section,
    preference_section,
    prose_section,
)

FENCE_RE = re.compile(r"^::(?P<body>[^:\s]*)::\s*$")
FENCE_BODY_RE = re.compile(r"^(?P<kind>[a-z_]+)(?:#(?P<adapter>[A-Za-z0-9_.-]+))?$")
CODE_OPEN_RE = re.compile(r"^ {0,3}(?P<marker>`{3,}|~{3,})")
KNOWN_FENCES: tuple[SectionKind, ...] = ("prose", "instruction", "preference")
FENCE_HINT = (
    "known fences: ::instruction::, ::preference::, ::prose:: (optionally ::kind#adapter::)"
)


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


def section_ids(raw: bytes) -> list[str] | None:
    """The ids of a `.dlm`'s own sections, in order (its sources' are not included), read
    as `parser.parse_bytes` reads the body; None when it cannot be read that way."""
    try:
        lines = normalize_text(decode_utf8(raw, Path("document.dlm"))).split("\n")
    except DocError:
        return None
    if lines[0] != "---" or "---" not in lines[1:]:
        return None
    close = lines.index("---", 1)
    body = [(close + 2 + i, line) for i, line in enumerate(lines[close + 1 :])]
    try:
        return [s.section_id for s in parse_body(body, Path("document.dlm"))]
    except DocError:
        return None
