"""The session cache: turns, messages and sealed batches of Codex, Work, Pi, Claude Code and Gemini CLI sessions.

Contract (the specification's session rules; every function runs inside the caller's
``BEGIN IMMEDIATE`` transaction, except ``consume_or_isolate``, the consumers' unit of work, which
opens its own):
- A delivered user message becomes one ``buffered`` observation (namespace = session key,
  identity = message id); assistant and tool text is kept only as context (never evidence), and
  is dropped (``unavailable = 'sensitive_context'``) when the scanner flags it.
- Message identity is the message id: the same id with the same content is a no-op; with other
  content it is ``SESSION_MESSAGE_CONFLICT``. Messages go only into an open turn
  (``SESSION_TURN_CLOSED``).
- A turn counts once, when it settles with at least one delivered user message. An interrupted
  turn is not evidence: its user observations are quarantined (``INTERRUPTED_TURN``). A turn whose
  user messages mix scope or provenance class is quarantined (``MIXED_SESSION_TURN``).
- The tenth counted turn seals at once: the counted turns get a batch id and their observations
  move ``buffered → pending``. A batch holds one scope and one provenance class: when the turns
  carry several (a project registered mid-session changes the scope of later turns), each class
  gets its own batch, so each is authorised on its own. A real session end marks open turns
  ``incomplete`` and seals the tail (so 21 turns make 10 + 10 + 1). Nothing else seals: not reload, resume, compact, fork,
  ``/new`` or a flush (Pi's consumer seals a turn that settles after the end itself: ``cmrunner.capture.pi_inbox``).
- ``sessionCache.maxSessionBytes`` bounds a session's cached bodies; exceeding it raises
  ``SESSION_CAPACITY_EXCEEDED`` and the caller's transaction rolls back, keeping what was held.
- This module is the one that reads and writes ``sessions`` and ``session_*``; the hooks register
  a session here (``register``) and the Writer's request shaping reads turns through it. Because
  the hooks import it, its module-level imports stay light: the observation store and the secret
  scanner (~15 ms together) load inside the drain-only functions that need them.
- Observations are the observation store's (``cmrunner.capture.observations``): this module hands
  it the ids its messages hold, in the caller's transaction.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable

from cmrunner.capture import failures
from cmrunner.core import jsonfast, store
from cmrunner.core.errors import CmError
from cmrunner.core.sha import sha256

BATCH_TURNS = 10


def _now() -> int:
    return int(time.time() * 1000)


def _digest(parts: list[object]) -> str:
    return sha256(jsonfast.dumps(parts, separators=(",", ":")).encode("utf-8")).hexdigest()


def _turn(conn: sqlite3.Connection, session_id: str, turn_id: str) -> tuple[int, str] | None:
    row = conn.execute("SELECT id, state FROM session_turns WHERE session_id = ? AND turn_id = ?",
                       (session_id, turn_id)).fetchone()
    return None if row is None else (int(row[0]), row[1])


def open_turn(conn: sqlite3.Connection, session_id: str, turn_id: str) -> int:
    """The row id of ``turn_id``, opening it if new."""
    found = _turn(conn, session_id, turn_id)
    if found is not None:
        return found[0]
    cursor = conn.execute("INSERT INTO session_turns(session_id, turn_id, state) VALUES (?, ?, 'open')",
                          (session_id, turn_id))
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _existing_message(conn: sqlite3.Connection, session_id: str, message_id: str, digest: str) -> bool:
    row = conn.execute("SELECT digest FROM session_messages WHERE session_id = ? AND message_id = ?",
                       (session_id, message_id)).fetchone()
    if row is None:
        return False
    if row[0] != digest:
        raise CmError("SESSION_MESSAGE_CONFLICT", "a session message was delivered again with different content; "
                      "the session is isolated, see `cm status`")
    return True


def _open_turn_row(conn: sqlite3.Connection, session_id: str, turn_id: str) -> int:
    found = _turn(conn, session_id, turn_id)
    if found is None:
        return open_turn(conn, session_id, turn_id)
    if found[1] != "open":
        raise CmError("SESSION_TURN_CLOSED", "a message arrived for a turn that already ended; the session is isolated")
    return found[0]


def _check_capacity(conn: sqlite3.Connection, session_id: str, adding: int, limit: int) -> None:
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    kept, observation_ids = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0), json_group_array(observation_id) FROM session_messages"
        " WHERE session_id = ?", (session_id,),
    ).fetchone()
    held = kept + observations.text_bytes(conn, jsonfast.loads(observation_ids))
    if held + adding > limit:
        raise CmError("SESSION_CAPACITY_EXCEEDED", f"this session's cache would exceed {limit} bytes; "
                      "raise sessionCache.maxSessionBytes or start a new session")


def client_of(conn: sqlite3.Connection, session_id: str) -> str:
    """The client (codex, chatgpt-work, pi) a session was registered by."""
    row = conn.execute("SELECT client FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return row[0] if row else "unknown"


def capture_user(conn: sqlite3.Connection, session_id: str, turn_id: str, message_id: str, text: str, scope: str,
                 source: str, observed_at: str, limit: int) -> int | None:
    """Record a delivered user message as a buffered observation; returns its id (None if a replay)."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    digest = _digest(["user", turn_id, text, scope, source])
    if _existing_message(conn, session_id, message_id, digest):
        return None
    turn_row = _open_turn_row(conn, session_id, turn_id)
    _check_capacity(conn, session_id, len(text.encode("utf-8")), limit)
    admitted = observations.admit(conn, namespace=session_id, entry_id=message_id, text=text, scope=scope,
                                  source=source, observed_at=observed_at, agent=client_of(conn, session_id),
                                  state="buffered")
    sequence = conn.execute("SELECT COUNT(*) FROM session_messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    conn.execute(
        "INSERT INTO session_messages(session_id, message_id, turn, role, digest, scope, source, observed_at,"
        " observation_id, sequence) VALUES (?, ?, ?, 'user', ?, ?, ?, ?, ?, ?)",
        (session_id, message_id, turn_row, digest, scope, source, observed_at, admitted.id, sequence),
    )
    conn.execute("UPDATE session_turns SET has_user = 1 WHERE id = ?", (turn_row,))
    return admitted.id


