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
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlm_git.doc.body import decode_utf8, normalize_text, parse_body
from dlm_git.doc.errors import DocError, FrontmatterError
from dlm_git.doc.peek import MAX_DOCUMENT_BYTES
from dlm_git.doc.schema import Frontmatter
from dlm_git.doc.sections import Section
from dlm_git.hashing import digest_text
from dlm_git.safeparse import compose_yaml, load_yaml
from dlm_git.validated import EXTRA, MISSING, ValidationError

# MAX_DOCUMENT_BYTES (`doc.peek`, the one bound): a .dlm is prose and Q/A written by
# people; tokenizing one section costs memory in proportion to its size (a 10 MB document
# peaked at 1.9 GB), so bulk text belongs in `training.sources` files, each bounded by
# `max_bytes_per_file`.


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


def parse_frontmatter(fm_text: str, path: Path) -> Frontmatter:
    try:
        data = load_yaml(fm_text, unique_keys=True)  # nesting bounded first: no overflow
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
    problems = exc.problems
    first = problems[0]
    key = ".".join(str(p) for p in first.loc)
    if first.kind == EXTRA:
        message = f"unknown key '{key}'"
        hint = "remove it or fix its spelling; see docs/format.md for the schema"
    elif first.kind == MISSING:
        message = f"missing required key '{key}'"
        hint = "see docs/format.md for the schema"
    else:
        msg = first.message.removeprefix("Value error, ")
        message = f"invalid value for '{key}': {msg}"
        hint = None
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    # a missing top-level key has no line of its own: point at the frontmatter's start
    line = key_line(fm_text, first.loc) or 1
    return FrontmatterError(path, message, line=line, col=None, hint=hint)


def value_position(fm_text: str, key: str) -> tuple[int, int] | None:
    """1-based (line, col) in the `.dlm` of a top-level key's value (None: not there)."""
    try:
        node = compose_yaml(fm_text)
    except yaml.YAMLError:
        return None
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if key_node.value == key:
            return value_node.start_mark.line + 2, value_node.start_mark.column + 1
    return None


def key_line(fm_text: str, loc: Sequence[str | int]) -> int | None:
    """1-based line in the `.dlm` of the deepest node of `loc` found in the frontmatter."""
    try:
        node = compose_yaml(fm_text)
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
