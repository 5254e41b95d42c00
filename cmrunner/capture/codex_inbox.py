"""The Codex / ChatGPT Work inbox tables: the one module that reads and writes them.

Tables: ``codex_inbox`` (hook events with the transcript bytes each brought), ``codex_candidates``
(UserPromptSubmit prompts until the transcript confirms their delivery, or their turn settles or
session ends without it; until then each is a user turn still waiting, ``WAITING_TURNS``), ``codex_cursors`` (where
each session's admitted transcript ends), ``codex_progress`` (where the consumer got to) and
``codex_watches`` (turns still open after Stop or Interrupt).

Contract: every function runs on the caller's connection and inside the caller's transaction;
none opens, commits or retries. The hook (``cmrunner.hooks.codex``) appends in its one
transaction; the drain's consumer (``cmrunner.capture.codex_consumer``) holds the policy and reads
and changes these rows through the functions below. The hook imports this module on every event,
so it imports only what the hook already loads.
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import failures, transcript


# -- what the drain's consumer reads and changes --------------------------------------------
def next_row(conn: sqlite3.Connection) -> tuple | None:
    """The oldest row of a session that is not waiting for a recovery."""
    return conn.execute(
        'SELECT i.id, i.session_id, i.event, i.turn_id, i.start, i."end", i.body, i.scope, i.received_at'
        f" FROM codex_inbox i WHERE NOT {failures.held_back('i.session_id')} ORDER BY i.id LIMIT 1"
    ).fetchone()


def due_watches(conn: sqlite3.Connection, since: int, cutoff: int) -> list[tuple[str, str]]:
    """Watched ``(session, turn)`` pairs set (or first seen at ``since``) after ``cutoff``, whose
    session has no queued row and no failure on record."""
    return conn.execute(
        "SELECT w.session_id, w.turn_id FROM codex_watches w WHERE MAX(w.created_at, ?) > ?"
        " AND NOT EXISTS (SELECT 1 FROM codex_inbox i WHERE i.session_id = w.session_id)"
        f" AND NOT {failures.recorded('w.session_id')}",
        (since, cutoff),
    ).fetchall()


def row_exists(conn: sqlite3.Connection, inbox_id: int) -> bool:
    return conn.execute("SELECT 1 FROM codex_inbox WHERE id = ?", (inbox_id,)).fetchone() is not None


def row_still_queued(conn: sqlite3.Connection, inbox_id: int, session_id: str, start: int) -> bool:
    """True when row ``inbox_id`` is still the one of ``session_id`` starting at ``start``."""
    return conn.execute("SELECT 1 FROM codex_inbox WHERE id = ? AND session_id = ? AND start = ?",
                        (inbox_id, session_id, start)).fetchone() is not None


def delete_row(conn: sqlite3.Connection, inbox_id: int) -> None:
    conn.execute("DELETE FROM codex_inbox WHERE id = ?", (inbox_id,))


def progress(conn: sqlite3.Connection, session_id: str) -> tuple[int, str | None] | None:
    """Where the consumer got to in the session's transcript, and the turn open there."""
    return conn.execute("SELECT offset, open_turn FROM codex_progress WHERE session_id = ?",
                        (session_id,)).fetchone()


def save_progress(conn: sqlite3.Connection, session_id: str, offset: int, open_turn: str | None) -> None:
    conn.execute(
        "INSERT INTO codex_progress(session_id, offset, open_turn) VALUES (?, ?, ?)"
        " ON CONFLICT(session_id) DO UPDATE SET offset = excluded.offset, open_turn = excluded.open_turn",
        (session_id, offset, open_turn),
    )


def waiting_candidate_scope(conn: sqlite3.Connection, session_id: str, turn_id: str, digest: str) -> str | None:
    """The frozen scope of the turn's unconfirmed prompt with this text digest, if there is one."""
    row = conn.execute(
        "SELECT scope FROM codex_candidates WHERE session_id = ? AND turn_id = ? AND digest = ?"
        " AND text IS NOT NULL", (session_id, turn_id, digest),
    ).fetchone()
    return None if row is None else row[0]


def confirm_candidate(conn: sqlite3.Connection, session_id: str, turn_id: str, digest: str) -> None:
    """The transcript delivered the prompt: its text is no longer kept here."""
    conn.execute("UPDATE codex_candidates SET text = NULL WHERE session_id = ? AND turn_id = ? AND digest = ?",
                 (session_id, turn_id, digest))


def turn_candidate_scope(conn: sqlite3.Connection, session_id: str, turn_id: str) -> str | None:
    """The frozen scope of one of the turn's prompts, if the turn had any."""
    row = conn.execute("SELECT scope FROM codex_candidates WHERE session_id = ? AND turn_id = ? LIMIT 1",
                       (session_id, turn_id)).fetchone()
    return None if row is None else row[0]


def add_watch(conn: sqlite3.Connection, session_id: str, turn_id: str, created_at: int) -> None:
    conn.execute("INSERT OR IGNORE INTO codex_watches(session_id, turn_id, created_at) VALUES (?, ?, ?)",
                 (session_id, turn_id, created_at))


