"""The Markdown section model of the canonical memory documents.

Contract:
- Targets: ``profile`` (H1 ``# Profile``), ``preferences`` (``# Preferences``) and ``project:<id>``
  with ``<id>`` in ``[A-Za-z0-9_-]{1,128}`` (``# Project``). Anything else raises
  ``INVALID_TARGET_REFERENCE``. A missing file reads as ``# <Title>\\n\\n`` and hashes as ``missing``.
- A valid document is UTF-8 and at most the hard budget in bytes. Read line by line, outside code
  fences: line 1 is exactly ``# <Title>``; no other level-1 heading follows; every level-2 heading
  line is exactly ``## <title>``; titles are unique; only blank lines come between the H1 and the
  first H2. A setext underline (a line of only ``=`` or only ``-``) directly under a text line is
  rejected, because it would turn that line into a heading the model cannot see. A fence opens on a
  line indented at most three spaces with three or more backticks or tildes (a backtick fence's
  info string has no backtick) and closes on a line of the same character, at least as long, with
  only spaces or tabs after it; an unclosed fence is invalid. Headings inside fences are body text.
  Lines that CommonMark reads as an H1/H2 but that are not canonical (indented, tab after the
  hashes, empty, closing ``#`` sequence) are rejected rather than treated as text, so what renders
  as a section heading is always a section boundary here. Container blocks (lists, quotes) and
  HTML blocks are not modelled: they are body text, whatever a renderer makes of them.
- Line endings: LF and CRLF are both accepted, and kept byte for byte (files edited on Windows stay
  valid). A carriage return that does not end a line is rejected: CommonMark reads it as a line
  break, so it could hide a heading from a line-based reader. New text is written with LF.
- A section runs from its H2 line up to the next H2 line or the end of the file; its body is what
  follows the H2 line. The preamble (H1 plus blank lines) is never touched by operations.
- ``put_section`` renders ``## <title>\\n<body>`` plus a final newline if missing. That text alone
  must read as exactly one section, so a body cannot open a heading at level 1 or 2 (lower levels
  and fenced code are fine). With no ref it is appended (after a newline, if the file's last line
  has none); with a ref it replaces that section's bytes. ``remove_section`` deletes the bytes.
  Every other byte is untouched, and the result is re-parsed and held to the hard budget.
- Budgets: ``soft`` (default 8192) is advice for the maintainer and never enforced; ``hard``
  (default 16384, allowed 64..1 048 576, soft <= hard) is enforced on every parse and edit.

Section references are stable, unlike the reference's positional ``s1, s2, ...``: a ref is
``sec_`` + the first 12 hex digits of sha256(UTF-8 title). Titles are unique within a document, so
a ref names one section for as long as its title is unchanged, whatever happens to other sections.
If two titles of one document share those 12 digits, both refs are lengthened to the shortest
prefix (12..64 digits) that tells them apart. A lookup accepts any ``sec_`` prefix of 12..64
lowercase hex digits that matches exactly one section's full title hash, so a ref handed out
earlier keeps working after a colliding section comes or goes; a prefix that matches several
sections is refused as ambiguous, never guessed. Renaming a section gives it a new ref, as it
gives it a new source-link key (``<target>:<sha256(title)>``).

Errors (``CmError``): ``INVALID_TARGET_REFERENCE``, ``INVALID_DOCUMENT``, ``DOCUMENT_TOO_LARGE``,
``INVALID_SECTION_TITLE``, ``INVALID_SECTION_BODY``, ``DUPLICATE_SECTION_TITLE``, ``INVALID_BUDGET``.
Messages name lines and rules, never document text or titles. Stdlib only (read path).
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from cmrunner.core import scopes, textchars
from cmrunner.core.errors import CmError

DEFAULT_SOFT_BUDGET = 8192
DEFAULT_HARD_BUDGET = 16384
MIN_HARD_BUDGET = 64
MAX_HARD_BUDGET = 1_048_576
MISSING_HASH = "missing"
REF_PREFIX = "sec_"
REF_MIN_HEX = 12

_TARGET_TITLES = {"profile": "Profile", "preferences": "Preferences"}
_PROJECT_TITLE = "Project"
_REF_RE = re.compile(r"sec_([0-9a-f]{12,64})")

_ATX_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_SETEXT_RE = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_THEMATIC_BREAK_RE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_FENCE_OPEN_RE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)$")
_CLOSING_HASHES_RE = re.compile(r"(?:^| )#+$")


class Budgets:
    """Byte budgets of one document: ``soft`` is advice, ``hard`` is enforced. Immutable."""

    __slots__ = ("soft", "hard")
    soft: int
    hard: int

    def __init__(self, soft: int = DEFAULT_SOFT_BUDGET, hard: int = DEFAULT_HARD_BUDGET) -> None:
        for name, value in (("soft", soft), ("hard", hard)):
            if type(value) is not int:
                raise CmError("INVALID_BUDGET", f"the {name} budget must be an integer number of bytes")
        if not MIN_HARD_BUDGET <= hard <= MAX_HARD_BUDGET:
            raise CmError("INVALID_BUDGET",
                          f"the hard budget must be between {MIN_HARD_BUDGET} and {MAX_HARD_BUDGET} bytes")
        if not 0 < soft <= hard:
            raise CmError("INVALID_BUDGET", "the soft budget must be positive and at most the hard budget")
        object.__setattr__(self, "soft", soft)
        object.__setattr__(self, "hard", hard)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Budgets is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Budgets) and (self.soft, self.hard) == (other.soft, other.hard)

    def __hash__(self) -> int:
        return hash((self.soft, self.hard))

    def __repr__(self) -> str:
        return f"Budgets(soft={self.soft}, hard={self.hard})"


DEFAULT_BUDGETS = Budgets()


def target_title(target: str) -> str:
    """The H1 title of a target; ``INVALID_TARGET_REFERENCE`` for anything that is not one."""
    if not isinstance(target, str):
        raise CmError("INVALID_TARGET_REFERENCE", "a target must be profile, preferences or project:<id>")
    title = _TARGET_TITLES.get(target)
    if title is not None:
        return title
    if scopes.project_id(target) is not None:
        return _PROJECT_TITLE
    raise CmError("INVALID_TARGET_REFERENCE",
                  "a target must be profile, preferences or project:<id> with id [A-Za-z0-9_-]{1,128}")


def target_relpath(target: str) -> str:
    """The document's path relative to the data root, with ``/`` separators."""
    target_title(target)
    return "memory/" + scopes.document_name(target)


