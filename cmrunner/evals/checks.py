"""The deterministic checks of a world, evaluated on the Markdown it left behind.

Contract:
- ``Memory.read(paths, projects)`` takes the finished temporary home's documents (profile,
  preferences, every project document) as sections, and its receipts; ``projects`` maps a world's
  project ids to the registered ids.
- ``evaluate(check, memory, injected)`` returns one ``Outcome``: passed or not, a one-line
  ``detail`` and, on failure, ``quote``: the offending section (document › heading: body,
  shortened), or what the document holds when an expected section is missing.
  ``injected`` maps a world project id (``None``: the global folder) to the memory a new session
  there received. Judge checks are not evaluated here (``judge.py``).
Patterns match case-insensitively, against a section's heading and body.
"""

from __future__ import annotations

import json
import os
import re
from typing import NamedTuple

from cmrunner.core import sections as sections_mod
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.evals import world as world_mod

QUOTE_LIMIT = 240
GLOBAL_TARGETS = ("profile", "preferences")
# What marks a value on its line as the past: a marker before it ("switched from Vim", "used to live
# in Lisbon") with no turn to the present in between ("… to Helix", "now", "with"), or a marker right
# after it in the same clause ("Vim, no longer used", "Lisbon until May").
PAST_BEFORE = re.compile(r"\b(?:from|previously|formerly|used to|no longer|not any ?more|instead of|replac\w*|"
                         r"switch\w*|moved|migrated|was|were)\b", re.I)
PRESENT = re.compile(r"\b(?:to|now|currently|with|by|then)\b", re.I)
PAST_AFTER = re.compile(r"\b(?:previously|formerly|no longer|not any ?more|until|before|replaced|dropped)\b", re.I)

class Section(NamedTuple):
    target: str  # as the world names it: profile, preferences or project:<world id>
    title: str
    body: str

    def quote(self) -> str:
        body = " ".join(self.body.split())
        text = f"{self.target} › {self.title}: {body}"
        return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 1] + "…"

    def matches(self, pattern: str) -> bool:
        return re.search(pattern, f"{self.title}\n{self.body}", re.I) is not None


class Outcome(NamedTuple):
    passed: bool
    detail: str
    quote: str | None = None


class Memory:
    """The documents of a finished world, by the world's own target names."""

    def __init__(self, sections: list[Section], changed_documents: int) -> None:
        self.sections = sections
        self.changed_documents = changed_documents  # document changes over every receipt

    @classmethod
    def read(cls, paths: DataPaths, projects: dict[str, str]) -> Memory:
        named = {"profile": "profile", "preferences": "preferences"}
        named.update({f"project:{real}": f"project:{wid}" for wid, real in projects.items()})
        found: list[Section] = []
        for target, label in named.items():
            path = paths.document(target)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as handle:
                data = handle.read()
            try:
                doc = sections_mod.parse(target, data, sections_mod.Budgets(hard=sections_mod.MAX_HARD_BUDGET))
                found += [Section(label, s.title, s.body) for s in doc.sections]
            except CmError:  # not canonical any more: judge the whole text as one section
                found.append(Section(label, "(whole document)", data.decode("utf-8", "replace")))
        changed = 0
        if os.path.isdir(paths.receipts):
            for name in sorted(os.listdir(paths.receipts)):
                with open(os.path.join(paths.receipts, name), encoding="utf-8") as handle:
                    changed += len(json.load(handle).get("documents") or [])
        return cls(found, changed)

    def where(self, where: str) -> list[Section]:
        if where == "everywhere":
            return list(self.sections)
        if where == "global":
            return [s for s in self.sections if s.target in GLOBAL_TARGETS]
        return [s for s in self.sections if s.target == where]

    def listing(self, where: str) -> str:
        titles = [f"{s.target} › {s.title}" for s in self.where(where)]
        return ("holds: " + "; ".join(titles)) if titles else f"{where} holds no section"


def _absent(memory: Memory, where: str, pattern: str) -> Outcome:
    hits = [s for s in memory.where(where) if s.matches(pattern)]
    if hits:
        return Outcome(False, f"/{pattern}/ found in {where}", hits[0].quote())
    return Outcome(True, f"/{pattern}/ not in {where}")


def _as_past(line: str, found: re.Match[str]) -> bool:
    before = line[:found.start()]
    markers = list(PAST_BEFORE.finditer(before))
    if markers and not PRESENT.search(before[markers[-1].end():]):
        return True
    clause = re.split(r"[.;,)]", line[found.end():], maxsplit=1)[0]
    return PAST_AFTER.search(clause) is not None


def _not_current(memory: Memory, pattern: str) -> Outcome:
    for section in memory.sections:
        for line in (section.title, *section.body.splitlines()):
            if any(not _as_past(line, found) for found in re.finditer(pattern, line, re.I)):
                return Outcome(False, f"/{pattern}/ is stated as current", section.quote())
    return Outcome(True, f"/{pattern}/ is nowhere stated as current")


def _in_injection(text: str, pattern: str) -> str | None:
    found = re.search(pattern, text, re.I)
    if found is None:
        return None
    line_start = text.rfind("\n", 0, found.start()) + 1
    line_end = text.find("\n", found.end())
    line = text[line_start:line_end if line_end >= 0 else len(text)].strip()
    return line[:QUOTE_LIMIT]


def evaluate(check: world_mod.Check, memory: Memory, injected: dict[str | None, str]) -> Outcome:
    if isinstance(check, world_mod.Present):
        candidates = [s for s in memory.where(check.where) if check.heading is None or re.search(check.heading, s.title, re.I)]
        if any(s.matches(check.pattern) for s in candidates):
            return Outcome(True, f"/{check.pattern}/ found in {check.where}")
        quote = candidates[0].quote() if candidates and check.heading else memory.listing(check.where)
        under = f" under a heading /{check.heading}/" if check.heading else ""
        return Outcome(False, f"/{check.pattern}/ missing from {check.where}{under}", quote)
    if isinstance(check, world_mod.Absent):
        return _absent(memory, check.where, check.pattern)
    if isinstance(check, world_mod.AbsentEverywhere):
        return _absent(memory, "everywhere", check.pattern)
    if isinstance(check, world_mod.NotCurrent):
        return _not_current(memory, check.pattern)
    if isinstance(check, world_mod.NotGlobal):
        return _absent(memory, "global", check.pattern)
    if isinstance(check, world_mod.NothingWritten):
        if memory.changed_documents:
            written = memory.sections[0].quote() if memory.sections else None
            return Outcome(False, f"{memory.changed_documents} document change(s) were committed", written)
        return Outcome(True, "no commit changed a document")
    if isinstance(check, (world_mod.Injected, world_mod.NotInjected)):
        folder = f"project {check.project}" if check.project else "the global folder"
        line = _in_injection(injected.get(check.project, ""), check.pattern)
        if isinstance(check, world_mod.Injected):
            if line is None:
                return Outcome(False, f"a new session in {folder} did not receive /{check.pattern}/",
                               memory.listing("everywhere"))
            return Outcome(True, f"a new session in {folder} received /{check.pattern}/")
        if line is not None:
            return Outcome(False, f"a new session in {folder} received /{check.pattern}/", line)
        return Outcome(True, f"a new session in {folder} did not receive /{check.pattern}/")
    raise ValueError(f"{check.kind} checks are not deterministic")
