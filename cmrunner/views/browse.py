"""Search / View Memory: read-only paging and local keyword search of authorized documents.

Contract:
- The documents offered are exactly what a consumer may read: Profile and Preferences when
  ``global`` is in ``disclosure.allowedScopes``, and each registered project whose
  ``project:<id>`` is. Contents come from ``consumer.read`` (lock-free file reads of published
  Markdown); SQLite is never opened and nothing is created or repaired, so browsing an install
  that has no data root yet shows the empty state.
- ``search`` is plain local text matching: every whitespace-separated term must occur in a line
  (case-insensitive). It adds no model call, index or ranking: hits are listed in document order.
- ``page`` cuts a document into fixed-size pages of lines; a page number out of range is clamped.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmrunner.core import config as config_mod, projects
from cmrunner.core.home import DataPaths
from cmrunner.reading import consumer

PAGE_LINES = 18
MAX_HITS = 200


@dataclass(frozen=True)
class Document:
    target: str
    title: str
    content: str
    empty: bool

    @property
    def lines(self) -> list[str]:
        # Lines as the section model counts them (LF or CRLF), not str.splitlines(): that also
        # breaks on U+2028, FS/GS/RS and form feeds, which the screen must show, not obey.
        lines = [line[:-1] if line.endswith("\r") else line for line in self.content.split("\n")]
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        return lines


@dataclass(frozen=True)
class Hit:
    target: str
    line: int
    text: str


def documents(home: str) -> list[Document]:
    """The authorized documents in consumer order (a missing file is an empty document)."""
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    allowed = cfg.allowed_scopes
    contexts = ["global"] if "global" in allowed else []
    titles = {"profile": "Profile", "preferences": "Preferences"}
    for project in projects.load(paths):
        if project.scope in allowed:
            contexts.append(project.scope)
            titles[project.scope] = f"Project: {project.name}"
    read = consumer.read(paths, contexts)
    return [Document(d["target"], titles.get(d["target"], d["target"]), d["content"], d["empty"])
            for d in read.documents]


def page_count(document: Document, page_lines: int = PAGE_LINES) -> int:
    return max(1, -(-len(document.lines) // page_lines))


def page(document: Document, number: int, page_lines: int = PAGE_LINES) -> tuple[int, list[str]]:
    """The clamped page number and its lines."""
    number = min(max(0, number), page_count(document, page_lines) - 1)
    start = number * page_lines
    return number, document.lines[start:start + page_lines]


def search(docs: list[Document], query: str) -> list[Hit]:
    """Lines that contain every term of ``query`` (case-insensitive), in document order."""
    terms = [t.casefold() for t in query.split()]
    if not terms:
        return []
    hits: list[Hit] = []
    for doc in docs:
        for number, line in enumerate(doc.lines):
            folded = line.casefold()
            if all(term in folded for term in terms):
                hits.append(Hit(doc.target, number, line.strip()))
                if len(hits) >= MAX_HITS:
                    return hits
    return hits
