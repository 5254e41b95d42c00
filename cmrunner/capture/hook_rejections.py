"""Hook events cm refused or ignored (``hook_rejections``): the one module with its SQL.

Contract: ``cm hook claude|gemini`` never blocks its host (it exits 0 whatever happens), so a payload
that is malformed, too large, from an unknown event or for a session cm never saw start is recorded
here instead, one row per (host, code) with a count and the first and last time, for ``cm status``.
Only cm's own message is kept, never payload text. ``record`` runs in its own short transaction on
a fresh connection (the admission's transaction already rolled back). Stdlib only.
"""

from __future__ import annotations

import sqlite3
import time


def record(conn: sqlite3.Connection, host: str, code: str, message: str) -> None:
    """Count one rejection (inside the caller's transaction)."""
    now = int(time.time() * 1000)
    conn.execute(
        "INSERT INTO hook_rejections(host, code, message, count, first_at, last_at) VALUES (?, ?, ?, 1, ?, ?)"
        " ON CONFLICT(host, code) DO UPDATE SET count = count + 1, last_at = excluded.last_at,"
        " message = excluded.message", (host, code, message[:300], now, now),
    )


def listed(conn: sqlite3.Connection) -> list[tuple[str, str, str, int, int]]:
    """Every rejection on record as ``(host, code, message, count, last_at)``, newest first."""
    return conn.execute("SELECT host, code, message, count, last_at FROM hook_rejections"
                        " ORDER BY last_at DESC").fetchall()


def clear(conn: sqlite3.Connection, host: str | None = None) -> int:
    """Forget the rejections (of one host); returns how many rows went."""
    if host is None:
        return conn.execute("DELETE FROM hook_rejections").rowcount
    return conn.execute("DELETE FROM hook_rejections WHERE host = ?", (host,)).rowcount
