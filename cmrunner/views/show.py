"""``cm show``: the memory directory and exactly what consumers receive.

Contract: the contexts are decided exactly as for a consumer: ``global`` when
``disclosure.allowedScopes`` allows it, plus the registered project of ``--workspace`` when its
``project:<id>`` is allowed. The body is ``consumer.read(...).text``, byte for byte what MCP
``memory_read`` returns as text for the same contexts. Nothing is created, repaired or locked, and
SQLite is never opened. Notes explain contexts that are left out, so an empty result is not
mistaken for a bug, and name sections withheld because they look like secrets (``withhold``;
the deep scan runs here, nothing is written). The core never prints; the CLI decides plain or
styled output.
"""

from __future__ import annotations

from cmrunner.capture import waiting
from cmrunner.core import config as config_mod, workspace
from cmrunner.core.home import DataPaths
from cmrunner.reading import consumer


class ShowReport:
    __slots__ = ("memory_dir", "contexts", "notes", "text", "empty")

    def __init__(self, memory_dir: str, contexts: list[str], notes: list[str], text: str, empty: bool) -> None:
        self.memory_dir = memory_dir
        self.contexts = contexts
        self.notes = notes
        self.text = text
        self.empty = empty

    def as_json(self) -> dict:
        """``cm show --json``: the same fields; ``text`` is byte for byte what consumers receive."""
        return {"memoryDirectory": self.memory_dir, "contexts": self.contexts, "notes": self.notes,
                "empty": self.empty, "text": self.text}


def gather(home: str, workspace_path: str | None) -> ShowReport:
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    allowed = cfg.allowed_scopes
    contexts: list[str] = []
    notes: list[str] = []
    if "global" in allowed:
        contexts.append("global")
    else:
        notes.append("global is not in disclosure.allowedScopes: consumers receive no Profile or Preferences")
    if workspace_path is not None:
        project = workspace.resolve(paths, workspace_path)
        if project.scope in allowed:
            contexts.append(project.scope)
        else:
            notes.append(f"{project.scope} ({project.name}) is not in disclosure.allowedScopes: consumers do not "
                         "receive its document")
    result = consumer.read(paths, contexts, home, deep=True, waiting=waiting.turns_in(paths, contexts))
    for held in result.withheld:
        where = f"section '{held.title}'" if held.title else f"section {held.unit}"
        notes.append(f"{where} of {held.target} was withheld ({', '.join(held.rules)}): see `cm secrets list`")
    return ShowReport(paths.memory, contexts, notes, result.text, result.empty)
