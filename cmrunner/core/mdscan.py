"""The line grammar of memory documents: which lines are headings, fences, comments and front matter.

Contract: the one reader of a memory document's lines, for ``cmrunner.core.sections`` (which owns
the section model, the edits and the error messages; its module docstring states every rule).
``scan_document`` is the tolerant grammar of a file on disk: it returns the head's byte length,
the untitled preamble's byte range and each ``## `` heading, or raises ``Violation`` (line, rule,
kind) for what cm cannot read; ``scan_block`` is the strict grammar new text is held to. Offsets
are UTF-8 byte offsets; a byte order mark stays in the bytes and outside every rule. Rules and
messages name lines, never document text. Stdlib only (read path).
"""

from __future__ import annotations

import re

from cmrunner.core import textchars

_ATX_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_SETEXT_RE = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_THEMATIC_BREAK_RE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE_OPEN_RE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)$")
CLOSING_HASHES_RE = re.compile(r"(?:^| )#+$")
_COMMENT_OPEN_RE = re.compile(r" {0,3}<!--")


def title_problem(title: object) -> str | None:
    """Why ``title`` cannot be a section title, or None when it can."""
    if not isinstance(title, str) or not title:
        return "a section title must be a non-empty string"
    if title != title.strip():
        return "a section title must not start or end with whitespace"
    if "\t" in title or "\n" in title or textchars.find_unsafe(title) is not None:
        return "a section title must be one line without control characters"
    if CLOSING_HASHES_RE.search(title):
        return "a section title must not end with a run of '#' (Markdown drops it)"
    return None


class Violation(Exception):
    """A rule a document breaks; ``kind`` says which, for ``normalise``."""

    def __init__(self, line: int, rule: str, kind: str = "") -> None:
        super().__init__(rule)
        self.line = line
        self.rule = rule
        self.kind = kind


def lines_of(text: str) -> list[tuple[str, int]]:
    """Each line's content without its terminator, with the line's full length in bytes."""
    out: list[tuple[str, int]] = []
    pos = 0
    end = len(text)
    while pos < end:
        nl = text.find("\n", pos)
        stop = end if nl < 0 else nl + 1
        raw = text[pos:stop]
        content = raw[:-1] if nl >= 0 else raw
        if content.endswith("\r") and nl >= 0:
            content = content[:-1]
        if "\r" in content:
            raise Violation(len(out) + 1, "contains a carriage return that does not end a line", "cr")
        out.append((content, len(raw.encode("utf-8"))))
        pos = stop
    return out


def fence_opener(line: str) -> tuple[str, int] | None:
    m = _FENCE_OPEN_RE.match(line)
    if m is None:
        return None
    run = m.group(2)
    if run[0] == "`" and "`" in m.group(3):
        return None  # CommonMark: a backtick run followed by a backtick is inline code, not a fence
    return run[0], len(run)


def closes_fence(line: str, fence: tuple[str, int]) -> bool:
    char, length = fence
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    run = len(stripped) - len(stripped.lstrip(char))
    return run >= length and stripped[run:].strip(" \t") == ""


def scan_block(text: str, h1: str) -> tuple[int, list[tuple[int, str, int, int]]]:
    """The strict rules new text is held to (``_check_block``): line 1 is exactly ``h1``, only
    blank lines before the first H2, canonical unique H2 lines, no second H1; return the preamble's
    byte length and (line, title, start, body_start) per H2."""
    lines = lines_of(text)
    if not lines or lines[0][0] != h1:
        raise Violation(1, f"the first line must be exactly '{h1}'")
    heads: list[tuple[int, str, int, int]] = []
    seen: set[str] = set()
    fence: tuple[str, int] | None = None
    fence_line = 0
    under_text = False  # the previous line could be a paragraph line that a setext underline would promote
    offset = lines[0][1]
    preamble_end = offset
    for index in range(1, len(lines)):
        lineno = index + 1
        line, nbytes = lines[index]
        start = offset
        offset += nbytes
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
            continue
        opener = fence_opener(line)
        if opener is not None:
            if not heads:
                raise Violation(lineno, "content before the first '## ' section")
            fence, fence_line, under_text = opener, lineno, False
            continue
        atx = _ATX_RE.match(line)
        if atx is not None and len(atx.group(1)) == 1:
            raise Violation(lineno, "a second level-1 heading; only line 1 may be one")
        if atx is not None and len(atx.group(1)) == 2:
            title = line[3:]
            if not line.startswith("## ") or title_problem(title) is not None:
                raise Violation(lineno, "a level-2 heading must be exactly '## <title>' with a trimmed, "
                                         "non-empty, single-line title")
            if title in seen:
                raise Violation(lineno, "duplicate section title")
            seen.add(title)
            heads.append((lineno, title, start, offset))
            under_text = False
            continue
        blank = line.strip(" \t") == ""
        if under_text and _SETEXT_RE.match(line):
            raise Violation(lineno, "a line of only '=' or '-' under text makes a heading; "
                                     "put a blank line before it or use '***'")
        if not heads:
            if not blank:
                raise Violation(lineno, "content before the first '## ' section")
            preamble_end = offset
            continue
        under_text = not blank and atx is None and not _THEMATIC_BREAK_RE.match(line)
    if fence is not None:
        raise Violation(fence_line, "a code fence opened here is never closed")
    return preamble_end, heads


