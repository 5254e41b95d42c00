"""Shared admission for hosts whose hook payloads carry the words: Claude Code and Gemini CLI.

``cm hook claude|gemini --home <abs>`` reads one event (``hook_event_name`` names it) and answers on
stdout with one JSON object. Each host's module (``cmrunner.hooks.claude``, ``cmrunner.hooks.gemini``)
describes its events in a ``HostSpec``; this module holds what they share.

Contract:
- The host is never blocked: the process always exits 0 and prints JSON (``{}`` when there is
  nothing to say). A refused event — malformed, too large, from a session cm never saw start, a
  failing store — is counted in ``hook_rejections`` for ``cm status`` (code and cm's own message,
  never payload text) and its controlled line goes to stderr; an unknown event name is counted
  the same way but prints nothing, so a newer host cannot show an error on every prompt.
- Admission is one ``BEGIN IMMEDIATE`` transaction, so a refused event stores nothing. Events are
  de-duplicated by the digest of their payload (see the key below).
- Start (SessionStart): the first start of a host process's session reads authorized memory once
  and freezes it; later starts of the same activation (``compact``, ``clear``) re-attach the frozen
  block. The block is rendered within the host's ``context_limit`` (Claude Code cuts
  ``additionalContext`` above about 10,000 characters), so it is whole or replaced by a notice.
- Prompt (UserPromptSubmit / BeforeAgent): the typed prompt from the payload is queued with its
  scope frozen from ``cwd``. Gemini CLI in ``-p`` reports the prompt with the SessionStart context
  of every hook prepended inside ``<hook_context>`` tags: that part is cut off
  (``gemini_chat.typed_part``), so no hook's context (cm's memory block included) comes back as
  user words; when the typed part cannot be told apart, the prompt is queued with the issue
  ``UNCONFIRMED_PROMPT`` (cm's own block removed) and the drain keeps it quarantined.
  Gemini also reports a custom command as its expansion: its AfterAgent row carries the transcript
  path and the digest of the typed prompt, and the drain checks the chat record (``gemini_chat``).
  A prompt that is a command the host ran (``slashcommands.is_command``: ``/name`` naming a
  built-in or a custom command that exists for that host) is queued without its text: it is never
  user evidence. Any other ``/…`` or ``!…`` prompt is words the model received, and a turn. Tool
  results, command expansions and compaction summaries never reach cm at all: cm does not
  subscribe to the events that carry them.
- De-duplication key: the digest of the payload; a Claude Code prompt or stop without
  ``prompt_id`` adds the transcript's size (``_keyed``), so two identical prompts stay two turns.
- Stop (Stop / AfterAgent): the assistant's final text is queued as context for the open turn,
  which it settles. Compaction (PreCompact / PreCompress) answers ``{}`` at once and stores nothing:
  compaction does not seal a session.
- End (SessionEnd): one row is queued and the activation closes; the seal of the tail happens in
  the detached drain, so the hook returns within the host's short end budget. A host that exits
  without it is found by the drain's exit detection (``cmrunner.capture.hook_consumer``).
- The host process is the nearest ancestor that is not a shell (``identity.launcher_instance``).
- No model call, no repository lock, no Writer import: stdlib only.
"""

from __future__ import annotations

import os
import sqlite3
import time

from cmrunner.capture import (
    activations,
    admission as capture,
    capacity,
    gemini_chat,
    hook_inbox,
    hook_rejections,
)
from cmrunner.core import config as config_mod, drainlease, identity, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths
from cmrunner.hooks import runner, slashcommands, stdin

TYPE_CHECKING = False
if TYPE_CHECKING:  # the reader loads only where memory is read: per-turn events skip it (issue 35)
    from cmrunner.reading import reader

UNKNOWN = "UNKNOWN_HOOK_EVENT"
UNCONFIRMED = "UNCONFIRMED_PROMPT"


class HostSpec:
    """What differs between the hosts: client id, event names, payload fields, injection limit."""

    __slots__ = ("client", "label", "start", "prompt", "stop", "compact", "end", "prompt_field", "reply_field",
                 "ignored", "context_limit", "usage", "chat_record")

    def __init__(self, client: str, label: str, events: tuple[str, str, str, str, str], prompt_field: str,
                 reply_field: str, ignored: tuple[str, ...], context_limit: int, usage: str,
                 chat_record: bool = False) -> None:
        self.client, self.label = client, label
        self.start, self.prompt, self.stop, self.compact, self.end = events
        self.prompt_field, self.reply_field = prompt_field, reply_field
        self.ignored, self.context_limit, self.usage = ignored, context_limit, usage
        # Gemini CLI: the prompt may carry prepended hook context or be a command's expansion, which
        # only its chat record shows (cmrunner.capture.gemini_chat).
        self.chat_record = chat_record

    @property
    def events(self) -> tuple[str, ...]:
        return (self.start, self.prompt, self.stop, self.compact, self.end)


