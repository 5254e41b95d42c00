"""The drain's consumer of Claude Code and Gemini CLI hook events: turns into the session cache.

Contract (one transaction per row, oldest first; rows come from ``cmrunner.capture.hook_inbox``):
- ``prompt`` opens a new turn. A turn still open when the next prompt arrives never got its Stop
  (the user interrupted it, or the host failed): it ends ``interrupted`` and is not evidence. The
  prompt's text becomes a delivered user message (sources ``claude_user_prompt`` /
  ``gemini_user_prompt``); a command (slash command, shell escape) opens the turn with no user
  message, so it never counts. A prompt whose typed words the hook could not tell apart from
  hook context carries an ``issue`` (``UNCONFIRMED_PROMPT``): its text is kept quarantined, never
  evidence (``cm release`` brings it back).
- ``stop`` keeps the assistant's final text as context of the open turn and settles it; the tenth
  counted turn seals a batch (``cmrunner.capture.sessions``). A Gemini stop first asks Gemini's
  chat record whether the turn's prompt was typed (``cmrunner.capture.gemini_chat.verdict``); a
  command's expansion (``COMMAND_EXPANSION``) or a prompt the record does not show
  (``UNCONFIRMED_PROMPT``) is quarantined, so it never counts.
- ``end`` is a real session end: open turns become incomplete and the tail is sealed.
- Exit detection: a session of these hosts that is not ended, has nothing queued, and whose host
  process (``identity.parse_key`` of its instance) is gone, is ended the same way. Gemini CLI does
  not wait for its SessionEnd hook and a killed host sends none, so the tail is still sealed by
  the next drain (any hook, ``cm flush``), never lost. An explicit bridge-chosen instance cannot
  be checked and waits for its end event.
- A session-level failure (``ISOLATING``), or anything else a row provokes (``UNEXPECTED_FAILURE``,
  ``sessions.consume_or_isolate``), isolates the session (``cmrunner.capture.failures``); other
  sessions go on, and ``cm session-drain --recover`` retries it.
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import activations, failures, gemini_chat, hook_inbox, sessions
from cmrunner.core import identity, jsonfast, store
from cmrunner.core.config import Config

CLIENTS = ("claude-code", "gemini")
SOURCES = {"claude-code": "claude_user_prompt", "gemini": "gemini_user_prompt"}
ISOLATING = frozenset({"SESSION_MESSAGE_CONFLICT", "SESSION_TURN_CLOSED", "SESSION_SETTLE_CONFLICT",
                       "SESSION_CAPACITY_EXCEEDED", "INVALID_OBSERVATION", "INVALID_SESSION_MESSAGE"})


class HookInbox:
    """A drain consumer (``runnable`` / ``step``) over ``hook_inbox`` and the exit of its hosts."""

    name = "hook-inbox"

    def __init__(self, cfg: Config) -> None:
        self.limit = cfg.session_cache["maxSessionBytes"]

    def _exited(self, conn: sqlite3.Connection) -> list[str]:
        queued = hook_inbox.queued_sessions(conn)
        gone = []
        for session_id, instance in sessions.live_sessions(conn, CLIENTS):
            process = identity.parse_key(instance)
            if session_id not in queued and process is not None and not identity.is_alive(process):
                gone.append(session_id)
        return gone

    def runnable(self, conn: sqlite3.Connection) -> bool:
        return hook_inbox.next_row(conn) is not None or bool(self._exited(conn))

    def step(self, conn: sqlite3.Connection) -> bool:
        row = hook_inbox.next_row(conn)  # a plain WAL read: the write lock is taken only to change something
        if row is not None:
            sessions.consume_or_isolate(conn, lambda: self._consume(conn, row), ISOLATING,
                                        lambda code, detail: failures.isolate(conn, row[1], row[0], code, detail))
            return True
        gone = self._exited(conn)
        if not gone:
            return False
        with store.immediate(conn):
            for session_id in gone:
                if not sessions.ended(conn, session_id) and session_id not in hook_inbox.queued_sessions(conn):
                    sessions.end(conn, session_id)
                    activations.drop_snapshot(conn, session_id)
        return True

    def _consume(self, conn: sqlite3.Connection, row: tuple) -> None:
        row_id, session_id, event, body, scope = row
        if not hook_inbox.row_exists(conn, row_id):
            return  # consumed meanwhile
        failures.clear(conn, session_id)
        value = jsonfast.loads(body)
        text, at, message_id = value.get("text"), value["at"], f"hook-{row_id}"
        if event == "prompt":
            still_open = sessions.latest_open_turn(conn, session_id)
            if still_open is not None:
                sessions.settle(conn, session_id, still_open, "interrupted")
            turn = f"{value['turn']}:{row_id}"
            sessions.open_turn(conn, session_id, turn)
            if text:
                source = SOURCES.get(sessions.client_of(conn, session_id), "ambiguous")
                sessions.capture_user(conn, session_id, turn, message_id, text, scope, source, at, self.limit)
                if value.get("issue"):  # the hook could not tell the typed words apart: kept aside
                    sessions.quarantine_turn(conn, session_id, turn, value["issue"])
        elif event == "stop":
            current = sessions.latest_open_turn(conn, session_id)
            if current is not None:
                if "typed" in value:  # Gemini: was the prompt typed, or a command's expansion?
                    issue = gemini_chat.verdict(value.get("transcript"), value["typed"] or "")
                    if issue is not None:
                        sessions.quarantine_turn(conn, session_id, current, issue)
                if text:
                    sessions.capture_context(conn, session_id, current, message_id, "assistant", text, scope, at,
                                             self.limit)
                sessions.settle(conn, session_id, current, "settled")
        elif event == "end":
            sessions.end(conn, session_id)
        hook_inbox.delete_row(conn, row_id)
