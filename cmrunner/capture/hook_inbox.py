"""The queue of Claude Code and Gemini CLI hook events (``hook_inbox``): the one module with its SQL.

Contract:
- ``cm hook claude|gemini`` appends one row per admitted event (``append``) inside its own
  transaction; the drain's consumer (``cmrunner.capture.hook_consumer``) reads the oldest row of a
  session that is not isolated (``next_row``) and deletes it in the transaction that applies it.
- A row's ``event`` is ``prompt`` (a typed prompt: its text, or only the fact that it was a
  command), ``stop`` (the turn ended; the assistant's final text as context) or ``end`` (the
  session ended). Its ``body`` is canonical JSON and is counted against the session cache limits
  (``held_bytes``, used by ``cmrunner.capture.capacity``).
- A purge clears queued text that holds purged words (``clear_containing``): the row stays, so the
  turn structure survives, but the words are gone (and it no longer counts as a user turn).
- ``user_turn`` marks a prompt with its text: a user turn still waiting (``WAITING_TURNS``).
Stdlib only (the hooks import it).
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import failures
from cmrunner.core import jsonfast

EVENTS = ("prompt", "stop", "end")


def append(conn: sqlite3.Connection, session_id: str, event: str, body: str, scope: str, received_at: int, *,
           user_turn: bool) -> None:
    """Queue one admitted event (inside the hook's transaction); ``user_turn``: a prompt with its
    text (never a command), which the freshness line counts while it is queued."""
    conn.execute("INSERT INTO hook_inbox(session_id, event, body, scope, received_at, user_turn) VALUES (?, ?, ?, ?, ?, ?)",
                 (session_id, event, body, scope, received_at, 1 if user_turn else 0))


# The freshness line's share (``cmrunner.capture.waiting``): typed prompts of ``:scope`` still
# queued (``hook_inbox_waiting_scope``, m013).
WAITING_TURNS = "(SELECT COUNT(*) FROM hook_inbox WHERE scope = :scope AND user_turn = 1)"


def next_row(conn: sqlite3.Connection) -> tuple | None:
    """The oldest queued row of a session that is not isolated: ``(id, session_id, event, body, scope)``."""
    return conn.execute(
        "SELECT id, session_id, event, body, scope FROM hook_inbox h"
        f" WHERE NOT {failures.held_back('h.session_id')} ORDER BY id LIMIT 1"
    ).fetchone()


def row_exists(conn: sqlite3.Connection, row_id: int) -> bool:
    return conn.execute("SELECT 1 FROM hook_inbox WHERE id = ?", (row_id,)).fetchone() is not None


def delete_row(conn: sqlite3.Connection, row_id: int) -> None:
    conn.execute("DELETE FROM hook_inbox WHERE id = ?", (row_id,))


def queued_sessions(conn: sqlite3.Connection) -> set[str]:
    """Sessions with rows still queued (consumed first, before any exit detection)."""
    return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM hook_inbox")}


def held_bytes(conn: sqlite3.Connection, session_id: str | None) -> int:
    """Bytes of queued event bodies for one session (``None``: all sessions)."""
    if session_id is None:
        return conn.execute("SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM hook_inbox").fetchone()[0]
    return conn.execute("SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM hook_inbox WHERE session_id = ?",
                        (session_id,)).fetchone()[0]


def waiting(conn: sqlite3.Connection) -> int:
    """Queued hook events not yet consumed."""
    return conn.execute("SELECT COUNT(*) FROM hook_inbox").fetchone()[0]


def clear_containing(conn: sqlite3.Connection, needles: list[str]) -> int:
    """A purge: drop the text of queued events that hold any of ``needles``; returns how many."""
    cleared = 0
    for row_id, body in conn.execute("SELECT id, body FROM hook_inbox").fetchall():
        value = jsonfast.loads(body)
        text = value.get("text")
        if isinstance(text, str) and any(needle and needle in text for needle in needles):
            value["text"] = None
            value["purged"] = True
            conn.execute("UPDATE hook_inbox SET body = ?, user_turn = 0 WHERE id = ?",
                         (jsonfast.dumps(value, sort_keys=True, separators=(",", ":")), row_id))
            cleared += 1
    return cleared
