"""Per-section identity of an imported text: which sections a changed file must send again.

Contract:
- ``sections(text, blocks)`` cuts a normalised Markdown text at every top-level heading (the
  block index of ``importer.blocks_of``); text before the first heading is a section with an empty
  heading path. A section's identity is the sha256 of its text with surrounding blank lines
  trimmed; its place is its heading path, its own heading last. The sections' lines cover the text.
- ``classify(sections, known)`` compares them with the source's sections as last imported
  (``capture.importsections.known``): a section whose digest was current then is ``unchanged``
  wherever it now sits (a move sends nothing); one whose place held other text then is
  ``edited`` (also a section reverted to earlier text: the last import held the other text); any
  other is ``added``. A section current then that is neither in the text nor at a place still in
  it is ``removed``: reported, never sent, never forgotten (an import never forgets). When anything
  changed, an unchanged section whose last sending never reached memory (``lost``: its part was
  cancelled or quarantined) is ``resent`` with the changes, as a changed file was sent whole before
  sections existed; with no change, nothing is sent (the same text's outcome is final).
- ``changed_text(text, sections, delta)`` is the text to send for an update: the edited and added
  sections in file order, each whole, with the file's block index entries re-based onto it; every
  block keeps its heading path from the file (the context above a section that was not sent), and
  each sent section's first block says ``"change": "edited" | "added" | "resent"``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

UNCHANGED, EDITED, ADDED, RESENT = "unchanged", "edited", "added", "resent"


@dataclass(frozen=True, slots=True)
class Section:
    """One section: its identity, its place in the file and its 0-based line span ``[start, end)``."""

    digest: str
    heading: list[str]
    start: int
    end: int

    @property
    def place(self) -> str:
        return json.dumps(self.heading, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Delta:
    """How a text differs from its source's last import (see module contract)."""

    total: int
    changes: dict[int, str]                  # section index -> edited | added | resent (absent: unchanged)
    removed: list[list[str]] = field(default_factory=list)   # heading paths of removed sections

    @property
    def edited(self) -> int:
        return sum(1 for c in self.changes.values() if c == EDITED)

    @property
    def added(self) -> int:
        return sum(1 for c in self.changes.values() if c == ADDED)

    @property
    def resent(self) -> int:
        return sum(1 for c in self.changes.values() if c == RESENT)

    @property
    def unchanged(self) -> int:
        return self.total - len(self.changes)


def sections(text: str, blocks: list[dict]) -> list[Section]:
    """The text's sections in file order (see module contract)."""
    lines = text.split("\n")
    heads = [b for b in blocks if b["kind"] == "heading"]
    out: list[Section] = []
    starts = [b["lines"][0] - 1 for b in heads]
    preamble_end = starts[0] if starts else len(lines)
    if "\n".join(lines[:preamble_end]).strip():
        out.append(_section(lines, [], 0, preamble_end))
    for i, block in enumerate(heads):
        end = starts[i + 1] if i + 1 < len(heads) else len(lines)
        title = lines[starts[i]].strip().strip("#").strip()
        out.append(_section(lines, [*block["headingPath"], title], starts[i], end))
    return out


def _section(lines: list[str], heading: list[str], start: int, end: int) -> Section:
    body = "\n".join(lines[start:end]).strip()
    return Section(hashlib.sha256(body.encode("utf-8")).hexdigest(), heading, start, end)


def classify(current: list[Section], known: list[tuple[str, str, bool]], lost: frozenset[str] = frozenset()) -> Delta:
    """The delta of ``current`` against the source's known sections ((digest, place, current));
    ``lost``: digests whose last sending never reached memory (see module contract)."""
    last = [(digest, place) for digest, place, is_current in known if is_current]
    last_digests = {digest for digest, _ in last}
    last_places = {place for _, place in last}
    changes: dict[int, str] = {}
    for index, section in enumerate(current):
        if section.digest in last_digests:
            continue
        changes[index] = EDITED if section.place in last_places else ADDED
    if changes:
        for index, section in enumerate(current):
            if index not in changes and section.digest in lost:
                changes[index] = RESENT
    digests = {s.digest for s in current}
    places = {s.place for s in current}
    removed = [json.loads(place) for digest, place in last if digest not in digests and place not in places]
    return Delta(len(current), changes, removed)


def changed_text(text: str, current: list[Section], delta: Delta, blocks: list[dict]) -> tuple[str, list[dict]]:
    """The edited and added sections' text and its block index (see module contract)."""
    lines = text.split("\n")
    out: list[str] = []
    index: list[dict] = []
    for number in sorted(delta.changes):
        section = current[number]
        if out and out[-1].strip():
            out.append("")  # keep two sections apart as separate blocks
        offset = len(out) - section.start
        first = True
        for block in blocks:
            start = block["lines"][0] - 1
            if section.start <= start < section.end:
                moved = {**block, "lines": [block["lines"][0] + offset, block["lines"][1] + offset]}
                if first:
                    moved["change"] = delta.changes[number]
                    first = False
                index.append(moved)
        out.extend(lines[section.start:section.end])
    return "\n".join(out), index