def capture_context(conn: sqlite3.Connection, session_id: str, turn_id: str, message_id: str, role: str, text: str,
                    scope: str, observed_at: str, limit: int) -> None:
    """Keep assistant or tool text as context only (dropped when the scanner flags it)."""
    from cmrunner.secrets import safety  # drain-only (see the module docstring)

    digest = _digest([role, turn_id, text])
    if _existing_message(conn, session_id, message_id, digest):
        return
    turn_row = _open_turn_row(conn, session_id, turn_id)
    unavailable = "sensitive_context" if safety.scan_text(text) else None
    kept = None if unavailable else text
    _check_capacity(conn, session_id, len(kept.encode("utf-8")) if kept else 0, limit)
    sequence = conn.execute("SELECT COUNT(*) FROM session_messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    conn.execute(
        "INSERT INTO session_messages(session_id, message_id, turn, role, digest, scope, source, observed_at, text,"
        " unavailable, sequence) VALUES (?, ?, ?, ?, ?, ?, 'conversation_context', ?, ?, ?, ?)",
        (session_id, message_id, turn_row, role, digest, scope, observed_at, kept, unavailable, sequence),
    )


def _user_observations(conn: sqlite3.Connection, turn_row: int) -> list[int]:
    return [r[0] for r in conn.execute("SELECT observation_id FROM session_messages WHERE turn = ? AND role = 'user'"
                                       " AND observation_id IS NOT NULL", (turn_row,))]


def _quarantine_turn(conn: sqlite3.Connection, turn_row: int, issue: str) -> None:
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    observations.quarantine_buffered(conn, _user_observations(conn, turn_row), issue)


def quarantine_turn(conn: sqlite3.Connection, session_id: str, turn_id: str, issue: str) -> None:
    """Quarantine the user observations of a turn with ``issue`` (its words were not the user's own)."""
    found = _turn(conn, session_id, turn_id)
    if found is not None:
        _quarantine_turn(conn, found[0], issue)


def settle(conn: sqlite3.Connection, session_id: str, turn_id: str, outcome: str) -> list[str]:
    """End a turn as ``settled`` or ``interrupted``; returns the ids of the batches it sealed."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    turn_row = open_turn(conn, session_id, turn_id)
    state = conn.execute("SELECT state FROM session_turns WHERE id = ?", (turn_row,)).fetchone()[0]
    if state != "open":
        if state == outcome:
            return []
        raise CmError("SESSION_SETTLE_CONFLICT", "a turn ended twice with different outcomes; the session is isolated")
    conn.execute("UPDATE session_turns SET state = ?, settled_at = ? WHERE id = ?", (outcome, _now(), turn_row))
    if outcome != "settled":
        _quarantine_turn(conn, turn_row, "INTERRUPTED_TURN")
        return []
    if len(observations.classes(conn, _user_observations(conn, turn_row))) > 1:
        _quarantine_turn(conn, turn_row, "MIXED_SESSION_TURN")
        return []
    if len(_countable(conn, session_id)) >= BATCH_TURNS:
        return seal(conn, session_id, "ten_interactions")
    return []


def _countable(conn: sqlite3.Connection, session_id: str) -> list[int]:
    """The session's settled, unsealed turns that still hold a buffered user observation, in order."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    rows = conn.execute(
        "SELECT t.id, m.observation_id FROM session_turns t JOIN session_messages m ON m.turn = t.id AND m.role = 'user'"
        " WHERE t.session_id = ? AND t.state = 'settled' AND t.batch_id IS NULL ORDER BY t.id", (session_id,),
    ).fetchall()
    buffered = observations.buffered_among(conn, [r[1] for r in rows if r[1] is not None])
    return sorted({turn for turn, observation_id in rows if observation_id in buffered})


