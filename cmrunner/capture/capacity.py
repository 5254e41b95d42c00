"""The session cache's byte limits, checked when a hook or capture admits an event.

Contract: ``check_capacity`` enforces ``sessionCache`` byte limits over what is durably held for a
session and in total — Codex inbox bodies and unconfirmed prompts (``cmrunner.capture.codex_inbox``)
plus Pi inbox bodies (``cmrunner.capture.pi_inbox``) and Claude Code / Gemini CLI hook bodies
(``cmrunner.capture.hook_inbox``), each counted by its table's owner. Exceeding
a limit raises ``SESSION_CAPACITY_EXCEEDED`` inside the caller's transaction, which then rolls back,
so existing content is retained and nothing is half-added. Stdlib only (the hooks import it).
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import codex_inbox, hook_inbox, pi_inbox
from cmrunner.core.config import Config
from cmrunner.core.errors import CmError


def _held(conn: sqlite3.Connection, session_id: str | None) -> int:
    return (codex_inbox.held_bytes(conn, session_id) + pi_inbox.held_bytes(conn, session_id)
            + hook_inbox.held_bytes(conn, session_id))


def check_capacity(conn: sqlite3.Connection, config: Config, session_id: str, adding: int) -> None:
    """Refuse ``adding`` more bytes when a session or the whole cache would exceed its limit."""
    limits = config.session_cache
    held_session = _held(conn, session_id)
    if held_session + adding > limits["maxSessionBytes"]:
        raise CmError(
            "SESSION_CAPACITY_EXCEEDED",
            f"this session already holds {held_session} bytes (limit {limits['maxSessionBytes']}); "
            "run `cm flush` or raise sessionCache.maxSessionBytes",
        )
    held_total = _held(conn, None)
    if held_total + adding > limits["maxTotalBytes"]:
        raise CmError(
            "SESSION_CAPACITY_EXCEEDED",
            f"the session cache holds {held_total} bytes (limit {limits['maxTotalBytes']}); "
            "run `cm flush` or raise sessionCache.maxTotalBytes",
        )
