"""The Markdown section model of the canonical memory documents.

Contract:
- Targets: ``profile`` (H1 ``# Profile``), ``preferences`` (``# Preferences``) and ``project:<id>``
  with ``<id>`` in ``[A-Za-z0-9_-]{1,128}`` (``# Project``). Anything else raises
  ``INVALID_TARGET_REFERENCE``. A missing file reads as ``# <Title>\\n\\n`` and hashes as ``missing``.
- A document is UTF-8 and at most the hard budget in bytes. What people write by hand is read, not
  refused (issue 32). Read line by line:
  * The head, never touched by an operation: a byte order mark, YAML front matter (``---`` on line
    1 up to a line ``---`` or ``...``), then any run of blank lines, HTML comment blocks and at most
    one level-1 heading, whatever its title (a changed H1 is kept; none is fine too).
  * The untitled unit (the preamble): everything from the first other line up to the first
    ``## `` line. It is a unit like a section, with the title ``""`` (label ``UNTITLED_LABEL``), so
    the Memory Agent sees it and changes it only by a decision that names its ref (replacing it
    with a titled section, or removing it); appends go after the last section, never into it.
  * Sections: a section runs from its ``## <title>`` line up to the next one or the end of the
    file. Two sections may share a title (a hand edit): each is its own unit, the n-th with
    ``occurrence`` n, a digest of ``title + NUL + n`` and the label ``Title (n)``.
  * Code fences and HTML comment blocks (a line opening with ``<!--``, up to the line holding
    ``-->``) are opaque: headings inside them are text. A fence opens on a line indented at most
    three spaces with three or more backticks or tildes (a backtick fence's info string has no
    backtick) and closes on a line of the same character, at least as long, with only spaces or
    tabs after it.
  * An empty or blank file is an empty document; the first append starts it with ``# <Title>``.
  What cm truly cannot read is ``INVALID_DOCUMENT`` (``DocumentError``: target, line, rule), because
  a line-based reader would disagree with what renders: a fence or comment never closed (an
  append would land inside it), a setext underline (a line of only ``=`` or ``-`` directly under
  a text line), a level-1 heading after other text, a level-2 heading line that is not exactly
  ``## <title>`` (indented, tab after the hashes, empty, closing ``#`` sequence, untrimmed or
  unsafe title), a carriage return that does not end a line, and bytes that are not UTF-8.
  Container blocks (lists, quotes) and other HTML are not modelled: they are body text.
- Line endings: LF and CRLF are both accepted, and kept byte for byte (files edited on Windows stay
  valid). New text is written with LF.
- New text (``put_section``) is held to the strict rules: the block alone, after a canonical H1,
  must read as exactly one section without comments' or fences' help.
- Normalising (``normalise``, for ``cm fix``): each rule violation is repaired where it is, and
  only there: a lone CR becomes a line end, an unclosed fence or comment is closed at the end of
  the file (which renders the same), a setext heading and a misplaced H1 or non-canonical H2
  become ``## <title>``; then repeated titles are numbered ``Title (n)``. Everything else,
  the head and the untitled unit included, is kept byte for byte.
- ``put_section`` renders ``## <title>\\n<body>`` plus a final newline if missing. That text alone
  must read as exactly one section, so a body cannot open a heading at level 1 or 2 (lower levels
  and fenced code are fine). With no ref it is appended (after a newline, if the file's last line
  has none); with a ref it replaces that section's bytes. ``remove_section`` deletes the bytes.
  Every other byte is untouched, and the result is re-parsed and held to the hard budget.
- Budgets: ``soft`` (default 8192) is advice for the maintainer and never enforced; ``hard``
  (default 16384, allowed 64..1 048 576, soft <= hard) is enforced on every parse and edit.

Section references are stable, unlike the reference's positional ``s1, s2, ...``: a ref is
``sec_`` + the first 12 hex digits of the unit's digest (sha256 of the UTF-8 title; ``""`` for the
untitled unit; ``title + NUL + n`` for the n-th section of a repeated title). Digests are unique
within a document, so a ref names one unit for as long as its title (and occurrence) is unchanged.
If two titles of one document share those 12 digits, both refs are lengthened to the shortest
prefix (12..64 digits) that tells them apart. A lookup accepts any ``sec_`` prefix of 12..64
lowercase hex digits that matches exactly one section's full title hash, so a ref handed out
earlier keeps working after a colliding section comes or goes; a prefix that matches several
sections is refused as ambiguous, never guessed. Renaming a section gives it a new ref, as it
gives it a new source-link key (``<target>:<sha256(title)>``).

Errors (``CmError``): ``INVALID_TARGET_REFERENCE``, ``INVALID_DOCUMENT`` (``DocumentError``), ``DOCUMENT_TOO_LARGE``,
``INVALID_SECTION_TITLE``, ``INVALID_SECTION_BODY``, ``DUPLICATE_SECTION_TITLE``, ``INVALID_BUDGET``.
Messages name lines and rules, never document text or titles. Stdlib only (read path).
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from cmrunner.core import scopes, textchars
from cmrunner.core.errors import CmError
from cmrunner.core.mdscan import (
    CLOSING_HASHES_RE,
    Violation,
    fence_opener,
    scan_block,
    scan_document,
    title_problem,
)

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

class DocumentError(CmError):
    """``INVALID_DOCUMENT`` for a file that breaks a rule: ``target``, ``lineno`` (1-based, 0 when
    the whole file is at fault) and ``rule`` say where and what, never the file's text."""

    def __init__(self, target: str, lineno: int, rule: str, message: str) -> None:
        super().__init__("INVALID_DOCUMENT", message)
        self.target = target
        self.lineno = lineno
        self.rule = rule


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