def seal(conn: sqlite3.Connection, session_id: str, reason: str) -> list[str]:
    """Seal every counted, unsealed turn of the session: one batch per scope and provenance class,
    in the order of each class's first turn; returns the new batch ids (none when nothing counts)."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    classes: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for turn_row in _countable(conn, session_id):
        classes.setdefault(observations.classes(conn, _user_observations(conn, turn_row)), []).append(turn_row)
    sealed = []
    for turns in classes.values():
        batch_id = "batch-" + os.urandom(12).hex()
        conn.execute("INSERT INTO session_batches(id, session_id, sealed_at, reason) VALUES (?, ?, ?, ?)",
                     (batch_id, session_id, _now(), reason))
        for turn_row in turns:
            conn.execute("UPDATE session_turns SET batch_id = ? WHERE id = ?", (batch_id, turn_row))
            observations.seal_buffered(conn, _user_observations(conn, turn_row), batch_id)
        sealed.append(batch_id)
    return sealed


def end(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """A real session end: open turns become incomplete, the tail is sealed, the session closes."""
    for (turn_row,) in conn.execute("SELECT id FROM session_turns WHERE session_id = ? AND state = 'open'",
                                    (session_id,)).fetchall():
        conn.execute("UPDATE session_turns SET state = 'incomplete' WHERE id = ?", (turn_row,))
        _quarantine_turn(conn, turn_row, "INCOMPLETE_TURN")
    conn.execute("UPDATE sessions SET closing = 1 WHERE id = ?", (session_id,))
    # Context of turns with no user message will never be needed as evidence context.
    conn.execute(
        "UPDATE session_messages SET text = NULL, unavailable = 'undelivered_turn' WHERE session_id = ?"
        " AND role != 'user' AND turn IN (SELECT id FROM session_turns WHERE session_id = ? AND has_user = 0)",
        (session_id, session_id),
    )
    return seal(conn, session_id, "session_end")


def open_backlog(conn: sqlite3.Connection) -> tuple[int, int]:
    """Unsealed turns of live sessions and their buffered user observations, as ``(turns, observations)``.

    Live: not ended and not isolated. Such turns wait for the tenth settled interaction or the
    session's end by design; no flush can process them, so they are not queued work."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    row = conn.execute(
        "SELECT COUNT(DISTINCT t.id), COUNT(DISTINCT m.observation_id) FROM session_turns t"
        " JOIN session_messages m ON m.turn = t.id AND m.role = 'user'"
        " WHERE m.observation_id IN (SELECT value FROM json_each(?)) AND t.batch_id IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = t.session_id AND s.closing = 1)"
        f" AND NOT {failures.recorded('t.session_id')}",
        (jsonfast.dumps(observations.buffered_ids(conn)),),
    ).fetchone()
    return int(row[0]), int(row[1])


def register(conn: sqlite3.Connection, session_id: str, client: str, host_instance: str, thread: str,
             created_at: int) -> None:
    """Record a session the first time a host shows it; a known session is left as it is."""
    conn.execute(
        "INSERT OR IGNORE INTO sessions(id, client, host_instance, thread, closing, created_at) VALUES (?, ?, ?, ?, 0, ?)",
        (session_id, client, host_instance, thread, created_at),
    )


def live_sessions(conn: sqlite3.Connection, clients: tuple[str, ...]) -> list[tuple[str, str]]:
    """Sessions of ``clients`` not ended yet, as ``(session key, host instance)``."""
    return conn.execute("SELECT id, host_instance FROM sessions WHERE closing = 0 AND client IN"
                        " (SELECT value FROM json_each(?))", (jsonfast.dumps(list(clients)),)).fetchall()


