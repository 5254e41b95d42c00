"""The drain's consumer of the Codex / ChatGPT Work inbox: transcript tails into the session cache.

Contract:
- Per step, the oldest inbox row of a session that is not isolated is consumed in ONE
  transaction: it must start exactly where the previous row of that session ended (else
  ``CODEX_CURSOR_CONFLICT``); its lines are parsed (``cmrunner.capture.rollout``); each delivered user
  message must match an unconsumed UserPromptSubmit candidate of its turn by digest
  (``CODEX_UNCONFIRMED_DELIVERY``), and the candidate's text is then cleared; records become session
  messages and turn outcomes (``cmrunner.capture.sessions``); the row is deleted and the progress advanced.
  A turn that settles, or a session that ends, without delivering a prompt cm saw (another hook
  blocked it) clears that prompt's text too: nothing can deliver it any more, and it no longer
  counts as a turn still waiting (``cmrunner.capture.waiting``).
- A failure rolls the row's work back and, in the same transaction, records a ``codex_failures``
  row instead, isolating the session: a session-level code as itself, anything else as
  ``UNEXPECTED_FAILURE`` with its class and ``file:line:function``; other sessions go on.
  ``failures.request_recovery`` (``cm session-drain --recover <id>``) lets it be tried again. Only
  a failure of the environment (``cmrunner.core.poison.transient``) propagates.
- Stop and Interrupt leave a watch while their turn is still open: Codex writes the final record
  after the hook ran. ``reconcile`` appends the transcript's newer complete lines as a
  ``Reconcile`` row (the same path a hook takes), so the turn settles without waiting for another
  prompt. Each drain polls a watch for ``WATCH_SECONDS`` (from when it was set or the drain
  started, whichever is later); the durable watch is retried by later drains.
- The first user prompt of a session arrives after Codex already wrote ``task_started``, before the
  SessionStart cursor; a UserPromptSubmit row therefore opens its turn when none is open.
- Every read and write of the Codex inbox tables goes through ``cmrunner.capture.codex_inbox``;
  this module holds the policy, that one the SQL (so the hook, which only appends, never loads
  the transcript parser).
"""

from __future__ import annotations

import json
import sqlite3
import time

from cmrunner.capture import codex_inbox, failures, rollout, sessions, transcript
from cmrunner.capture.admission import sha256_text
from cmrunner.core import poison, store
from cmrunner.core.config import Config
from cmrunner.core.errors import CmError

# The session-level codes this consumer raises by design; anything else a row provokes isolates
# its session too, as UNEXPECTED_FAILURE (``sessions.consume_or_isolate``).
ISOLATING = frozenset({
    rollout.UNKNOWN, rollout.UNKNOWN_COMPLETION, rollout.UNSUPPORTED_VERSION, rollout.UNSETTLED_TURN,
    "CODEX_CURSOR_CONFLICT", "CODEX_UNCONFIRMED_DELIVERY", "CODEX_TRANSCRIPT_REPLACED", "CODEX_UNSAFE_TRANSCRIPT",
    "CODEX_TRANSCRIPT_MISSING", "SESSION_MESSAGE_CONFLICT", "SESSION_TURN_CLOSED", "SESSION_SETTLE_CONFLICT",
    "SESSION_CAPACITY_EXCEEDED", "INVALID_OBSERVATION",
})
WATCH_SECONDS = 60


def _now() -> int:
    return int(time.time() * 1000)