def check_title(title: object) -> str:
    """``title`` itself when it can be a section title; ``INVALID_SECTION_TITLE`` otherwise."""
    problem = title_problem(title)
    if problem is not None or not isinstance(title, str):
        raise CmError("INVALID_SECTION_TITLE", problem or "a section title must be a string")
    return title


class Section(NamedTuple):
    """One unit of a document: a ``## title`` section, or the untitled text before the first one
    (``title == ""``, the preamble). ``start``/``body_start``/``end`` are byte offsets into
    ``Document.data``; ``occurrence`` counts earlier sections of the same title plus one."""

    ref: str
    title: str
    digest: str
    start: int
    body_start: int
    end: int
    body: str
    occurrence: int = 1

    @property
    def untitled(self) -> bool:
        return self.title == ""

    @property
    def label(self) -> str:
        """How the unit is named to people and to the Memory Agent."""
        if self.untitled:
            return UNTITLED_LABEL
        return self.title if self.occurrence == 1 else f"{self.title} ({self.occurrence})"


UNTITLED_LABEL = "(text before the first section)"


def unit_digest(title: str, occurrence: int = 1) -> str:
    """The identity of a unit: sha256 of its title for the first section of a title (the preamble's
    title is ``""``), of ``title + NUL + n`` for the n-th duplicate (a title never holds a NUL)."""
    return title_digest(title if occurrence == 1 else f"{title}\0{occurrence}")


def unit_key(target: str, section: Section) -> str:
    """The source-link and history key of one unit: ``<target>:<digest>``."""
    return f"{target}:{section.digest}"


class Document:
    """A parsed, valid document. Immutable: edits return a new ``Document``."""

    __slots__ = ("target", "data", "exists", "budgets", "head_end", "sections", "_by_title")

    def __init__(self, target: str, data: bytes, exists: bool, budgets: Budgets,
                 head_end: int, sections: tuple[Section, ...]) -> None:
        self.target = target
        self.data = data
        self.exists = exists
        self.budgets = budgets
        self.head_end = head_end
        self.sections = sections
        by_title: dict[str, Section] = {}
        for s in sections:
            by_title.setdefault(s.title, s)
        self._by_title = by_title

    @property
    def preamble_end(self) -> int:
        """Where the head (byte order mark, front matter, H1, comments, blank lines) ends."""
        return self.head_end

    @property
    def preamble(self) -> Section | None:
        """The untitled text before the first section, if the document has any."""
        return self.sections[0] if self.sections and self.sections[0].untitled else None

    @property
    def titled(self) -> tuple[Section, ...]:
        return tuple(s for s in self.sections if not s.untitled)

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
        """The first section with that title (``""``: the preamble)."""
        return self._by_title.get(title)

    def named(self, name: str) -> Section | None:
        """The section ``name`` names as a title, a label (``Title (2)``) or a ``sec_`` ref; ``None`` if none."""
        found = self.by_title(name)
        if found is None:
            found = next((s for s in self.sections if s.label == name), None)
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
        raise DocumentError(target, 0, "not valid UTF-8",
                            f"{target} is not valid UTF-8; save the file as UTF-8 (cm cannot guess its encoding)") from None


