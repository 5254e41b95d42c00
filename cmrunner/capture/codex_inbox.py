"""The drain's consumer of the Codex / ChatGPT Work inbox: transcript tails into the session cache.

Contract:
- Per step, the oldest inbox row of a session that is not isolated is consumed in ONE
  transaction: it must start exactly where the previous row of that session ended (else
  ``CODEX_CURSOR_CONFLICT``); its lines are parsed (``cmrunner.capture.rollout``); each delivered user
  message must match an unconsumed UserPromptSubmit candidate of its turn by digest
  (``CODEX_UNCONFIRMED_DELIVERY``), and the candidate's text is then cleared; records become session
  messages and turn outcomes (``cmrunner.capture.sessions``); the row is deleted and the progress advanced.
- A failure with one of the session-level codes rolls that transaction back and records a
  ``codex_failures`` row instead, isolating the session; other sessions go on. ``request_recovery``
  (``cm session-drain --recover <id>``) lets it be tried again. Any other error propagates.
- Stop and Interrupt leave a watch while their turn is still open: Codex writes the final record
  after the hook ran. ``reconcile`` appends the transcript's newer complete lines as a
  ``Reconcile`` row (the same path a hook takes), so the turn settles without waiting for another
  prompt. Each drain polls a watch for ``WATCH_SECONDS`` (from when it was set or the drain
  started, whichever is later); the durable watch is retried by later drains.
- The first user prompt of a session arrives after Codex already wrote ``task_started``, before the
  SessionStart cursor; a UserPromptSubmit row therefore opens its turn when none is open.
- This module is the one that reads and writes ``codex_inbox``, ``codex_candidates``,
  ``codex_cursors``, ``codex_progress`` and ``codex_watches``: the hook appends through
  ``append``, ``add_candidate`` and the cursor functions, in its own transaction. The hook imports
  it, so its module-level imports stay light (``cmrunner.capture.sessions`` keeps its heavy ones lazy).
"""

from __future__ import annotations

import json
import sqlite3
import time

from cmrunner.capture import failures, rollout, sessions, transcript
from cmrunner.capture.admission import sha256_text
from cmrunner.core import store
from cmrunner.core.config import Config
from cmrunner.core.errors import CmError

ISOLATING = frozenset({
    rollout.UNKNOWN, rollout.UNKNOWN_COMPLETION, rollout.UNSUPPORTED_VERSION, rollout.UNSETTLED_TURN,
    "CODEX_CURSOR_CONFLICT", "CODEX_UNCONFIRMED_DELIVERY", "CODEX_TRANSCRIPT_REPLACED", "CODEX_UNSAFE_TRANSCRIPT",
    "CODEX_TRANSCRIPT_MISSING", "SESSION_MESSAGE_CONFLICT", "SESSION_TURN_CLOSED", "SESSION_SETTLE_CONFLICT",
    "SESSION_CAPACITY_EXCEEDED", "INVALID_OBSERVATION",
})
WATCH_SECONDS = 60


def _now() -> int:
    return int(time.time() * 1000)


