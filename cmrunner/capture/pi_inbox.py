"""The drain's consumer of Pi bridge events: input origins, deliveries and turns into the session cache.

Contract (the specification's Pi behaviour; one transaction per event, oldest first):
- ``input`` stages an input origin (digest of the text, its source, whether images came with it).
  Input alone is never evidence.
- ``message_end`` of role ``user`` is a delivery. It is evidence (source ``interactive`` or ``rpc``)
  only when the oldest unused staged input has the same text digest, came from ``interactive`` or
  ``rpc`` and carried no images; an extension-originated input becomes ``extension``, one with
  images ``unsupported_content``, and a missing or different one ``ambiguous``. Those sources have
  no provenance class, so they are kept but quarantined, never disclosed.
- Assistant and tool-result ``message_end`` text is context only; ``agent_end`` settles the open
  turn (``interrupted`` when Pi reports the run aborted or failed), so tool loops, retries and
  steering inside one run count as one interaction.
- ``session_shutdown`` with reason ``quit`` ends the session (the tail is sealed); reload, new,
  resume and fork keep the cache. A turn delivered and settled after the quit (its events arrived
  late) is sealed at once: the host instance is gone, no later end will come. A turn still open at
  the quit stays ``incomplete``. ``memory_flush`` requests a flush; it never seals.
- Message ids are the bridge's event ids, so a re-delivered event changes nothing.
- This module is the one that reads and writes ``pi_inbox`` and ``pi_inputs``; ``cm capture``
  queues through ``append``, flagging a user delivery with words (``delivers_turn``) so the
  freshness line counts it while it is queued (``WAITING_TURNS``). That command imports it, so the observation store loads only on the
  drain's first flush request.
"""

from __future__ import annotations

import sqlite3
import time

from cmrunner.capture import failures
from cmrunner.capture.admission import sha256_text
from cmrunner.core import jsonfast
from cmrunner.core.config import Config
from cmrunner.core.errors import CmError

# The session-level codes this consumer raises by design; anything else a row provokes isolates
# its session too, as UNEXPECTED_FAILURE (``sessions.consume_or_isolate``).
ISOLATING = frozenset({"SESSION_MESSAGE_CONFLICT", "SESSION_TURN_CLOSED", "SESSION_SETTLE_CONFLICT",
                       "SESSION_CAPACITY_EXCEEDED", "INVALID_OBSERVATION", "INVALID_SESSION_MESSAGE"})
USER_SOURCES = ("interactive", "rpc")
# ``sessions`` (the session cache) is the consumer's only: each method below that uses it imports it
# itself, so ``cm capture`` and every hook's capacity check, which import this module for
# ``append`` and ``held_bytes``, do not load it (issue 35).


def _iso(ms: object) -> str:
    seconds = (ms if isinstance(ms, (int, float)) and not isinstance(ms, bool) else time.time() * 1000) / 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


def _text(payload: dict) -> str:
    value = payload.get("text")
    if not isinstance(value, str):
        raise CmError("INVALID_SESSION_MESSAGE", "a Pi message event has no text; update the bridge")
    return value