def parse(target: str, content: str | bytes | None, budgets: Budgets = DEFAULT_BUDGETS) -> Document:
    """Parse a document's file content (``None`` for a missing file) and check every rule."""
    target_title(target)
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
        head_end, preamble, heads = scan_document(text)
    except Violation as v:
        raise DocumentError(target, v.line, v.rule, f"{target} line {v.line}: {v.rule}; "
                            f"`cm fix {target}` shows a normalised version") from None
    units: list[tuple[str, int, int, int, int]] = []  # title, occurrence, start, body_start, end
    if preamble is not None:
        units.append(("", 1, preamble[0], preamble[0], preamble[1]))
    seen: dict[str, int] = {}
    for i, (_, title, start, body_start) in enumerate(heads):
        seen[title] = seen.get(title, 0) + 1
        end = heads[i + 1][2] if i + 1 < len(heads) else len(data)
        units.append((title, seen[title], start, body_start, end))
    digests = [unit_digest(title, n) for title, n, _, _, _ in units]
    refs = _refs(digests)
    found = tuple(Section(refs[i], title, digests[i], start, body_start, end,
                          data[body_start:end].decode("utf-8"), n)
                  for i, (title, n, start, body_start, end) in enumerate(units))
    return Document(target, data, exists, budgets, head_end, found)