def missing_document_text(target: str) -> str:
    """What a target's missing file reads as."""
    return f"# {target_title(target)}\n\n"


def document_hash(data: bytes | None) -> str:
    """sha256 hex of the file's bytes, or ``missing`` when there is no file."""
    if data is None:
        return MISSING_HASH
    return hashlib.sha256(data).hexdigest()


def title_digest(title: str) -> str:
    return hashlib.sha256(title.encode("utf-8")).hexdigest()


def section_key(target: str, title: str) -> str:
    """The source-link key of a section: ``<target>:<sha256(title)>``."""
    target_title(target)
    return f"{target}:{title_digest(title)}"


def title_problem(title: object) -> str | None:
    """Why ``title`` cannot be a section title, or None when it can."""
    if not isinstance(title, str) or not title:
        return "a section title must be a non-empty string"
    if title != title.strip():
        return "a section title must not start or end with whitespace"
    if "\t" in title or "\n" in title or textchars.find_unsafe(title) is not None:
        return "a section title must be one line without control characters"
    if _CLOSING_HASHES_RE.search(title):
        return "a section title must not end with a run of '#' (Markdown drops it)"
    return None


def check_title(title: object) -> str:
    """``title`` itself when it can be a section title; ``INVALID_SECTION_TITLE`` otherwise."""
    problem = title_problem(title)
    if problem is not None or not isinstance(title, str):
        raise CmError("INVALID_SECTION_TITLE", problem or "a section title must be a string")
    return title


class Section(NamedTuple):
    """One ``## title`` section; ``start``/``body_start``/``end`` are byte offsets into ``Document.data``."""

    ref: str
    title: str
    digest: str
    start: int
    body_start: int
    end: int
    body: str


class Document:
    """A parsed, valid document. Immutable: edits return a new ``Document``."""

    __slots__ = ("target", "data", "exists", "budgets", "preamble_end", "sections", "_by_title")

    def __init__(self, target: str, data: bytes, exists: bool, budgets: Budgets,
                 preamble_end: int, sections: tuple[Section, ...]) -> None:
        self.target = target
        self.data = data
        self.exists = exists
        self.budgets = budgets
        self.preamble_end = preamble_end
        self.sections = sections
        self._by_title = {s.title: s for s in sections}

    @property
    def hash(self) -> str:
        return document_hash(self.data if self.exists else None)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def over_soft_budget(self) -> bool:
        return self.size > self.budgets.soft

    def render(self) -> str:
        """The exact text of the document (byte-identical to what was parsed or produced)."""
        return self.data.decode("utf-8")

    def by_title(self, title: str) -> Section | None:
        return self._by_title.get(title)

    def named(self, name: str) -> Section | None:
        """The section ``name`` names as a title or, failing that, as a ``sec_`` ref; ``None`` if neither."""
        found = self.by_title(name)
        if found is None and name.startswith("sec_"):
            try:
                found = self.section(name)
            except CmError:
                found = None
        return found

    def section(self, ref: str) -> Section:
        """The section a ref names; ``INVALID_TARGET_REFERENCE`` if none or several."""
        m = _REF_RE.fullmatch(ref) if isinstance(ref, str) else None
        if m is None:
            raise CmError("INVALID_TARGET_REFERENCE",
                          "a section ref is sec_ followed by 12 to 64 lowercase hex digits")
        hexdigits = m.group(1)
        found = [s for s in self.sections if s.digest.startswith(hexdigits)]
        if not found:
            raise CmError("INVALID_TARGET_REFERENCE",
                          f"no section of {self.target} has that ref; read the document again")
        if len(found) > 1:
            raise CmError("INVALID_TARGET_REFERENCE",
                          f"that ref matches several sections of {self.target}; use the longer refs listed now")
        return found[0]