class CodexInbox:
    """A drain consumer (``runnable`` / ``step`` / ``next_due``) over ``codex_inbox``."""

    name = "codex-inbox"

    def __init__(self, cfg: Config) -> None:
        self.limit = cfg.session_cache["maxSessionBytes"]
        self.started = _now()

    # -- scheduling -------------------------------------------------------------------------
    def _next_row(self, conn: sqlite3.Connection) -> tuple | None:
        return codex_inbox.next_row(conn)

    def _due_watches(self, conn: sqlite3.Connection) -> list[tuple[str, str]]:
        return codex_inbox.due_watches(conn, self.started, _now() - WATCH_SECONDS * 1000)

    def runnable(self, conn: sqlite3.Connection) -> bool:
        return self._next_row(conn) is not None

    def next_due(self, conn: sqlite3.Connection) -> int | None:
        """Watched turns keep the drain polling the transcript for a while."""
        return _now() + 200 if self._due_watches(conn) else None

    def step(self, conn: sqlite3.Connection) -> bool:
        row = self._next_row(conn)  # a plain WAL read: the write lock is taken only to change something
        if row is None:
            if not self._due_watches(conn):
                return False
            with store.immediate(conn):
                return self._reconcile(conn)
        sessions.consume_or_isolate(conn, lambda: self._consume(conn, row), ISOLATING,
                                    lambda code, detail: self._isolate(conn, row, code, detail))
        return True

    # -- consumption ------------------------------------------------------------------------
    def _consume(self, conn: sqlite3.Connection, row: tuple) -> None:
        inbox_id, session_id, event, turn_id, start, end, body, scope, received_at = row
        if not codex_inbox.row_exists(conn, inbox_id):
            return  # consumed meanwhile
        failures.clear(conn, session_id)
        progress = codex_inbox.progress(conn, session_id)
        if progress is not None and progress[0] != start:
            raise CmError("CODEX_CURSOR_CONFLICT", "an inbox row does not continue where the last one ended; "
                          "the session is isolated, see `cm status`")
        open_turn = progress[1] if progress else None
        if event == "UserPromptSubmit" and open_turn is None and turn_id:
            open_turn = turn_id
            sessions.open_turn(conn, session_id, turn_id)
        records = rollout.parse(bytes(body), start, open_turn)
        for record in records:
            self._apply(conn, session_id, record)
        open_turn = rollout.open_turn_after(records, open_turn)
        if event in ("Stop", "Interrupt") and turn_id and open_turn == turn_id:
            codex_inbox.add_watch(conn, session_id, turn_id, _now())
        if open_turn is None:
            codex_inbox.drop_watches(conn, session_id)
        if event == "SessionEnd":
            sessions.end(conn, session_id)
            codex_inbox.drop_watches(conn, session_id)
            codex_inbox.drop_undelivered(conn, session_id, None)
        codex_inbox.delete_row(conn, inbox_id)
        codex_inbox.save_progress(conn, session_id, end, open_turn)

    def _apply(self, conn: sqlite3.Connection, session_id: str, record: rollout.Record) -> None:
        if isinstance(record, rollout.TurnStarted):
            sessions.open_turn(conn, session_id, record.turn_id)
        elif isinstance(record, rollout.UserDelivery):
            digest = sha256_text(record.text)
            candidate = codex_inbox.waiting_candidate_scope(conn, session_id, record.turn_id, digest)
            if candidate is None:
                if sessions.has_message(conn, session_id, record.message_id):
                    return  # the same delivery, already captured
                raise CmError("CODEX_UNCONFIRMED_DELIVERY", "a user message in the transcript matches no prompt cm saw "
                              "for that turn; the session is isolated, see `cm status`")
            source = "unsupported_content" if record.unsupported_content else "codex_user_delivery"
            sessions.capture_user(conn, session_id, record.turn_id, record.message_id, record.text, candidate,
                                  source, record.at, self.limit)
            codex_inbox.confirm_candidate(conn, session_id, record.turn_id, digest)
        elif isinstance(record, (rollout.AssistantText, rollout.ToolOutput)):
            role = "assistant" if isinstance(record, rollout.AssistantText) else "tool"
            scope = self._turn_scope(conn, session_id, record.turn_id)
            sessions.capture_context(conn, session_id, record.turn_id, record.message_id, role, record.text, scope,
                                     record.at, self.limit)
        elif isinstance(record, rollout.TurnSettled):
            sessions.settle(conn, session_id, record.turn_id, record.outcome)
            codex_inbox.drop_undelivered(conn, session_id, record.turn_id)

    def _turn_scope(self, conn: sqlite3.Connection, session_id: str, turn_id: str) -> str:
        scope = codex_inbox.turn_candidate_scope(conn, session_id, turn_id)
        return scope if scope is not None else "global"

    def _isolate(self, conn: sqlite3.Connection, row: tuple, code: str, detail: str | None) -> None:
        inbox_id, session_id = row[0], row[1]
        if not codex_inbox.row_still_queued(conn, inbox_id, session_id, row[4]):
            return  # consumed by someone else meanwhile: not a failure of this session
        failures.isolate(conn, session_id, inbox_id, code, detail)

    # -- watches ----------------------------------------------------------------------------
    def _reconcile(self, conn: sqlite3.Connection) -> bool:
        """Inside the caller's transaction: append newer transcript lines of watched sessions."""
        appended = False
        for session_id, turn_id in self._due_watches(conn):
            cursor = codex_inbox.load_cursor(conn, session_id)
            if cursor is None:
                continue
            try:
                tail = transcript.read_tail(cursor, cursor.path, self.limit)
            except Exception as exc:  # this session's transcript only: set it aside, go on
                if poison.transient(exc):
                    raise
                codex_inbox.drop_watches(conn, session_id)
                failures.isolate(conn, session_id, None, *poison.code_of(exc, transcript.CODES))
                continue
            if not tail.body:
                continue
            scope = self._turn_scope(conn, session_id, turn_id)
            codex_inbox.append(conn, session_id, "Reconcile", turn_id, tail.start, tail.end, tail.body,
                               json.dumps({"event": "Reconcile"}), scope, _now())
            codex_inbox.advance_cursor(conn, session_id, tail.cursor)
            appended = True
        return appended