def problem(target: str, content: str | bytes | None, budgets: Budgets = DEFAULT_BUDGETS) -> CmError | None:
    """Why ``content`` is not a document cm can work with (its ``CmError``), or None."""
    try:
        parse(target, content, budgets)
    except CmError as exc:
        if exc.code == "INVALID_TARGET_REFERENCE":
            raise
        return exc
    return None


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
        _, heads = scan_block(f"{h1}\n\n{block}", h1)
    except Violation as v:
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
    CRLF), e.g. a version from history, so its bytes come back unchanged. The title ``""`` puts
    back the untitled text before the first section, at its place."""
    if title == "":
        return _put_preamble(doc, ref, text)
    check_title(title)
    if not (text.startswith(f"## {title}\n") or text.startswith(f"## {title}\r\n")):
        raise CmError("INVALID_SECTION_BODY", "a section's text must start with its own '## ' heading line")
    return _put(doc, ref, title, text if text.endswith("\n") else text + "\n")


def _put_preamble(doc: Document, ref: str | None, text: str) -> Document:
    if not text.endswith("\n"):
        text += "\n"
    encoded = text.encode("utf-8")
    if ref is not None:
        replaced = doc.section(ref)
        start, end = replaced.start, replaced.end
    elif doc.preamble is not None:
        raise CmError("DUPLICATE_SECTION_TITLE", f"{doc.target} already has text before its first section")
    else:
        start = end = doc.head_end
    prefix = doc.data[:start]
    if prefix and not prefix.endswith(b"\n"):
        prefix += b"\n"
    new = parse(doc.target, prefix + encoded + doc.data[end:], doc.budgets)
    if new.preamble is None or new.data[new.preamble.start:new.preamble.end] != encoded:
        raise CmError("INVALID_SECTION_BODY", "that text does not read as the text before the first section")
    return new


def _put(doc: Document, ref: str | None, title: str, block: str) -> Document:
    encoded = _check_block(doc, block)
    existing = doc.by_title(title)
    if ref is None:
        if existing is not None:
            raise CmError("DUPLICATE_SECTION_TITLE",
                          f"{doc.target} already has a section with that title; replace it by its ref")
        prefix = doc.data
        if not prefix.strip():
            prefix = missing_document_text(doc.target).encode("utf-8")  # an emptied file starts afresh
        elif not prefix.endswith(b"\n"):
            prefix += b"\n"
        data = prefix + encoded
    else:
        replaced = doc.section(ref)
        if existing is not None and existing.title != replaced.title:
            raise CmError("DUPLICATE_SECTION_TITLE",
                          f"another section of {doc.target} already has that title; choose another title")
        data = doc.data[:replaced.start] + encoded + doc.data[replaced.end:]
    return parse(doc.target, data, doc.budgets)


def remove_section(doc: Document, ref: str) -> Document:
    """Delete the section ``ref`` names; every other byte is kept."""
    removed = doc.section(ref)
    return parse(doc.target, doc.data[:removed.start] + doc.data[removed.end:], doc.budgets)


def _heading_text(line: str) -> str:
    """The words of a heading line as CommonMark reads them, made a valid section title."""
    words = line.strip().lstrip("#").replace("\t", " ")
    words = CLOSING_HASHES_RE.sub("", words.strip()).strip()
    words = " ".join("".join(c for c in words if textchars.find_unsafe(c) is None).split())
    return words or "Untitled"


def normalise(target: str, content: str | bytes, budgets: Budgets = DEFAULT_BUDGETS) -> str:
    """``content`` rewritten into a document every rule accepts, changing only what breaks one
    (module contract, "Normalising"); the result parses. ``INVALID_DOCUMENT`` for a file that is
    not UTF-8 (its encoding cannot be guessed), ``DOCUMENT_TOO_LARGE`` over the hard budget."""
    target_title(target)
    text, _ = _decode(target, content)
    text = re.sub(r"\r(?!\n)", "\n", text)  # CommonMark already reads a lone CR as a line ending
    lines = text.splitlines(keepends=True)
    for _ in range(2 * len(lines) + 4):
        try:
            scan_document("".join(lines))
            break
        except Violation as v:
            at = v.line - 1
            ending = "\r\n" if lines and lines[-1].endswith("\r\n") else "\n"
            if v.kind in ("h1", "h2"):
                eol = lines[at][len(lines[at].rstrip("\r\n")):] or ending
                lines[at] = f"## {_heading_text(lines[at])}{eol}"
            elif v.kind == "setext":
                eol = lines[at - 1][len(lines[at - 1].rstrip("\r\n")):] or ending
                lines[at - 1] = f"## {_heading_text(lines[at - 1])}{eol}"
                del lines[at]
            elif v.kind in ("fence", "comment"):
                if lines and not lines[-1].endswith("\n"):
                    lines[-1] += ending
                opener = fence_opener(lines[at].rstrip("\r\n"))
                lines.append((opener[0] * opener[1] if v.kind == "fence" and opener else "-->") + ending)
            else:  # pragma: no cover - every rule _scan_document raises has a kind above
                raise CmError("INVALID_DOCUMENT", f"{target} line {v.line}: {v.rule}; fix the file by hand") from None
    text = "".join(lines)
    doc = parse(target, text, Budgets(MAX_HARD_BUDGET, MAX_HARD_BUDGET))
    taken = {s.title for s in doc.titled}
    names: list[tuple[Section, str]] = []
    for s in doc.titled:
        if s.occurrence == 1:
            continue
        n = s.occurrence
        while f"{s.title} ({n})" in taken:
            n += 1
        taken.add(f"{s.title} ({n})")
        names.append((s, f"## {s.title} ({n})"))
    raw = doc.data
    for s, heading in reversed(names):  # from the end, so earlier offsets stay valid
        old = raw[s.start:s.body_start]
        raw = raw[:s.start] + heading.encode("utf-8") + old[len(old.rstrip(b"\r\n")):] + raw[s.body_start:]
    text = raw.decode("utf-8")
    return parse(target, text, budgets).render()


def salvage(target: str, content: bytes) -> Document:
    """A file cm cannot parse, as one untitled unit that covers every byte: what section history
    keeps of it when ``cm fix`` replaces it. Never edited, never shown to an agent."""
    target_title(target)
    text, data = _decode(target, content)
    digest = unit_digest("")
    units = (Section(REF_PREFIX + digest[:REF_MIN_HEX], "", digest, 0, 0, len(data), text),) if data.strip() else ()
    return Document(target, data, True, Budgets(MAX_HARD_BUDGET, MAX_HARD_BUDGET), 0, units)
