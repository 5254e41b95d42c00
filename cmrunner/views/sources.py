"""Where a memory came from, in the user's words: plain source labels and trimmed quotes for
``cm history`` and ``cm why`` (and the terminal UI's History, which shows the same lines).

Contract:
- ``place(client, session, at, file_name)`` names a version's or an observation's origin as a person
  reads it: ``imported from notes.md``, ``Claude Code session, 2026-12-07 14:02 UTC``, ``Adjust
  Memory, …``, ``MCP client <id>, …``. It never shows a session key, an import namespace or an
  install id; a client it does not know is named as recorded.
- ``imported(text)`` reads a ``cm import`` observation (the JSON envelope ``manage.importer`` builds)
  and returns ``(file name, the imported text)``, or ``None`` for any other text: the envelope's
  digest, block index and ids are cm's bookkeeping, never the user's words.
- ``quote(text)`` is the text trimmed: surrounding space dropped, runs of white space folded to one,
  cut at ``QUOTE_CHARS`` with an ellipsis. Nothing else changes.
Stdlib only; reads nothing itself.
"""

from __future__ import annotations

import datetime
import json

QUOTE_CHARS = 240

# A capturing client's id (the part of an agent instance before ``:``) as people call it.
CLIENTS = {"codex": "Codex CLI", "claude-code": "Claude Code", "gemini": "Gemini CLI", "pi": "Pi",
           "chatgpt-work": "ChatGPT Desktop", "cm-adjust": "Adjust Memory"}
# An observation's source name, for evidence captured before agent instances were recorded.
SOURCES = {"codex_user_delivery": "codex", "claude_user_prompt": "claude-code", "gemini_user_prompt": "gemini",
           "rpc": "pi", "interactive": "cm-adjust", "document_import": "cm-import"}
IMPORT_PREFIX = "import:"


def when(at: str | None) -> str:
    """An ISO time (``…T14:02:09Z`` or with milliseconds) as ``2026-12-07 14:02 UTC``."""
    if not at:
        return ""
    try:
        moment = datetime.datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return at
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def client_name(client: str | None, source: str | None = None) -> str | None:
    """The client part of an agent instance (``codex:ab12…`` → ``codex``), else the one a source
    name implies."""
    if client:
        return client.split(":", 1)[0]
    return SOURCES.get(source or "")


def place(client: str | None, session: str | None, at: str | None, file_name: str | None = None,
          source: str | None = None) -> str:
    """Where a version or an observation came from, in plain language (see the module contract)."""
    name = client_name(client, source)
    if name == "cm-import" or (session or "").startswith(IMPORT_PREFIX):
        return f"imported from {file_name}" if file_name else "imported from a file"
    if name is None:
        return ""
    stamp = when(at)
    if name.startswith("mcp-"):
        who = f"MCP client {name[len('mcp-'):]}"
    elif name == "cm-adjust":
        return f"Adjust Memory, {stamp}" if stamp else "Adjust Memory"
    elif name.startswith("sync from "):  # a change `cm sync` brought from another machine
        return f"{name}, {stamp}" if stamp else name
    else:
        who = f"{CLIENTS.get(name, name)} session"
    return f"{who}, {stamp}" if stamp else who


def imported(text: str | None) -> tuple[str, str] | None:
    """``(file name, text)`` of a ``cm import`` observation, else ``None``."""
    if not text or not text.startswith('{"kind": "document_import"'):
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        return None
    return str(body.get("fileName") or body.get("sourceLabel") or ""), body["text"]


def quote(text: str) -> str:
    """The text trimmed for one line of a report (see the module contract)."""
    folded = " ".join(text.split())
    return folded if len(folded) <= QUOTE_CHARS else folded[:QUOTE_CHARS - 1].rstrip() + "…"
