"""What a memory consumer receives: the authorized documents of some contexts, read and rendered.

Contract:
- One function serves every explicit reader (MCP ``memory_read`` and resources, ``cm show``), so
  ``cm show`` prints exactly what those consumers receive.
- Reading is ``reader.read_memory``: lock-free file reads of published Markdown, never SQLite,
  never creating or repairing a file. The caller decides the contexts (``global`` and/or
  ``project:<id>``) after authorization; this module reads nothing else.
- Every target of every context is reported, a missing file as an empty document. A document is
  empty when it holds nothing but its H1 line; only non-empty documents are rendered, so an empty
  read renders the reader's explicit "nothing is stored" block and consumers do not invent facts.
- Secrets are withheld as ``reader.read_memory`` reads (see ``withhold``); ``withheld`` lists the
  sections delivered as placeholders. ``home`` brings the allow-list; ``deep`` adds the maintained
  detector when the findings cache has no entry (the MCP server and ``cm show`` are not hooks).
- A document that cannot be read safely (a link, not a file, not UTF-8) fails the whole read with
  ``MEMORY_UNAVAILABLE``: a partial read must never pass for a complete one.
Stdlib only.
"""

from __future__ import annotations

from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.reading import reader

# Documents are kept at most 16 KiB each by the Writer; this only bounds a hand-edited outlier so
# that the rendered text still fits one 1 MiB stdio message.
READ_LIMIT = 1 << 20
EMPTY_GUIDANCE = "Nothing is stored for these contexts: do not invent facts about the user."


def targets_of(context: str) -> list[str]:
    """The documents a context discloses: Profile and Preferences for ``global``, else the project's."""
    return ["profile", "preferences"] if context == "global" else [context]


def is_empty(markdown: str) -> bool:
    """True when the document has nothing but (at most) its H1 line."""
    lines = [line for line in markdown.splitlines() if line.strip()]
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return not lines


class ConsumerRead:
    """One read: the contexts, per-target documents, the empty flag and the rendered text."""

    __slots__ = ("contexts", "documents", "empty", "text", "withheld")

    def __init__(self, contexts: list[str], documents: list[dict], empty: bool, text: str,
                 withheld: list | None = None) -> None:
        self.withheld = withheld or []
        self.contexts = contexts
        self.documents = documents    # [{target, content, bytes, empty}]
        self.empty = empty
        self.text = text

    def as_json(self) -> dict:
        body: dict = {"contexts": list(self.contexts), "documents": [dict(d) for d in self.documents],
                      "empty": self.empty}
        if self.empty:
            body["guidance"] = EMPTY_GUIDANCE
        return body


def read(paths: DataPaths, contexts: list[str], home: str | None = None, deep: bool = False,
         waiting: int | None = None) -> ConsumerRead:
    """Read and render the documents of ``contexts`` (already authorized by the caller); ``waiting``
    is the caller's count of their turns not yet processed, for the block's freshness line."""
    view = reader.read_memory(paths, contexts, home, deep)
    if view.errors:
        raise CmError(
            "MEMORY_UNAVAILABLE",
            "a memory document cannot be read safely (" + ", ".join(view.errors)
            + "); ask the user to run `cm status` and fix the memory directory",
        )
    found = dict(view.documents)
    documents = []
    shown: list[tuple[str, str]] = []
    for context in contexts:
        for target in targets_of(context):
            content = found.get(target, "")
            empty = is_empty(content)
            documents.append({"target": target, "content": content, "bytes": len(content.encode("utf-8")),
                              "empty": empty})
            if not empty:
                shown.append((target, content))
    text, _warning = reader.render_block(reader.MemoryView(list(contexts), shown, [], updated=view.updated), READ_LIMIT,
                                         waiting)
    return ConsumerRead(list(contexts), documents, all(d["empty"] for d in documents), text, view.withheld)
