"""The read path withholds secrets: a section holding one leaves cm as a short placeholder.

Contract
- A document is cut into units: unit 0 is everything before the first level-2 heading line
  (``## …`` outside a code fence), then one unit per level-2 section (its heading line and body).
  The cut is this module's own, so it also works for a hand-edited document that
  ``sections.parse`` would refuse; the findings cache stores unit indexes of this same cut.
- ``scan_units(markdown, deep)`` returns the ``secret.*`` findings of a document as
  ``UnitFinding(unit, rule, fingerprint, title_shown)``: the whole document is scanned first, and
  only if it holds something is each unit scanned to place it. The scanner never joins lines, so a
  finding lies within one unit; one that no single unit holds (a private key block that a heading
  line cuts) belongs to every unit of the shortest run of neighbouring units that holds it (the
  whole document if none). ``title_shown`` is False when the heading line takes part in the
  finding: then the placeholder does not repeat the heading.
  Personal-data rules (e-mail, phone, ...) are the Writer's concern and are not withheld here.
- ``document(markdown, target, home, paths, deep)`` is what a reader delivers: the findings come
  from the findings cache (``_cache``, keyed by the document's sha256) when it has them,
  else from a light scan (``deep`` adds the maintained detector; the hook path never asks for
  it); fingerprints on the home's allow-list are dropped; every unit with a finding left is
  replaced by a placeholder naming the document, the section (its heading, or its position when the
  heading is withheld too) and the rules, and saying how to fix it. The fingerprint is not in the
  placeholder (agents read it, and a fingerprint of a short password can be brute-forced); the
  user sees it in ``cm secrets list``. Nothing is written: the Markdown file is never rewritten.
Stdlib only and light (the SessionStart hook runs it): ``safety`` is imported only on a cache miss.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

from cmrunner.core import scopes
from cmrunner.core.home import DataPaths
from cmrunner.secrets import _cache, allowlist

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_H2 = re.compile(r"## ")
_MAX_RUN = 4


class UnitFinding(NamedTuple):
    unit: int
    rule: str
    fingerprint: str
    title_shown: bool


class Withheld(NamedTuple):
    """One withheld unit, for reports: where, which rules and fingerprints (never the value)."""

    target: str
    unit: int
    title: str | None   # None when the heading is withheld too, or for the text before the first section
    rules: tuple[str, ...]
    fingerprints: tuple[str, ...]


def units(markdown: str) -> list[str]:
    """The document cut into units (see the contract); ``"".join(units(m)) == m``."""
    out: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        opener = _FENCE.match(line)
        if fence is None and _H2.match(line):
            out.append("".join(current))
            current = []
        if opener is not None:
            marker = opener.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not line[opener.end():].strip():
                fence = None
        current.append(line)
    out.append("".join(current))
    return out


def _secret_marks(text: str, deep: bool) -> set[tuple[str, str]]:
    from cmrunner.secrets import safety

    return {(rule, safety.fingerprint(rule, core)) for _, rule, core in safety.findings(text, deep)
            if rule in safety.SECRET_RULES}


def scan_units(markdown: str, deep: bool = False) -> list[UnitFinding]:
    whole = _secret_marks(markdown, deep)
    if not whole:
        return []
    parts = units(markdown)
    found: list[UnitFinding] = []
    placed: set[tuple[str, str]] = set()
    for index, part in enumerate(parts):
        marks = _secret_marks(part, deep) if part else set()
        if not marks:
            continue
        heading, _, body = part.partition("\n") if index else ("", "", part)
        in_body = _secret_marks(body, deep) if index else marks
        for rule, mark in sorted(marks):
            found.append(UnitFinding(index, rule, mark, (rule, mark) in in_body))
        placed |= marks
    for rule, mark in sorted(whole - placed):
        run = _smallest_run(parts, rule, mark, deep)
        found += [UnitFinding(index, rule, mark, False) for index in run]
    return sorted(set(found))


def _smallest_run(parts: list[str], rule: str, mark: str, deep: bool) -> range:
    for size in range(2, min(len(parts), _MAX_RUN) + 1):  # a key split in k pieces spans at most k units
        for start in range(0, len(parts) - size + 1):
            if (rule, mark) in _secret_marks("".join(parts[start:start + size]), deep):
                return range(start, start + size)
    return range(len(parts))


def _title(part: str) -> str:
    return part.partition("\n")[0][3:].strip()


def placeholder(target: str, index: int, title: str | None, rules: tuple[str, ...]) -> str:
    where = "the text before the first section" if index == 0 else (
        f"section '{title}'" if title is not None else f"section {index} (its heading is withheld too)")
    plural = "s" if len(rules) > 1 else ""
    return (f"[cm withheld {where} of {scopes.document_name(target)}: it holds what looks like a secret "
            f"(rule{plural} {', '.join(rules)}); remove it from the file, or if it is not a secret run "
            f"`cm secrets list` and `cm secrets allow <fingerprint>`]")


def apply(markdown: str, target: str, found: list[UnitFinding],
          allowed: frozenset[str]) -> tuple[str, list[Withheld]]:
    """``markdown`` with every unit that holds a non-allowed finding replaced by its placeholder."""
    live = [f for f in found if f.fingerprint not in allowed]
    if not live:
        return markdown, []
    parts = units(markdown)
    withheld: list[Withheld] = []
    for index in sorted({f.unit for f in live if f.unit < len(parts)}):
        mine = [f for f in live if f.unit == index]
        rules = tuple(sorted({f.rule for f in mine}))
        shown = index > 0 and all(f.title_shown for f in mine)
        title = _title(parts[index]) if shown else None
        text = placeholder(target, index, title, rules)
        if index == 0:
            first = parts[0].partition("\n")[0]
            head = first + "\n\n" if first.startswith("# ") and first[2:].strip() in ("Profile", "Preferences",
                                                                                       "Project") else ""
            parts[0] = f"{head}{text}\n\n"
        else:
            heading = parts[index].partition("\n")[0] if shown else "## (withheld heading)"
            parts[index] = f"{heading}\n{text}\n" + ("\n" if parts[index].endswith("\n\n") else "")
        withheld.append(Withheld(target, index, title, rules, tuple(sorted({f.fingerprint for f in mine}))))
    return "".join(parts), withheld


def findings_for(markdown: str, paths: DataPaths | None, deep: bool = False) -> list[UnitFinding]:
    """The cached findings of this exact document, else a fresh scan (nothing is written)."""
    digest = hashlib.sha256(markdown.encode("utf-8")).hexdigest()
    cached = _cache.lookup(paths, digest) if paths is not None else None
    if cached is not None:
        return [UnitFinding(*entry) for entry in cached]
    return scan_units(markdown, deep)


def document(markdown: str, target: str, home: str | None, paths: DataPaths | None,
             deep: bool = False) -> tuple[str, list[Withheld]]:
    """What a reader delivers of one document, and what was withheld (see the contract)."""
    found = findings_for(markdown, paths, deep)
    if not found:
        return markdown, []
    return apply(markdown, target, found, allowlist.load(home) if home else frozenset())


def refresh(paths: DataPaths, write: bool = True) -> list[tuple[str, str, list[UnitFinding]]]:
    """Deep-scan every current memory document the findings cache has no entry for, rewrite the
    cache with entries for the current documents only (so it never grows), and return
    ``(target, markdown, findings)`` for every current document.

    Heavy (the deep scan): called off the hot path, by the drain (at start and end), ``cm flush``
    and ``cm secrets list``; ``cm status`` and ``cm doctor`` pass ``write=False`` because they
    promise to create nothing. Concurrent refreshes are harmless: entries are deterministic."""
    known = _cache.load(paths)
    fresh: dict[str, list] = {}
    report = []
    for target, markdown in _cache.current_documents(paths):
        digest = hashlib.sha256(markdown.encode("utf-8")).hexdigest()
        entry = _cache.entry(known, digest)
        if entry is None:
            entry = [(f.unit, f.rule, f.fingerprint, f.title_shown) for f in scan_units(markdown, deep=True)]
        fresh[digest] = [list(item) for item in entry]
        report.append((target, markdown, [UnitFinding(*item) for item in entry]))
    if write and fresh != known:
        _cache.save(paths, fresh)
    return report
