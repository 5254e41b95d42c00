"""Shared admission helpers for hooks and captures: identities, digests, capacity.

Contract:
- ``session_key(client, instance, thread)`` is ``session-`` + sha256 of the JSON triple, so the
  same host thread in two host processes (or after a real SessionEnd) is a different session.
- ``event_digest`` is the sha256 of an event's canonical JSON (sorted keys, no spaces); a second
  delivery of the same event has the same digest and is admitted once.
- ``check_capacity`` enforces ``sessionCache`` byte limits over what is durably held for a session
  and in total; exceeding them raises ``SESSION_CAPACITY_EXCEEDED`` inside the caller's
  transaction, which then rolls back, so existing content is retained and nothing is half-added.
Stdlib only.
"""

from __future__ import annotations

import json
import sqlite3
import time

from cmrunner.core.config import Config
from cmrunner.core.errors import CmError
from cmrunner.core.sha import sha256


def now_ms() -> int:
    return int(time.time() * 1000)


def sha256_text(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def event_digest(event: dict) -> str:
    return sha256_text(canonical_json(event))


def session_key(client: str, instance: str, thread: str) -> str:
    return "session-" + sha256_text(canonical_json([client, instance, thread]))


def check_capacity(conn: sqlite3.Connection, config: Config, session_id: str, adding: int) -> None:
    """Refuse ``adding`` more bytes when a session or the whole cache would exceed its limit."""
    limits = config.session_cache
    held_session = conn.execute(
        "SELECT (SELECT COALESCE(SUM(LENGTH(body)), 0) FROM codex_inbox WHERE session_id = ?)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM codex_candidates WHERE session_id = ?)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM pi_inbox WHERE session_id = ?)",
        (session_id, session_id, session_id),
    ).fetchone()[0]
    if held_session + adding > limits["maxSessionBytes"]:
        raise CmError(
            "SESSION_CAPACITY_EXCEEDED",
            f"this session already holds {held_session} bytes (limit {limits['maxSessionBytes']}); "
            "run `cm flush` or raise sessionCache.maxSessionBytes",
        )
    held_total = conn.execute(
        "SELECT (SELECT COALESCE(SUM(LENGTH(body)), 0) FROM codex_inbox)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM codex_candidates)"
        " + (SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM pi_inbox)"
    ).fetchone()[0]
    if held_total + adding > limits["maxTotalBytes"]:
        raise CmError(
            "SESSION_CAPACITY_EXCEEDED",
            f"the session cache holds {held_total} bytes (limit {limits['maxTotalBytes']}); "
            "run `cm flush` or raise sessionCache.maxTotalBytes",
        )


def mark_admitted(conn: sqlite3.Connection, session_id: str, digest: str) -> bool:
    """Record an event digest; ``False`` when the same event was already admitted."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO admitted_events(session_id, digest, received_at) VALUES (?, ?, ?)",
        (session_id, digest, now_ms()),
    )
    return cursor.rowcount == 1
