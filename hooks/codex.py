"""``cm hook codex|work --home <abs>``: one Codex / ChatGPT Work hook event, admitted durably.

Contract (hosts.md §1.3-1.4, reference-facts §6.2):
- Events cm uses: SessionStart, UserPromptSubmit, PostToolUse, Stop, Interrupt, SessionEnd. Other
  events Codex documents are accepted and ignored without touching the store; a name Codex does
  not document is ``UNKNOWN_HOOK_EVENT``.
- In one ``BEGIN IMMEDIATE`` transaction an event: is de-duplicated by its digest, opens or finds
  the host activation, appends the transcript's new complete lines plus an envelope (no prompt or
  tool text) to ``codex_inbox``, stores the UserPromptSubmit candidate (digest, text, frozen
  scope), advances the cursor, and reserves a drain (``drainlease.ensure_drain``). Then COMMIT.
- The first SessionStart (``startup``/``resume``) of an activation reads authorized memory once and
  freezes it; ``compact``/``clear``/``reload`` re-attach the frozen block without reading files;
  a snapshot replaced by ``cm session-refresh`` is delivered once by the next UserPromptSubmit or
  PostToolUse.
- An ephemeral session (``transcript_path: null``) is activated for injection but captures nothing,
  and the SessionStart output says so.
- No model call, no repository lock, no Writer import.
"""

from __future__ import annotations

import os
import sqlite3

from cmrunner.capture import activations, admission as capture, capacity, codex_inbox, transcript
from cmrunner.core import config as config_mod, drainlease, identity
from cmrunner.core.errors import CmError, InputError
from cmrunner.hooks import runner, stdin

TYPE_CHECKING = False
if TYPE_CHECKING:  # the reader loads only where memory is read: per-turn events skip it (issue 35)
    from cmrunner.reading import reader

CLIENTS = {"codex": "codex", "work": "chatgpt-work"}
USED_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "Interrupt", "SessionEnd")
IGNORED_EVENTS = ("PreToolUse", "PermissionRequest", "PreCompact", "PostCompact", "SubagentStart",
                  "SubagentStop", "preModelRequest", "postModelRequest")
START_SOURCES = ("startup", "resume", "compact", "clear", "reload")
READING_SOURCES = ("startup", "resume")
TURN_EVENTS = ("UserPromptSubmit", "Stop", "Interrupt")
USAGE = "cm hook codex|work --home <absolute path>"
EPHEMERAL_NOTE = "cm: this session is ephemeral (no transcript), so nothing from it will be remembered"


def _abs_path(event: dict, field: str, nullable: bool = False) -> str | None:
    if field not in event:
        raise stdin.bad_field(field, "present")
    value = event[field]
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not os.path.isabs(value) or len(value) > 4096:
        raise stdin.bad_field(field, "an absolute path" + (" or null" if nullable else ""))
    return os.path.normpath(value)


class HookEvent:
    """The validated fields cm uses from one Codex hook event."""

    __slots__ = ("name", "session", "cwd", "transcript", "source", "turn_id", "prompt", "digest")

    def __init__(self, event: dict) -> None:
        name = event.get("hook_event_name")
        if not isinstance(name, str):
            raise stdin.bad_field("hook_event_name", "a string")
        if name not in USED_EVENTS and name not in IGNORED_EVENTS:
            raise InputError("UNKNOWN_HOOK_EVENT", f"hook event {name[:64]!r} is not a Codex hook event; check the hook configuration")
        self.name = name
        if name in IGNORED_EVENTS:
            return
        self.session = stdin.text_field(event, "session_id")
        cwd = _abs_path(event, "cwd")
        assert cwd is not None  # only a nullable field comes back None
        self.cwd = cwd
        self.transcript = _abs_path(event, "transcript_path", nullable=True)
        self.source = None
        self.turn_id = None
        self.prompt = None
        if name == "SessionStart":
            source = event.get("source")
            if source not in START_SOURCES:
                raise stdin.bad_field("source", "one of " + ", ".join(START_SOURCES))
            self.source = source
        if name in TURN_EVENTS or event.get("turn_id") is not None:
            self.turn_id = stdin.text_field(event, "turn_id")
        if name == "UserPromptSubmit":
            prompt = event.get("prompt")
            if not isinstance(prompt, str):
                raise stdin.bad_field("prompt", "a string")
            self.prompt = prompt
        self.digest = capture.event_digest(event)

    @property
    def ignored(self) -> bool:
        return self.name in IGNORED_EVENTS

    def envelope(self, host_instance: str, scope: str) -> str:
        """What the consumer needs besides the transcript bytes; never prompt or tool text."""
        return capture.canonical_json({
            "event": self.name, "thread": self.session, "turnId": self.turn_id, "source": self.source,
            "cwd": self.cwd, "transcriptPath": self.transcript, "hostInstance": host_instance, "scope": scope,
        })


class _Activation:
    __slots__ = ("base", "session_id", "active", "is_new")

    def __init__(self, base: str, session_id: str, active: bool, is_new: bool) -> None:
        self.base = base
        self.session_id = session_id
        self.active = active
        self.is_new = is_new