class PiInbox:
    """A drain consumer over ``pi_inbox``."""

    name = "pi-inbox"

    def __init__(self, cfg: Config) -> None:
        self.limit = cfg.session_cache["maxSessionBytes"]

    def _next(self, conn: sqlite3.Connection) -> tuple | None:
        return conn.execute(
            "SELECT id, session_id, event_id, event, body, scope FROM pi_inbox p"
            f" WHERE NOT {failures.held_back('p.session_id')} ORDER BY id LIMIT 1"
        ).fetchone()

    def runnable(self, conn: sqlite3.Connection) -> bool:
        return self._next(conn) is not None

    def step(self, conn: sqlite3.Connection) -> bool:
        from cmrunner.capture import sessions

        row = self._next(conn)  # a plain WAL read: the write lock is taken only to change something
        if row is None:
            return False
        sessions.consume_or_isolate(conn, lambda: self._consume(conn, row), ISOLATING,
                                    lambda code, detail: failures.isolate(conn, row[1], row[0], code, detail))
        return True

    def _open_turn(self, conn: sqlite3.Connection, session_id: str, event_id: str) -> str:
        from cmrunner.capture import sessions

        found = sessions.latest_open_turn(conn, session_id)
        if found is not None:
            return found
        turn_id = f"pi-turn-{event_id}"
        sessions.open_turn(conn, session_id, turn_id)
        return turn_id

    def _consume(self, conn: sqlite3.Connection, row: tuple) -> None:
        from cmrunner.capture import sessions

        inbox_id, session_id, event_id, event, body, scope = row
        if not conn.execute("SELECT 1 FROM pi_inbox WHERE id = ?", (inbox_id,)).fetchone():
            return  # consumed meanwhile
        failures.clear(conn, session_id)
        payload = jsonfast.loads(body)["payload"]
        sessions.register(conn, session_id, "pi", "", "", int(time.time() * 1000))
        if event == "input":
            conn.execute("INSERT INTO pi_inputs(session_id, digest, source, has_images) VALUES (?, ?, ?, ?)",
                         (session_id, sha256_text(_text(payload)), str(payload.get("source", "")),
                          1 if payload.get("hasImages") else 0))
        elif event == "message_end":
            self._message(conn, session_id, event_id, payload, scope)
        elif event == "agent_end":
            turn = sessions.latest_open_turn(conn, session_id)
            if turn is not None:
                outcome = "interrupted" if payload.get("aborted") else "settled"
                sealed = sessions.settle(conn, session_id, turn, outcome)
                if not sealed and sessions.ended(conn, session_id):
                    # The run's events reached cm after the quit (Pi's queue ran behind its
                    # shutdown): the Pi process is gone, so this turn is more of the tail.
                    sessions.seal(conn, session_id, "session_end")
        elif event == "session_shutdown" and payload.get("reason") == "quit":
            sessions.end(conn, session_id)
        elif event == "memory_flush":
            from cmrunner.core import jobstore  # off the capture command's import path

            jobstore.request_flush(conn)
        conn.execute("DELETE FROM pi_inbox WHERE id = ?", (inbox_id,))

    def _message(self, conn: sqlite3.Connection, session_id: str, event_id: str, payload: dict, scope: str) -> None:
        from cmrunner.capture import sessions

        role = payload.get("role")
        text = _text(payload)
        observed = _iso(payload.get("timestamp"))
        if role == "user":
            turn_id = self._open_turn(conn, session_id, event_id)
            staged = conn.execute("SELECT id, digest, source, has_images FROM pi_inputs WHERE session_id = ? AND used = 0"
                                  " ORDER BY id LIMIT 1", (session_id,)).fetchone()
            if staged is None:
                source = "ambiguous"
            else:
                conn.execute("UPDATE pi_inputs SET used = 1 WHERE id = ?", (staged[0],))
                if staged[2] == "extension":
                    source = "extension"
                elif staged[3] or payload.get("hasImages"):
                    source = "unsupported_content"
                elif staged[1] != sha256_text(text) or staged[2] not in USER_SOURCES:
                    source = "ambiguous"
                else:
                    source = staged[2]
            if not text.strip():
                return
            sessions.capture_user(conn, session_id, turn_id, event_id, text, scope, source, observed, self.limit)
        elif role in ("assistant", "toolResult"):
            turn = sessions.latest_open_turn(conn, session_id)
            if turn is None or not text.strip():
                return  # context outside a user interaction is never needed
            sessions.capture_context(conn, session_id, turn, event_id, "assistant" if role == "assistant" else "tool",
                                     text, scope, observed, self.limit)


def delivers_turn(event: str, payload: dict) -> bool:
    """True for a user delivery with words: the event ``_message`` makes a user turn of."""
    text = payload.get("text")
    return event == "message_end" and payload.get("role") == "user" and isinstance(text, str) and bool(text.strip())


def append(conn: sqlite3.Connection, session_id: str, event_id: str, event: str, digest: str, body: str, scope: str,
           received_at: int, *, user_turn: bool) -> None:
    """Queue one admitted bridge event (inside ``cm capture``'s transaction); ``user_turn`` is
    ``delivers_turn`` of it, so the freshness line counts it without parsing the body."""
    conn.execute(
        "INSERT INTO pi_inbox(session_id, event_id, event, digest, body, scope, received_at, user_turn)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_id, event_id, event, digest, body, scope, received_at, 1 if user_turn else 0),
    )


# The freshness line's share (``cmrunner.capture.waiting``): user deliveries of ``:scope`` still
# queued (``pi_inbox_waiting_scope``, m013).
WAITING_TURNS = "(SELECT COUNT(*) FROM pi_inbox WHERE scope = :scope AND user_turn = 1)"


def held_bytes(conn: sqlite3.Connection, session_id: str | None) -> int:
    """Bytes of queued event bodies for one session (``None``: all sessions)."""
    if session_id is None:
        return conn.execute("SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM pi_inbox").fetchone()[0]
    return conn.execute("SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM pi_inbox WHERE session_id = ?",
                        (session_id,)).fetchone()[0]


def waiting(conn: sqlite3.Connection) -> int:
    """Queued bridge events not yet consumed."""
    return conn.execute("SELECT COUNT(*) FROM pi_inbox").fetchone()[0]