def _optional_text(event: dict, field: str) -> str | None:
    value = event.get(field)
    if value is not None and not isinstance(value, str):
        raise stdin.bad_field(field, "a string or absent")
    return value


def _keyed(spec: HostSpec, name: str, event: dict) -> dict:
    """What an event is de-duplicated by. A per-turn event that carries neither ``prompt_id`` nor a
    ``timestamp`` (Claude Code before ``prompt_id`` existed) is the same JSON for two identical
    prompts, so its key adds the size of the host's transcript, which grows between two turns and
    not between two deliveries of one event; without a readable transcript it gets a random key
    (two identical prompts are never merged; a re-delivery then stays an interrupted turn)."""
    if name not in (spec.prompt, spec.stop) or event.get("prompt_id") or event.get("timestamp"):
        return event
    path = event.get("transcript_path")
    try:
        size: object = os.stat(path).st_size if isinstance(path, str) and os.path.isabs(path) else None
    except (OSError, ValueError):
        size = None
    return {"event": event, "transcript_size": os.urandom(16).hex() if size is None else size}


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


class Event:
    """The validated fields cm uses from one hook event."""

    __slots__ = ("name", "session", "cwd", "source", "prompt", "reply", "turn", "digest", "transcript")

    def __init__(self, spec: HostSpec, event: dict) -> None:
        name = event.get("hook_event_name")
        if not isinstance(name, str):
            raise stdin.bad_field("hook_event_name", "a string")
        if name not in spec.events and name not in spec.ignored:
            raise InputError(UNKNOWN, f"{spec.label} event {name[:64]!r} is not one cm knows; it was ignored")
        self.name = name
        self.source = self.prompt = self.reply = self.turn = self.transcript = None
        if name in spec.ignored or name == spec.compact:
            return
        self.session = stdin.text_field(event, "session_id")
        cwd = event.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or len(cwd) > 4096:
            raise stdin.bad_field("cwd", "an absolute path")
        self.cwd = os.path.normpath(cwd)
        if name == spec.start:
            self.source = _optional_text(event, "source")
        elif name == spec.prompt:
            prompt = event.get(spec.prompt_field)
            if not isinstance(prompt, str):
                raise stdin.bad_field(spec.prompt_field, "a string")
            self.prompt = prompt
            turn = _optional_text(event, "prompt_id")
            self.turn = turn[:200] if turn else None
        elif name == spec.stop:
            self.reply = _optional_text(event, spec.reply_field)
            if spec.chat_record:
                self.prompt = _optional_text(event, spec.prompt_field)
                path = event.get("transcript_path")
                self.transcript = path if isinstance(path, str) and os.path.isabs(path) and len(path) <= 4096 else None
        self.digest = capture.event_digest(_keyed(spec, name, event))

    def passive(self, spec: HostSpec) -> bool:
        """Events answered at once without touching the store."""
        return self.name in spec.ignored or self.name == spec.compact


def handle(spec: HostSpec, home: str, payload: dict) -> dict:
    """Admit one event; returns the JSON object to print."""
    ev = Event(spec, payload)
    if ev.passive(spec):
        return {}
    reading = ev.name == spec.start and ev.source != "compact"
    return runner.admit_event(home, ev.cwd, reading, lambda: identity.launcher_instance(spec.label),
                              lambda conn, cfg, instance, scope, fresh:
                              _admit(conn, spec, cfg, home, instance, scope, ev, fresh))


