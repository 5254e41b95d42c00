"""``cm session-refresh --home <abs> --client codex|chatgpt-work [--thread <id>]``.

The ``/memory-refresh`` skill runs this inside a Codex (or Work) session. It re-reads authorized
memory and replaces the frozen snapshot of exactly one active activation, marking it pending; the
next PostToolUse or UserPromptSubmit hook of that session delivers it.

Contract: the activation is chosen by (client, host process instance, thread) — the thread from
``--thread`` or ``CODEX_THREAD_ID``. Without a thread, the one active activation of that host
process is used; none is ``SESSION_REFRESH_ACTIVATION_REQUIRED``, several is
``SESSION_REFRESH_IDENTITY_REQUIRED``. The working directory alone never selects a session.

This module is the one that reads and writes ``host_activations`` and ``host_snapshots``; the
Codex hook (``cmrunner.hooks.codex``) opens and closes activations and freezes, delivers and drops
snapshots through the functions below, inside its one transaction. Stdlib only.
"""

from __future__ import annotations

import os
import sqlite3

from cmrunner.capture import admission as capture
from cmrunner.core import config as config_mod, identity, projects, reader, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths, resolve_home
from cmrunner.hooks import runner

USAGE = "cm session-refresh --home <absolute path> --client codex|chatgpt-work [--thread <id>]"


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


def _args(argv: list[str]) -> tuple[str, str, str | None]:
    home = client = thread = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in ("--home", "--client", "--thread") and rest:
            value = rest.pop(0)
            if arg == "--home":
                home = value
            elif arg == "--client":
                client = value
            else:
                thread = value
        else:
            raise InputError("INVALID_ARGUMENTS", f"usage: {USAGE}")
    if client not in ("codex", "chatgpt-work"):
        raise InputError("INVALID_ARGUMENTS", f"--client must be codex or chatgpt-work; usage: {USAGE}")
    return resolve_home(home), client, thread or os.environ.get("CODEX_THREAD_ID") or None


def refresh(home: str, client: str, thread: str | None) -> dict:
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    instance = identity.host_instance()
    conn = store.open_store(paths, store.HOOK_BUSY_MS)
    try:
        rows = conn.execute(
            "SELECT session_id, cwd, thread FROM host_activations WHERE client = ? AND host_instance = ? AND active = 1"
            + (" AND thread = ?" if thread else ""),
            (client, instance, thread) if thread else (client, instance),
        ).fetchall()
        if not rows:
            raise CmError("SESSION_REFRESH_ACTIVATION_REQUIRED",
                          "no active cm session belongs to this host process; start a new session instead")
        if len(rows) > 1:
            raise CmError("SESSION_REFRESH_IDENTITY_REQUIRED",
                          "several sessions of this host process are active; pass --thread or set CODEX_THREAD_ID")
        session_id, cwd, _thread = rows[0]
        scope = projects.scope_for(paths, cwd)
        contexts = reader.authorized_contexts(cfg.allowed_scopes, scope if scope != "global" else None)
        block, warning = reader.render_block(reader.read_memory(paths, contexts, home))
        with store.immediate(conn, store.HOOK_BUSY_MS):
            conn.execute(
                "INSERT INTO host_snapshots(session_id, body, pending, authorization, created_at) VALUES (?, ?, 1, ?, ?)"
                " ON CONFLICT(session_id) DO UPDATE SET body = excluded.body, pending = 1,"
                " authorization = excluded.authorization, created_at = excluded.created_at",
                (session_id, block, capture.canonical_json(contexts), capture.now_ms()),
            )
    finally:
        conn.close()
    result = {"refreshed": True, "deliveredWith": "the next tool result or prompt"}
    if warning:
        result["warning"] = warning
    return result


def main(argv: list[str]) -> int:
    def body() -> dict:
        home, client, thread = _args(argv)
        return refresh(home, client, thread)

    return runner.run(body)