def _activation(conn: sqlite3.Connection, client: str, instance: str, ev: HookEvent) -> _Activation:
    base = capture.session_key(client, instance, ev.session)
    row = activations.activation(conn, base)
    if row is not None and row[1]:
        return _Activation(base, row[0], True, False)
    if ev.name != "SessionStart":
        if row is not None and capture.was_admitted(conn, row[0], ev.digest):
            # A re-delivery of the event that closed this activation (e.g. SessionEnd twice).
            return _Activation(base, row[0], False, False)
        raise CmError(
            "CODEX_SESSION_START_REQUIRED",
            "this session has no SessionStart on record; cm captures sessions started after it was installed",
        )
    # After a real SessionEnd the same thread in the same process is a new, independent session.
    instance_key = instance if row is None else f"{instance}:{os.urandom(8).hex()}"
    session_id = capture.session_key(client, instance_key, ev.session)
    now = capture.now_ms()
    activations.open_activation(conn, base, session_id, client, instance, ev.session, ev.cwd, now)
    from cmrunner.capture import sessions  # a SessionStart only: per-turn events skip it

    sessions.register(conn, session_id, client, instance_key, ev.session, now)
    return _Activation(base, session_id, True, True)


def handle(client_flag: str, home: str, event: dict) -> dict:
    """Admit one validated event; returns the JSON object to print."""
    client = CLIENTS[client_flag]
    ev = HookEvent(event)
    if ev.ignored:
        return {}
    reading = ev.name == "SessionStart" and ev.source in READING_SOURCES
    return runner.admit_event(home, ev.cwd, reading, identity.host_instance,
                              lambda conn, cfg, instance, scope, fresh_view:
                              _admit(conn, cfg, home, client, instance, scope, ev, fresh_view))


def _admit(conn: sqlite3.Connection, cfg: config_mod.Config, home: str, client: str, instance: str, scope: str,
           ev: HookEvent, fresh_view: reader.MemoryView | None) -> dict:
    act = _activation(conn, client, instance, ev)
    output: dict = {}
    if ev.name == "SessionStart":
        frozen = activations.frozen_snapshot(conn, act.session_id)
        if frozen is None and fresh_view is not None:
            from cmrunner.capture import waiting  # a reading SessionStart only: per-turn events skip it
            from cmrunner.reading import reader

            block, warning = reader.render_block(fresh_view, waiting=waiting.turns(conn, scope),
                                                  refresh=reader.REFRESH_COMMAND)
            if ev.transcript is None:
                warning = EPHEMERAL_NOTE if warning is None else f"{warning}; {EPHEMERAL_NOTE}"
            activations.freeze_snapshot(conn, act.session_id, block, capture.canonical_json(sorted({"global", scope})),
                                    capture.now_ms())
            output = runner.context_output(ev.name, block, warning)
        elif frozen is not None and ev.source not in READING_SOURCES:
            output = runner.context_output(ev.name, frozen, None)
    elif ev.name in ("UserPromptSubmit", "PostToolUse"):
        pending = activations.take_pending_snapshot(conn, act.session_id)
        if pending is not None:  # a /memory-refresh replaced the snapshot: deliver it now, once
            output = runner.context_output(ev.name, pending, None)
    if not act.active or not capture.mark_admitted(conn, act.session_id, ev.digest):
        return output  # the same event was delivered before: admitted once, answered again
    if ev.transcript is None:
        if ev.name == "SessionEnd":
            _end(conn, act)
        return output
    cursor = codex_inbox.load_cursor(conn, act.session_id)
    if cursor is None:
        # Activation: check that this Codex writes a transcript format cm knows, then start at the
        # end — history written before cm saw this session is not admitted.
        from cmrunner.capture import rollout

        rollout.session_meta(transcript.first_line(ev.transcript, cfg.session_cache["maxSessionBytes"]))
        cursor = transcript.start_cursor(ev.transcript)
        tail = transcript.Tail(cursor.offset, cursor.offset, b"", cursor, partial=False)
    else:
        tail = transcript.read_tail(cursor, ev.transcript, cfg.session_cache["maxSessionBytes"])
    if ev.name == "SessionEnd" and tail.partial:
        raise CmError("CODEX_PARTIAL_TRANSCRIPT", "the transcript ends mid-line at SessionEnd; the event was not admitted")
    prompt_bytes = len(ev.prompt.encode("utf-8")) if ev.prompt is not None else 0
    capacity.check_capacity(conn, cfg, act.session_id, len(tail.body) + prompt_bytes)
    now = capture.now_ms()
    codex_inbox.append(conn, act.session_id, ev.name, ev.turn_id, tail.start, tail.end, tail.body,
                       ev.envelope(instance, scope), scope, now)
    if ev.prompt is not None:
        codex_inbox.add_candidate(conn, act.session_id, ev.turn_id, capture.sha256_text(ev.prompt), ev.prompt, scope, now)
    codex_inbox.save_cursor(conn, act.session_id, tail.cursor, ev.turn_id if ev.name == "UserPromptSubmit" else None)
    if ev.name == "SessionEnd":
        _end(conn, act)
    drainlease.ensure_drain(conn, home)
    return output


def _end(conn: sqlite3.Connection, act: _Activation) -> None:
    """A real session end: the activation closes and its frozen snapshot is dropped."""
    activations.close_activation(conn, act.base)
    activations.drop_snapshot(conn, act.session_id)


def main(argv: list[str]) -> int:
    """Entry for ``cm hook <client> …`` (argv excludes ``cm hook``)."""

    def body() -> dict:
        if not argv or argv[0] not in CLIENTS:
            raise InputError("INVALID_ARGUMENTS", f"usage: {USAGE}")
        home = runner.parse_home(argv[1:], USAGE)
        return handle(argv[0], home, stdin.read_event(0))

    return runner.run(body)