def _admit(conn: sqlite3.Connection, spec: HostSpec, cfg: config_mod.Config, home: str, instance: str, scope: str,
           ev: Event, fresh: reader.MemoryView | None) -> dict:
    base = capture.session_key(spec.client, instance, ev.session)
    row = activations.activation(conn, base)
    if ev.name == spec.start:
        if row is None or not row[1]:
            # After a real SessionEnd the same session in the same process is a new, independent one.
            key = instance if row is None else f"{instance}:{os.urandom(8).hex()}"
            session_id = capture.session_key(spec.client, key, ev.session)
            now = capture.now_ms()
            activations.open_activation(conn, base, session_id, spec.client, instance, ev.session, ev.cwd, now)
            from cmrunner.capture import sessions  # a SessionStart only: per-turn events skip it

            sessions.register(conn, session_id, spec.client, instance, ev.session, now)
        else:
            session_id = row[0]
        capture.mark_admitted(conn, session_id, ev.digest)
        frozen = activations.frozen_snapshot(conn, session_id)
        if frozen is not None:
            return runner.context_output(ev.name, frozen, None)
        if fresh is None:
            return {}
        from cmrunner.capture import waiting  # a reading SessionStart only: per-turn events skip it
        from cmrunner.reading import reader

        block, warning = reader.render_block(fresh, spec.context_limit, waiting.turns(conn, scope))
        activations.freeze_snapshot(conn, session_id, block, capture.canonical_json(sorted({"global", scope})),
                                    capture.now_ms())
        return runner.context_output(ev.name, block, warning)
    if row is None or not row[1]:
        if row is not None and capture.was_admitted(conn, row[0], ev.digest):
            return {}  # a re-delivery of an event already admitted (e.g. SessionEnd twice)
        raise CmError("SESSION_START_REQUIRED", f"this {spec.label} session has no SessionStart on record; "
                      "cm captures sessions started after its hooks were installed")
    session_id = row[0]
    if not capture.mark_admitted(conn, session_id, ev.digest):
        return {}
    now = capture.now_ms()
    if ev.name == spec.prompt:
        assert ev.prompt is not None
        typed = gemini_chat.typed_part(ev.prompt) if spec.chat_record else ev.prompt
        command = typed is not None and slashcommands.is_command(spec.client, typed, ev.cwd)
        text = None if typed is None or command or not typed.strip() else typed
        body = {"text": text, "command": command, "turn": ev.turn or ev.digest[:32], "at": _iso(now)}
        if typed is None:  # the typed words cannot be told from hook context: kept aside, never evidence
            frozen = activations.frozen_snapshot(conn, session_id)
            kept = gemini_chat.strip_escaped(ev.prompt, frozen) if frozen else ev.prompt
            body.update({"text": kept if kept.strip() else None, "issue": UNCONFIRMED})
        event, user_turn = "prompt", typed is not None and text is not None
    elif ev.name == spec.stop:
        body = {"text": ev.reply if ev.reply and ev.reply.strip() else None, "at": _iso(now)}
        if spec.chat_record:  # what the drain checks the turn's prompt against (never the prompt's text)
            typed = gemini_chat.typed_part(ev.prompt) if ev.prompt is not None else None
            body.update({"transcript": ev.transcript, "typed": gemini_chat.digest(typed) if typed else None})
        event, user_turn = "stop", False
    else:
        body, event, user_turn = {"at": _iso(now)}, "end", False
    encoded = capture.canonical_json(body)
    capacity.check_capacity(conn, cfg, session_id, len(encoded.encode("utf-8")))
    hook_inbox.append(conn, session_id, event, encoded, scope, now, user_turn=user_turn)
    if event == "end":
        activations.close_activation(conn, base)
        activations.drop_snapshot(conn, session_id)
    drainlease.ensure_drain(conn, home)
    return {}


def _record(spec: HostSpec, home: str | None, code: str, message: str) -> None:
    """Count a refused event for ``cm status``; best effort (a store that cannot open cannot count)."""
    if home is None:
        return
    try:
        cfg = config_mod.load(home)
        conn = store.open_store(DataPaths(cfg.data_root), store.HOOK_BUSY_MS)
        with store.immediate(conn, store.HOOK_BUSY_MS):
            hook_rejections.record(conn, spec.client, code, message)
    except Exception:  # the host must never see cm fail; stderr already has the line
        pass


def main(spec: HostSpec, argv: list[str], limit: int = stdin.EVENT_LIMIT) -> int:
    """Entry for ``cm hook claude|gemini …`` (argv excludes ``cm hook <host>``); always exit 0."""
    home: str | None = None
    try:
        home = runner.parse_home(argv, spec.usage)
        result = handle(spec, home, stdin.read_event(0, limit))
    except CmError as exc:
        code, message, line = exc.code, exc.message, exc.line()
    except sqlite3.Error:
        code, message = "STORE_UNAVAILABLE", "the runtime database failed; run `cm status` to check it"
        line = f"cm: {code}: {message}"
    except MemoryError:
        code, message = "INTERNAL_ERROR", "out of memory while handling the event"
        line = f"cm: {code}: {message}"
    except Exception as exc:  # never a traceback or event text towards the host
        code, message = "INTERNAL_ERROR", f"unexpected {type(exc).__name__}; please report it"
        line = f"cm: {code}: {message}"
    else:
        runner.emit(result)
        return 0
    _record(spec, home, code, message)
    if code != UNKNOWN:
        try:
            os.write(2, (line + "\n").encode("utf-8", "replace"))
        except OSError:
            pass
    runner.emit({})
    return 0