class CodexInbox:
    """A drain consumer (``runnable`` / ``step`` / ``next_due``) over ``codex_inbox``."""

    name = "codex-inbox"

    def __init__(self, cfg: Config) -> None:
        self.limit = cfg.session_cache["maxSessionBytes"]
        self.started = _now()

    # -- scheduling -------------------------------------------------------------------------
    def _next_row(self, conn: sqlite3.Connection) -> tuple | None:
        return conn.execute(
            'SELECT i.id, i.session_id, i.event, i.turn_id, i.start, i."end", i.body, i.scope, i.received_at'
            f" FROM codex_inbox i WHERE NOT {failures.held_back('i.session_id')} ORDER BY i.id LIMIT 1"
        ).fetchone()

    def _due_watches(self, conn: sqlite3.Connection) -> list[tuple[str, str]]:
        return conn.execute(
            "SELECT w.session_id, w.turn_id FROM codex_watches w WHERE MAX(w.created_at, ?) > ?"
            " AND NOT EXISTS (SELECT 1 FROM codex_inbox i WHERE i.session_id = w.session_id)"
            f" AND NOT {failures.recorded('w.session_id')}",
            (self.started, _now() - WATCH_SECONDS * 1000),
        ).fetchall()

    def runnable(self, conn: sqlite3.Connection) -> bool:
        return self._next_row(conn) is not None

    def next_due(self, conn: sqlite3.Connection) -> int | None:
        """Watched turns keep the drain polling the transcript for a while."""
        return _now() + 200 if self._due_watches(conn) else None

    def step(self, conn: sqlite3.Connection) -> bool:
        row = self._next_row(conn)  # a plain WAL read: the write lock is taken only to change something
        if row is None:
            if not self._due_watches(conn):
                return False
            with store.immediate(conn):
                return self._reconcile(conn)
        sessions.consume_or_isolate(conn, lambda: self._consume(conn, row), ISOLATING,
                                    lambda code: self._isolate(conn, row, code))
        return True

    # -- consumption ------------------------------------------------------------------------
    def _consume(self, conn: sqlite3.Connection, row: tuple) -> None:
        inbox_id, session_id, event, turn_id, start, end, body, scope, received_at = row
        if not conn.execute("SELECT 1 FROM codex_inbox WHERE id = ?", (inbox_id,)).fetchone():
            return  # consumed meanwhile
        failures.clear(conn, session_id)
        progress = conn.execute("SELECT offset, open_turn FROM codex_progress WHERE session_id = ?",
                                (session_id,)).fetchone()
        if progress is not None and progress[0] != start:
            raise CmError("CODEX_CURSOR_CONFLICT", "an inbox row does not continue where the last one ended; "
                          "the session is isolated, see `cm status`")
        open_turn = progress[1] if progress else None
        if event == "UserPromptSubmit" and open_turn is None and turn_id:
            open_turn = turn_id
            sessions.open_turn(conn, session_id, turn_id)
        records = rollout.parse(bytes(body), start, open_turn)
        for record in records:
            self._apply(conn, session_id, record)
        open_turn = rollout.open_turn_after(records, open_turn)
        if event in ("Stop", "Interrupt") and turn_id and open_turn == turn_id:
            conn.execute("INSERT OR IGNORE INTO codex_watches(session_id, turn_id, created_at) VALUES (?, ?, ?)",
                         (session_id, turn_id, _now()))
        if open_turn is None:
            conn.execute("DELETE FROM codex_watches WHERE session_id = ?", (session_id,))
        if event == "SessionEnd":
            sessions.end(conn, session_id)
            conn.execute("DELETE FROM codex_watches WHERE session_id = ?", (session_id,))
        conn.execute("DELETE FROM codex_inbox WHERE id = ?", (inbox_id,))
        conn.execute(
            "INSERT INTO codex_progress(session_id, offset, open_turn) VALUES (?, ?, ?)"
            " ON CONFLICT(session_id) DO UPDATE SET offset = excluded.offset, open_turn = excluded.open_turn",
            (session_id, end, open_turn),
        )

    def _apply(self, conn: sqlite3.Connection, session_id: str, record: rollout.Record) -> None:
        if isinstance(record, rollout.TurnStarted):
            sessions.open_turn(conn, session_id, record.turn_id)
        elif isinstance(record, rollout.UserDelivery):
            digest = sha256_text(record.text)
            candidate = conn.execute(
                "SELECT scope FROM codex_candidates WHERE session_id = ? AND turn_id = ? AND digest = ?"
                " AND text IS NOT NULL", (session_id, record.turn_id, digest),
            ).fetchone()
            if candidate is None:
                if sessions.has_message(conn, session_id, record.message_id):
                    return  # the same delivery, already captured
                raise CmError("CODEX_UNCONFIRMED_DELIVERY", "a user message in the transcript matches no prompt cm saw "
                              "for that turn; the session is isolated, see `cm status`")
            source = "unsupported_content" if record.unsupported_content else "codex_user_delivery"
            sessions.capture_user(conn, session_id, record.turn_id, record.message_id, record.text, candidate[0],
                                  source, record.at, self.limit)
            conn.execute("UPDATE codex_candidates SET text = NULL WHERE session_id = ? AND turn_id = ? AND digest = ?",
                         (session_id, record.turn_id, digest))
        elif isinstance(record, (rollout.AssistantText, rollout.ToolOutput)):
            role = "assistant" if isinstance(record, rollout.AssistantText) else "tool"
            scope = self._turn_scope(conn, session_id, record.turn_id)
            sessions.capture_context(conn, session_id, record.turn_id, record.message_id, role, record.text, scope,
                                     record.at, self.limit)
        elif isinstance(record, rollout.TurnSettled):
            sessions.settle(conn, session_id, record.turn_id, record.outcome)

    def _turn_scope(self, conn: sqlite3.Connection, session_id: str, turn_id: str) -> str:
        row = conn.execute("SELECT scope FROM codex_candidates WHERE session_id = ? AND turn_id = ? LIMIT 1",
                           (session_id, turn_id)).fetchone()
        return row[0] if row else "global"

    def _isolate(self, conn: sqlite3.Connection, row: tuple, code: str) -> None:
        inbox_id, session_id = row[0], row[1]
        if not conn.execute("SELECT 1 FROM codex_inbox WHERE id = ? AND session_id = ? AND start = ?",
                            (inbox_id, session_id, row[4])).fetchone():
            return  # consumed by someone else meanwhile: not a failure of this session
        failures.isolate(conn, session_id, inbox_id, code)

    # -- watches ----------------------------------------------------------------------------
    def _reconcile(self, conn: sqlite3.Connection) -> bool:
        """Inside the caller's transaction: append newer transcript lines of watched sessions."""
        appended = False
        for session_id, turn_id in self._due_watches(conn):
            cursor = load_cursor(conn, session_id)
            if cursor is None:
                continue
            try:
                tail = transcript.read_tail(cursor, cursor.path, self.limit)
            except CmError as exc:
                conn.execute("DELETE FROM codex_watches WHERE session_id = ?", (session_id,))
                failures.isolate(conn, session_id, None, exc.code)
                continue
            if not tail.body:
                continue
            scope = self._turn_scope(conn, session_id, turn_id)
            conn.execute(
                'INSERT INTO codex_inbox(session_id, event, turn_id, start, "end", body, envelope, scope, received_at)'
                " VALUES (?, 'Reconcile', ?, ?, ?, ?, ?, ?, ?)",
                (session_id, turn_id, tail.start, tail.end, tail.body, json.dumps({"event": "Reconcile"}), scope, _now()),
            )
            conn.execute("UPDATE codex_cursors SET offset = ?, tail_digest = ? WHERE session_id = ?",
                         (tail.cursor.offset, tail.cursor.tail_digest, session_id))
            appended = True
        return appended



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


# -- what ``cm status`` counts ----------------------------------------------------------------
def waiting(conn: sqlite3.Connection) -> tuple[int, int]:
    """Inbox rows not yet consumed and prompts not yet confirmed, as ``(rows, candidates)``."""
    rows = conn.execute("SELECT COUNT(*) FROM codex_inbox").fetchone()[0]
    candidates = conn.execute("SELECT COUNT(*) FROM codex_candidates WHERE text IS NOT NULL").fetchone()[0]
    return rows, candidates