def _comment_closes(line: str, opened_at: int = 0) -> bool:
    return "-->" in line[opened_at:]


def _front_matter_end(lines: list[tuple[str, int]]) -> int:
    """How many lines a YAML front matter block at the top takes (0 when there is none)."""
    if not lines or lines[0][0].lstrip("\ufeff") != "---":
        return 0
    for index in range(1, len(lines)):
        if lines[index][0] in ("---", "..."):
            return index + 1
    return 0  # never closed: CommonMark reads the line as a thematic break, so it is ordinary text


def scan_document(text: str) -> tuple[int, tuple[int, int] | None, list[tuple[int, str, int, int]]]:
    """The tolerant grammar of a document on disk (module contract): the head's byte length, the
    preamble's byte range (``None`` when there is none) and (line, title, start, body_start) per H2."""
    lines = lines_of(text)
    index = _front_matter_end(lines)
    offset = sum(nbytes for _, nbytes in lines[:index])
    if index == 0 and lines and lines[0][0].startswith("\ufeff"):
        lines[0] = (lines[0][0][1:], lines[0][1])  # a byte order mark stays in the bytes, outside every rule
    head_end = offset
    seen_h1 = False
    comment_line = 0
    in_head = True
    heads: list[tuple[int, str, int, int]] = []
    pre_start: int | None = None
    fence: tuple[str, int] | None = None
    fence_line = 0
    under_text = False
    while index < len(lines):
        lineno = index + 1
        line, nbytes = lines[index]
        start = offset
        offset += nbytes
        index += 1
        if comment_line:
            if _comment_closes(line):
                comment_line = 0
                if in_head:
                    head_end = offset
            continue
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
            continue
        blank = line.strip(" \t") == ""
        comment = _COMMENT_OPEN_RE.match(line)
        if comment is not None:
            under_text = False
            if not _comment_closes(line, comment.end()):
                comment_line = lineno
            elif in_head:
                head_end = offset
            continue
        atx = _ATX_RE.match(line)
        if atx is not None and len(atx.group(1)) == 1:
            if in_head and not seen_h1:
                seen_h1, head_end = True, offset
                continue
            raise Violation(lineno, "a second level-1 heading, or one after other text; make it '## <title>'", "h1")
        if in_head and blank:
            head_end = offset
            continue
        if atx is not None and len(atx.group(1)) == 2:
            title = line[3:]
            if not line.startswith("## ") or title_problem(title) is not None:
                raise Violation(lineno, "a level-2 heading must be exactly '## <title>' with a trimmed, "
                                         "non-empty, single-line title", "h2")
            in_head = False
            heads.append((lineno, title, start, offset))
            under_text = False
            continue
        if under_text and _SETEXT_RE.match(line):
            raise Violation(lineno, "a line of only '=' or '-' under text makes a heading; "
                                     "put a blank line before it or use '***'", "setext")
        if in_head:
            in_head, pre_start = False, start
        opener = fence_opener(line)
        if opener is not None:
            fence, fence_line, under_text = opener, lineno, False
            continue
        under_text = not blank and atx is None and not _THEMATIC_BREAK_RE.match(line)
    if fence is not None:
        raise Violation(fence_line, "a code fence opened here is never closed", "fence")
    if comment_line:
        raise Violation(comment_line, "an HTML comment opened here is never closed ('-->')", "comment")
    preamble = None
    if pre_start is not None:
        preamble = (pre_start, heads[0][2] if heads else offset)
    return head_end, preamble, heads
