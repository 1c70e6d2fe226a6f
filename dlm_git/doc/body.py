"""The body of a `.dlm`: its lines split into typed sections with stable ids.

Invariants:
- Input is strict UTF-8; a leading BOM is stripped; CRLF and lone CR become LF
  (`normalize_text`). Section ids are computed on that normalized text only.
- Fence lines (`::instruction::`, `::preference::`, `::prose::`, each with an optional
  `#adapter` suffix) switch section type; inside a ``` or ~~~ code block they are text.
- In an instruction section `### Q !probe` (exactly, trailing whitespace allowed) opens
  a probe pair, as the original `dlm` tool reads it; any other marker on a `### Q` line
  (`### Q !probz`, `### Q  !probe`) is an error at the marker, never text.
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
    PROBE_HEADER,
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
MARKER_RE = re.compile(r"^### Q[ \t]*!")
"""A `### Q` line with a marker: `PROBE_HEADER` or an error."""
MARKER_HINT = "the one marker is '### Q !probe' (one space, lower case); a plain pair is '### Q'"
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
    groups = _HeadedGroups(path, kind, headers, adapter)
    part: list[_Line] | None = None  # where text lines go; None before the first header
    for line in block:
        header = line.text.rstrip() if not line.in_code else None
        probe = kind == "instruction" and header == PROBE_HEADER
        if probe or header in headers:
            part = groups.header(line, 0 if probe else headers.index(header), probe)
        elif kind == "instruction" and header is not None and MARKER_RE.match(header):
            raise groups.bad_marker(line, header)
        elif part is not None:
            part.append(line)
        elif line.text.strip():  # only blank lines before the first header
            raise groups.text_before_first(line)
    return groups.end(fence_line)


class _HeadedGroups:
    """The groups of a headed section, read line by line. A group becomes a section as
    soon as the next one starts, so an error in it is reported before any later line's."""

    def __init__(self, path: Path, kind: str, headers: tuple[str, ...], adapter: str | None):
        self.path, self.kind, self.headers, self.adapter = path, kind, headers, adapter
        self.sections: list[Section] = []
        self.parts: list[list[_Line]] = []  # the current group's parts so far
        self.header_lines: list[int] = []  # the line of each part's header
        self.expected = 0  # index into headers of the next header we accept
        self.probe = False  # the current group is a probe pair (`### Q !probe`)

    def _error(self, message: str, line: int, hint: str | None = None) -> BodyError:
        return BodyError(self.path, message, line=line, col=1, hint=hint)

    def header(self, line: _Line, index: int, probe: bool = False) -> list[_Line]:
        """`headers[index]` on `line`: it starts the next part (and group), returned to
        be filled, or is out of order. `probe`: the header is `### Q !probe`."""
        headers = self.headers
        if index == 0 and self.expected == len(headers):
            self._finish()
            self.parts, self.header_lines, self.expected = [], [], 0
        if index != self.expected:
            want = headers[self.expected % len(headers)]
            raise self._error(
                f"'{headers[index]}' where '{want}' was expected in ::{self.kind}:: section",
                line.number,
                f"each group is {' / '.join(headers)} in order",
            )
        if index == 0:
            self.probe = probe
        part: list[_Line] = []
        self.parts.append(part)
        self.header_lines.append(line.number)
        self.expected = index + 1
        return part

    def bad_marker(self, line: _Line, header: str) -> BodyError:
        at = header.index("!")
        return BodyError(
            self.path,
            f"unknown question marker in '{header[:60]}' in ::{self.kind}:: section",
            line=line.number,
            col=at + 1,
            hint=MARKER_HINT,
        )

    def text_before_first(self, line: _Line) -> BodyError:
        first = self.headers[0]
        return self._error(
            f"text before the first '{first}' in ::{self.kind}:: section",
            line.number,
            f"start the section with '{first}' or move the text above the fence",
        )

    def end(self, fence_line: int) -> list[Section]:
        """The sections, once the block ended: the last group must be complete."""
        headers, expected = self.headers, self.expected
        if not self.parts:
            raise self._error(
                f"::{self.kind}:: section has no '{headers[0]}' group",
                fence_line,
                f"add {' / '.join(headers)}",
            )
        if expected != len(headers):
            raise self._error(
                f"'{headers[expected - 1]}' has no following '{headers[expected]}'",
                self.header_lines[-1],
            )
        self._finish()
        return self.sections

    def _finish(self) -> None:
        """The current (complete) group as a section; every part must hold text."""
        texts = []
        for header, header_line, part in zip(
            self.headers, self.header_lines, self.parts, strict=True
        ):
            text, _ = _trim(part)
            if not text:
                raise self._error(
                    f"empty '{header}' in ::{self.kind}:: section",
                    header_line,
                    f"write the text below '{header}' or remove the group",
                )
            texts.append(text)
        first, adapter = self.header_lines[0], self.adapter
        if self.kind == "instruction":
            self.sections.append(
                instruction_section(texts[0], texts[1], first, adapter, self.probe)
            )
        else:
            self.sections.append(preference_section(texts[0], texts[1], texts[2], first, adapter))


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