class _Violation(Exception):
    def __init__(self, line: int, rule: str) -> None:
        super().__init__(rule)
        self.line = line
        self.rule = rule


def _lines(text: str) -> list[tuple[str, int]]:
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
            raise _Violation(len(out) + 1, "contains a carriage return that does not end a line")
        out.append((content, len(raw.encode("utf-8"))))
        pos = stop
    return out


def _fence_opener(line: str) -> tuple[str, int] | None:
    m = _FENCE_OPEN_RE.match(line)
    if m is None:
        return None
    run = m.group(2)
    if run[0] == "`" and "`" in m.group(3):
        return None  # CommonMark: a backtick run followed by a backtick is inline code, not a fence
    return run[0], len(run)


def _closes_fence(line: str, fence: tuple[str, int]) -> bool:
    char, length = fence
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    run = len(stripped) - len(stripped.lstrip(char))
    return run >= length and stripped[run:].strip(" \t") == ""


def _scan(text: str, h1: str) -> tuple[int, list[tuple[int, str, int, int]]]:
    """Check the rules; return the preamble's byte length and (line, title, start, body_start) per H2."""
    lines = _lines(text)
    if not lines or lines[0][0] != h1:
        if text.startswith("\ufeff"):
            raise _Violation(1, "the file starts with a byte order mark; save it as UTF-8 without one")
        raise _Violation(1, f"the first line must be exactly '{h1}'")
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
            if _closes_fence(line, fence):
                fence = None
            continue
        opener = _fence_opener(line)
        if opener is not None:
            if not heads:
                raise _Violation(lineno, "content before the first '## ' section")
            fence, fence_line, under_text = opener, lineno, False
            continue
        atx = _ATX_RE.match(line)
        if atx is not None and len(atx.group(1)) == 1:
            raise _Violation(lineno, "a second level-1 heading; only line 1 may be one")
        if atx is not None and len(atx.group(1)) == 2:
            title = line[3:]
            if not line.startswith("## ") or title_problem(title) is not None:
                raise _Violation(lineno, "a level-2 heading must be exactly '## <title>' with a trimmed, "
                                         "non-empty, single-line title")
            if title in seen:
                raise _Violation(lineno, "duplicate section title")
            seen.add(title)
            heads.append((lineno, title, start, offset))
            under_text = False
            continue
        blank = line.strip(" \t") == ""
        if under_text and _SETEXT_RE.match(line):
            raise _Violation(lineno, "a line of only '=' or '-' under text makes a heading; "
                                     "put a blank line before it or use '***'")
        if not heads:
            if not blank:
                raise _Violation(lineno, "content before the first '## ' section")
            preamble_end = offset
            continue
        under_text = not blank and atx is None and not _THEMATIC_BREAK_RE.match(line)
    if fence is not None:
        raise _Violation(fence_line, "a code fence opened here is never closed")
    return preamble_end, heads


def _refs(digests: list[str]) -> list[str]:
    """Shortest unambiguous ``sec_`` ref (at least 12 hex digits) for each digest."""
    lengths = [REF_MIN_HEX] * len(digests)
    order = sorted(range(len(digests)), key=lambda i: digests[i])
    for a, b in zip(order, order[1:]):
        x, y = digests[a], digests[b]
        common = 0
        while common < len(x) and x[common] == y[common]:
            common += 1
        need = min(common + 1, len(x))
        lengths[a] = max(lengths[a], need)
        lengths[b] = max(lengths[b], need)
    return [REF_PREFIX + d[:n] for d, n in zip(digests, lengths)]


def _decode(target: str, content: str | bytes) -> tuple[str, bytes]:
    try:
        if isinstance(content, bytes):
            return content.decode("utf-8"), content
        return content, content.encode("utf-8")
    except UnicodeError:
        raise CmError("INVALID_DOCUMENT", f"{target} is not valid UTF-8; fix the file's encoding") from None