def latest_open_turn(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The host turn id of the session's newest open turn, if any."""
    row = conn.execute("SELECT turn_id FROM session_turns WHERE session_id = ? AND state = 'open' ORDER BY id DESC"
                       " LIMIT 1", (session_id,)).fetchone()
    return None if row is None else row[0]


def has_message(conn: sqlite3.Connection, session_id: str, message_id: str) -> bool:
    """True when the session already holds a message with this id."""
    return conn.execute("SELECT 1 FROM session_messages WHERE session_id = ? AND message_id = ?",
                        (session_id, message_id)).fetchone() is not None


def turn_of_observation(conn: sqlite3.Connection, observation_id: int) -> tuple[int, str, str] | None:
    """The turn a user observation was delivered in, as ``(turn row id, session key, host turn id)``."""
    row = conn.execute("SELECT t.id, t.session_id, t.turn_id FROM session_messages m JOIN session_turns t ON t.id = m.turn"
                       " WHERE m.observation_id = ?", (observation_id,)).fetchone()
    return None if row is None else (int(row[0]), row[1], row[2])


def earlier_turns(conn: sqlite3.Connection, session_id: str, before: int, scope: str, limit: int) -> list[int]:
    """Row ids of at most ``limit`` settled turns with a user message before turn row ``before``,
    newest first, none of whose observations lies outside ``scope``."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    found: list[int] = []
    if limit == 0:  # as SQL's LIMIT: zero is none, a negative limit is no limit
        return found
    for turn_row, observation_ids in conn.execute(
        "SELECT t.id, (SELECT json_group_array(m.observation_id) FROM session_messages m WHERE m.turn = t.id"
        " AND m.observation_id IS NOT NULL) FROM session_turns t WHERE t.session_id = ? AND t.id < ?"
        " AND t.state = 'settled' AND t.has_user = 1 ORDER BY t.id DESC", (session_id, before),
    ):
        if not observations.any_outside(conn, jsonfast.loads(observation_ids), scope):
            found.append(turn_row)
            if len(found) == limit:
                break
    return found


def turn_messages(conn: sqlite3.Connection, turn_row: int) -> list[tuple[str, str, str | None, str, str | None]]:
    """A turn's messages in order, as ``(message id, role, kept text, observed at, observation text)``."""
    from cmrunner.capture import observations  # drain-only (see the module docstring)

    rows = conn.execute(
        "SELECT message_id, role, text, observed_at, observation_id FROM session_messages WHERE turn = ? ORDER BY sequence",
        (turn_row,),
    ).fetchall()
    bodies = observations.texts(conn, [r[4] for r in rows if r[4] is not None])
    return [(r[0], r[1], r[2], r[3], bodies.get(r[4])) for r in rows]


def host_turn_id(conn: sqlite3.Connection, turn_row: int) -> str:
    """The host's id of the turn in row ``turn_row``."""
    return conn.execute("SELECT turn_id FROM session_turns WHERE id = ?", (turn_row,)).fetchone()[0]


def ended(conn: sqlite3.Connection, session_id: str) -> bool:
    """True once a real session end (``end``) closed the session."""
    row = conn.execute("SELECT closing FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return row is not None and bool(row[0])


def consume_or_isolate(conn: sqlite3.Connection, consume: Callable[[], None], expected: frozenset[str],
                       isolate_with: Callable[[str, str | None], None]) -> None:
    """The consumer loop's one step over an inbox row, in ONE transaction.

    Whatever consuming the row raises — a session-level ``CmError`` (a code in ``expected``) or
    anything else the row's content provokes — rolls the row's work back to a savepoint and, in the
    same transaction, sets its session aside (``isolate_with(code, detail)``, see
    ``cmrunner.core.poison``): the row is never read again until a recovery is asked for, and the
    drain goes on with other sessions. Only a failure of the environment (``poison.transient``:
    a busy or full store, a disk error) propagates, so the drain stops and retries later rather
    than isolating good data."""
    from cmrunner.core import poison  # drain-only: the hooks import this module

    with store.immediate(conn):
        conn.execute("SAVEPOINT consume_row")
        try:
            consume()
        except Exception as exc:
            if poison.transient(exc):
                raise
            conn.execute("ROLLBACK TO consume_row")
            isolate_with(*poison.code_of(exc, expected))
        conn.execute("RELEASE consume_row")


def clear_texts(conn: sqlite3.Connection, observation_ids: list[int], needles: list[str]) -> int:
    """A purge: drop the text of the messages that hold ``observation_ids`` or any of ``needles``."""
    cleared = conn.execute("UPDATE session_messages SET text = NULL WHERE observation_id IN "
                           "(SELECT value FROM json_each(?))", (jsonfast.dumps(observation_ids),)).rowcount
    return cleared + sum(conn.execute("UPDATE session_messages SET text = NULL WHERE text IS NOT NULL AND "
                                      "instr(text, ?) > 0", (needle,)).rowcount for needle in needles if needle)
