"""Session-level capture failures (``codex_failures``): the one module that reads or writes them.

Contract (every function runs on the caller's connection, inside its transaction when it writes):
- A failure isolates a whole session of any host (Codex, Work or Pi; the table keeps its first
  name): that session's inbox rows are skipped until ``cm session-drain --recover <id>`` asks for
  another try (``request_recovery``); nothing admitted is dropped. One record per session: a new
  failure replaces the old one with a fresh recovery id.
- A consumer clears the record (``clear``) when it takes the session's next row, so a recovered
  session that fails again is isolated again.
- A failure nobody expected (not a known session-level code) is ``UNEXPECTED_FAILURE`` with a
  ``detail``: the exception's class and ``file:line:function`` (``cmrunner.core.poison``).
- ``request_recovery_of`` asks for another try of every isolated session, or of those with one
  code, in one command (``cm status`` shows them grouped by code).
- ``held_back`` and ``recorded`` are SQL predicates for queries over other tables that must skip
  isolated sessions in the same statement (the same snapshot); they are the only SQL about this
  table written outside its functions, so its shape stays known here alone.
Stdlib only: the hooks' capacity check and the drain's consumers both load it.
"""

from __future__ import annotations

import os
import sqlite3
import time

from cmrunner.core.errors import CmError


def held_back(session_column: str) -> str:
    """SQL true while the session in ``session_column`` is isolated and no retry was asked for."""
    return (f"EXISTS (SELECT 1 FROM codex_failures f WHERE f.session_id = {session_column}"
            " AND f.retry_requested = 0)")


def recorded(session_column: str) -> str:
    """SQL true while the session in ``session_column`` has a failure on record (retry asked or not)."""
    return f"EXISTS (SELECT 1 FROM codex_failures f WHERE f.session_id = {session_column})"


def isolate(conn: sqlite3.Connection, session_id: str, inbox_id: int | None, code: str,
            detail: str | None = None) -> None:
    """Record a session-level failure with ``code`` (and, for an unexpected one, ``detail``: the
    exception's class and ``file:line:function``); the session's inbox waits for a recovery."""
    conn.execute(
        "INSERT OR REPLACE INTO codex_failures(session_id, inbox_id, recovery_id, issue, failed_at, retry_requested,"
        " detail) VALUES (?, ?, ?, ?, ?, 0, ?)",
        (session_id, inbox_id, os.urandom(16).hex(), code, int(time.time() * 1000), detail),
    )


def clear(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget the session's failure record: its next row is being consumed."""
    conn.execute("DELETE FROM codex_failures WHERE session_id = ?", (session_id,))


def request_recovery(conn: sqlite3.Connection, recovery_id: str) -> str:
    """Mark an isolated session for another try (inside the caller's transaction); returns its key."""
    row = conn.execute("SELECT session_id FROM codex_failures WHERE recovery_id = ?", (recovery_id,)).fetchone()
    if row is None:
        raise CmError("CODEX_RECOVERY_UNAVAILABLE", "no isolated session has that recovery id; see `cm status`")
    conn.execute("UPDATE codex_failures SET retry_requested = 1 WHERE recovery_id = ?", (recovery_id,))
    return row[0]


def request_recovery_of(conn: sqlite3.Connection, issue: str | None) -> int:
    """Mark every isolated session (``issue``: only those with that code) for another try, inside
    the caller's transaction; returns how many."""
    if issue is None:
        return conn.execute("UPDATE codex_failures SET retry_requested = 1 WHERE retry_requested = 0").rowcount
    return conn.execute("UPDATE codex_failures SET retry_requested = 1 WHERE retry_requested = 0 AND issue = ?",
                        (issue,)).rowcount


def listed(conn: sqlite3.Connection) -> list[tuple[str, str, int, str | None]]:
    """Every failure on record as ``(recovery_id, issue, failed_at, detail)``, oldest first (``cm status``
    reads a store it never migrates: before ``m011_isolation_detail`` the detail is ``None``)."""
    has_detail = any(row[1] == "detail" for row in conn.execute("PRAGMA table_info(codex_failures)"))
    return conn.execute(f"SELECT recovery_id, issue, failed_at, {'detail' if has_detail else 'NULL'}"
                        " FROM codex_failures ORDER BY failed_at").fetchall()