def parse(target: str, content: str | bytes | None, budgets: Budgets = DEFAULT_BUDGETS) -> Document:
    """Parse a document's file content (``None`` for a missing file) and check every rule."""
    h1 = "# " + target_title(target)
    exists = content is not None
    if content is None:
        content = missing_document_text(target)
    if not isinstance(content, (str, bytes)):
        raise CmError("INVALID_DOCUMENT", f"{target} content must be text")
    if len(content) > budgets.hard:  # cheap early refusal; UTF-8 is never shorter than its str
        raise _too_large(target, budgets)
    text, data = _decode(target, content)
    if len(data) > budgets.hard:
        raise _too_large(target, budgets)
    try:
        preamble_end, heads = _scan(text, h1)
    except _Violation as v:
        raise CmError("INVALID_DOCUMENT", f"{target} line {v.line}: {v.rule}; fix the file by hand") from None
    digests = [title_digest(title) for _, title, _, _ in heads]
    refs = _refs(digests)
    sections = []
    for i, (_, title, start, body_start) in enumerate(heads):
        end = heads[i + 1][2] if i + 1 < len(heads) else len(data)
        body = data[body_start:end].decode("utf-8")
        sections.append(Section(refs[i], title, digests[i], start, body_start, end, body))
    return Document(target, data, exists, budgets, preamble_end, tuple(sections))


def _too_large(target: str, budgets: Budgets) -> CmError:
    return CmError("DOCUMENT_TOO_LARGE",
                   f"{target} would exceed its hard budget of {budgets.hard} bytes; shorten or remove sections")


def render_section(title: str, body: str) -> str:
    """``## <title>\\n<body>`` with a final newline, checked to read as exactly one section."""
    check_title(title)
    if not isinstance(body, str):
        raise CmError("INVALID_SECTION_BODY", "a section body must be a string")
    block = f"## {title}\n{body}"
    if not block.endswith("\n"):
        block += "\n"
    return block


def _check_block(doc: Document, block: str) -> bytes:
    try:
        encoded = block.encode("utf-8")
    except UnicodeError:
        raise CmError("INVALID_SECTION_BODY", "a section body must be valid Unicode text") from None
    if len(encoded) > doc.budgets.hard:
        raise _too_large(doc.target, doc.budgets)
    # The block is checked alone, after a synthetic H1 and blank line; body line n is line n + 3.
    h1 = "# " + target_title(doc.target)
    try:
        _, heads = _scan(f"{h1}\n\n{block}", h1)
    except _Violation as v:
        raise CmError("INVALID_SECTION_BODY", f"section body line {v.line - 3}: {v.rule}") from None
    if len(heads) != 1:
        raise CmError("INVALID_SECTION_BODY", f"section body line {heads[1][0] - 3}: a level-2 heading "
                                              "would start another section; use '###' or lower")
    return encoded


def put_section(doc: Document, ref: str | None, title: str, body: str) -> Document:
    """Replace the section ``ref`` names (or append when ``ref`` is None) with ``## title`` + body."""
    return _put(doc, ref, title, render_section(title, body))


def put_section_text(doc: Document, ref: str | None, title: str, text: str) -> Document:
    """Like ``put_section`` with a section's exact text (its ``## title`` line included, LF or
    CRLF), e.g. a version from history, so its bytes come back unchanged."""
    check_title(title)
    if not (text.startswith(f"## {title}\n") or text.startswith(f"## {title}\r\n")):
        raise CmError("INVALID_SECTION_BODY", "a section's text must start with its own '## ' heading line")
    return _put(doc, ref, title, text if text.endswith("\n") else text + "\n")


def _put(doc: Document, ref: str | None, title: str, block: str) -> Document:
    encoded = _check_block(doc, block)
    existing = doc.by_title(title)
    if ref is None:
        if existing is not None:
            raise CmError("DUPLICATE_SECTION_TITLE",
                          f"{doc.target} already has a section with that title; replace it by its ref")
        prefix = doc.data
        if prefix and not prefix.endswith(b"\n"):
            prefix += b"\n"
        data = prefix + encoded
    else:
        replaced = doc.section(ref)
        if existing is not None and existing is not replaced:
            raise CmError("DUPLICATE_SECTION_TITLE",
                          f"another section of {doc.target} already has that title; choose another title")
        data = doc.data[:replaced.start] + encoded + doc.data[replaced.end:]
    return parse(doc.target, data, doc.budgets)


def remove_section(doc: Document, ref: str) -> Document:
    """Delete the section ``ref`` names; every other byte is kept."""
    removed = doc.section(ref)
    return parse(doc.target, doc.data[:removed.start] + doc.data[removed.end:], doc.budgets)