def drop_watches(conn: sqlite3.Connection, session_id: str) -> None:
    conn.execute("DELETE FROM codex_watches WHERE session_id = ?", (session_id,))


def advance_cursor(conn: sqlite3.Connection, session_id: str, cursor: transcript.Cursor) -> None:
    """Move the session's cursor to ``cursor`` (the consumer read newer lines itself)."""
    conn.execute("UPDATE codex_cursors SET offset = ?, tail_digest = ? WHERE session_id = ?",
                 (cursor.offset, cursor.tail_digest, session_id))


# -- what the hook writes, in its one transaction -------------------------------------------
def load_cursor(conn: sqlite3.Connection, session_id: str) -> transcript.Cursor | None:
    """Where the session's admitted transcript ends, if the hook has started it."""
    row = conn.execute(
        "SELECT path, device, inode, offset, tail_digest FROM codex_cursors WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else transcript.Cursor(row[0], row[1], row[2], row[3], row[4])


def save_cursor(conn: sqlite3.Connection, session_id: str, cursor: transcript.Cursor, turn_id: str | None) -> None:
    """Advance the session's cursor; a ``None`` turn id keeps the one on record."""
    conn.execute(
        "INSERT INTO codex_cursors(session_id, path, device, inode, offset, tail_digest, turn_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(session_id) DO UPDATE SET path = excluded.path, device = excluded.device,"
        " inode = excluded.inode, offset = excluded.offset, tail_digest = excluded.tail_digest,"
        " turn_id = COALESCE(excluded.turn_id, codex_cursors.turn_id)",
        (session_id, cursor.path, cursor.device, cursor.inode, cursor.offset, cursor.tail_digest, turn_id),
    )


def append(conn: sqlite3.Connection, session_id: str, event: str, turn_id: str | None, start: int, end: int,
           body: bytes, envelope: str, scope: str, received_at: int) -> None:
    """Queue one hook event with the transcript bytes ``[start, end)`` it brought."""
    conn.execute(
        'INSERT INTO codex_inbox(session_id, event, turn_id, start, "end", body, envelope, scope, received_at)'
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, event, turn_id, start, end, body, envelope, scope, received_at),
    )


def add_candidate(conn: sqlite3.Connection, session_id: str, turn_id: str | None, digest: str, text: str, scope: str,
                  created_at: int) -> None:
    """Keep a UserPromptSubmit prompt until the transcript confirms its delivery (first one wins)."""
    conn.execute(
        "INSERT OR IGNORE INTO codex_candidates(session_id, turn_id, digest, text, scope, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, turn_id, digest, text, scope, created_at),
    )


def held_bytes(conn: sqlite3.Connection, session_id: str | None) -> int:
    """Bytes of inbox bodies and unconfirmed prompts held for one session (``None``: all sessions)."""
    if session_id is None:
        return conn.execute(
            "SELECT (SELECT COALESCE(SUM(LENGTH(body)), 0) FROM codex_inbox)"
            " + (SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM codex_candidates)"
        ).fetchone()[0]
    return conn.execute(
        "SELECT (SELECT COALESCE(SUM(LENGTH(body)), 0) FROM codex_inbox WHERE session_id = ?)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM codex_candidates WHERE session_id = ?)",
        (session_id, session_id),
    ).fetchone()[0]


def drop_undelivered(conn: sqlite3.Connection, session_id: str, turn_id: str | None) -> None:
    """The turn ``turn_id`` settled (``None``: the session ended) without delivering these prompts
    (another hook blocked one, or the host never sent it): no delivery can follow, so their text
    goes, and they no longer count as waiting."""
    if turn_id is None:
        conn.execute("UPDATE codex_candidates SET text = NULL WHERE session_id = ? AND text IS NOT NULL",
                     (session_id,))
    else:
        conn.execute("UPDATE codex_candidates SET text = NULL WHERE session_id = ? AND turn_id = ?"
                     " AND text IS NOT NULL", (session_id, turn_id))


# -- the freshness line's share (``cmrunner.capture.waiting``) ----------------------------------
# Prompts of ``:scope`` whose delivery the drain has not read yet: the freshest user turns of a
# Codex session (``codex_candidates_waiting_scope``, m013).
WAITING_TURNS = "(SELECT COUNT(*) FROM codex_candidates WHERE scope = :scope AND text IS NOT NULL)"


# -- what ``cm status`` counts ----------------------------------------------------------------
def waiting(conn: sqlite3.Connection) -> tuple[int, int]:
    """Inbox rows not yet consumed and prompts not yet confirmed, as ``(rows, candidates)``."""
    rows = conn.execute("SELECT COUNT(*) FROM codex_inbox").fetchone()[0]
    candidates = conn.execute("SELECT COUNT(*) FROM codex_candidates WHERE text IS NOT NULL").fetchone()[0]
    return rows, candidates


def clear_candidates_containing(conn: sqlite3.Connection, needles: list[str]) -> int:
    """A purge: drop the text of every prompt candidate that holds one of ``needles``."""
    return sum(conn.execute("UPDATE codex_candidates SET text = NULL WHERE text IS NOT NULL AND instr(text, ?) > 0",
                            (needle,)).rowcount for needle in needles if needle)
