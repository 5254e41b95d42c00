"""The host activations and their frozen memory snapshots (``host_activations``, ``host_snapshots``).

Contract: an activation is one host thread (client + host process instance + thread, its
``base``) and the session key it is currently in; a snapshot is the memory block a session's first
start read, frozen for the whole session, replaced only by ``/memory-refresh`` (pending until a
hook delivers it) and dropped when the activation ends. Every function runs inside the caller's
transaction. The hooks (``cmrunner.hooks.codex``, ``cmrunner.hooks.refresh``) and a purge
(``writer_proc.purge``, which drops snapshots holding purged text) call it. Stdlib only.
"""

from __future__ import annotations

import sqlite3


def activation(conn: sqlite3.Connection, base: str) -> tuple[str, bool] | None:
    """The session key and active flag of the host thread's activation ``base``, if any."""
    row = conn.execute("SELECT session_id, active FROM host_activations WHERE base = ?", (base,)).fetchone()
    return None if row is None else (row[0], bool(row[1]))


def open_activation(conn: sqlite3.Connection, base: str, session_id: str, client: str, instance: str, thread: str,
                    cwd: str, started_at: int) -> None:
    """Make ``session_id`` the active session of the host thread ``base`` (replacing an ended one)."""
    conn.execute(
        "INSERT OR REPLACE INTO host_activations(base, session_id, client, host_instance, thread, cwd, active, started_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 1, ?)",
        (base, session_id, client, instance, thread, cwd, started_at),
    )


def close_activation(conn: sqlite3.Connection, base: str) -> None:
    """A real session end: the host thread has no active session any more."""
    conn.execute("UPDATE host_activations SET active = 0 WHERE base = ?", (base,))


def frozen_snapshot(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The memory block frozen for the session, if any."""
    row = conn.execute("SELECT body FROM host_snapshots WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else row[0]


def freeze_snapshot(conn: sqlite3.Connection, session_id: str, body: str, authorization: str, created_at: int) -> None:
    """Freeze the block a session's first start read (already delivered with that start)."""
    conn.execute(
        "INSERT INTO host_snapshots(session_id, body, pending, authorization, created_at) VALUES (?, ?, 0, ?, ?)",
        (session_id, body, authorization, created_at),
    )


def take_pending_snapshot(conn: sqlite3.Connection, session_id: str) -> str | None:
    """A block a refresh replaced and no hook delivered yet; taking it marks it delivered."""
    pending = conn.execute("SELECT body FROM host_snapshots WHERE session_id = ? AND pending = 1",
                           (session_id,)).fetchone()
    if pending is None:
        return None
    conn.execute("UPDATE host_snapshots SET pending = 0 WHERE session_id = ?", (session_id,))
    return pending[0]


def drop_snapshot(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget the session's frozen block (its activation ended)."""
    conn.execute("DELETE FROM host_snapshots WHERE session_id = ?", (session_id,))


def active(conn: sqlite3.Connection, client: str, instance: str, thread: str | None) -> list[tuple[str, str, str]]:
    """(session id, cwd, thread) of the active activations of one host process (and thread)."""
    return conn.execute(
        "SELECT session_id, cwd, thread FROM host_activations WHERE client = ? AND host_instance = ? AND active = 1"
        + (" AND thread = ?" if thread else ""),
        (client, instance, thread) if thread else (client, instance),
    ).fetchall()


def replace_snapshot(conn: sqlite3.Connection, session_id: str, body: str, authorization: str, created_at: int) -> None:
    """A refresh: the session's block becomes ``body``, pending until the next hook delivers it."""
    conn.execute(
        "INSERT INTO host_snapshots(session_id, body, pending, authorization, created_at) VALUES (?, ?, 1, ?, ?)"
        " ON CONFLICT(session_id) DO UPDATE SET body = excluded.body, pending = 1,"
        " authorization = excluded.authorization, created_at = excluded.created_at",
        (session_id, body, authorization, created_at),
    )


def drop_snapshots_containing(conn: sqlite3.Connection, needles: list[str]) -> int:
    """A purge: forget every frozen block holding one of ``needles`` (the next start reads memory again)."""
    return sum(conn.execute("DELETE FROM host_snapshots WHERE instr(body, ?) > 0", (needle,)).rowcount
               for needle in needles if needle)
