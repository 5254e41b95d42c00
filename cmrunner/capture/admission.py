"""Shared admission helpers for hooks and captures: identities, digests, de-duplication.

Contract:
- ``session_key(client, instance, thread)`` is ``session-`` + sha256 of the JSON triple, so the
  same host thread in two host processes (or after a real SessionEnd) is a different session.
- ``event_digest`` is the sha256 of an event's canonical JSON (sorted keys, no spaces); a second
  delivery of the same event has the same digest and is admitted once.
- ``admitted_events`` (read and written here only) remembers every admitted digest per session;
  it outlives the inbox rows the drain consumes, so a late re-delivery is still recognised.
- The byte limits over what a session holds are ``cmrunner.capture.capacity``.
Stdlib only.
"""

from __future__ import annotations

import sqlite3
import time

from cmrunner.core import jsonfast
from cmrunner.core.sha import sha256


def now_ms() -> int:
    return int(time.time() * 1000)


def sha256_text(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: object) -> str:
    return jsonfast.dumps(value, sort_keys=True, separators=(",", ":"))


def event_digest(event: dict) -> str:
    return sha256_text(canonical_json(event))


def session_key(client: str, instance: str, thread: str) -> str:
    return "session-" + sha256_text(canonical_json([client, instance, thread]))


def mark_admitted(conn: sqlite3.Connection, session_id: str, digest: str) -> bool:
    """Record an event digest; ``False`` when the same event was already admitted."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO admitted_events(session_id, digest, received_at) VALUES (?, ?, ?)",
        (session_id, digest, now_ms()),
    )
    return cursor.rowcount == 1


def was_admitted(conn: sqlite3.Connection, session_id: str, digest: str) -> bool:
    """True when the session already admitted an event with this digest."""
    return conn.execute("SELECT 1 FROM admitted_events WHERE session_id = ? AND digest = ?",
                        (session_id, digest)).fetchone() is not None


def admitted_with_prefix(conn: sqlite3.Connection, session_id: str, prefix: str) -> str | None:
    """The admitted digest of the session that starts with ``prefix``, if any (Pi keys digests by event id)."""
    row = conn.execute(
        "SELECT digest FROM admitted_events WHERE session_id = ? AND substr(digest, 1, ?) = ?",
        (session_id, len(prefix), prefix),
    ).fetchone()
    return None if row is None else row[0]
