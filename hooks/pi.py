"""``cm capture --home <abs>``: one Pi bridge event, admitted durably and idempotently.

The event is one JSON object on stdin::

    {"version": 1, "sessionId": "<Pi session id>", "eventId": "<bridge-chosen id>",
     "event": "<Pi event name>", "cwd": "/abs", "hostInstance": "<optional>", "payload": {...}}

Contract:
- The event is strict JSON (``hooks.stdin``) and is validated whole before anything is written:
  ``payload.text`` of ``input``/``message_end`` is a string and ``payload.timestamp``, when given,
  is a number of milliseconds a date can hold; otherwise ``INVALID_CAPTURE_INPUT`` names the field.
- ``eventId`` is the idempotency key inside the session: the same id with the same payload is a
  duplicate (admitted once); the same id with a different payload is ``CAPTURE_CONFLICT``.
- The host instance is ``hostInstance``, else ``COMMON_MEMORY_HOST_INSTANCE``, else the identity
  of the parent process (the Pi process that spawned this capture).
- Admission is one transaction: capacity check, ``pi_inbox`` row (scope frozen from ``cwd``), drain
  reservation. The Pi event semantics (origins, deliveries, settling, sealing) belong to the drain
  (``cmrunner.capture.pi_inbox``).
- Reads ride along: ``memory_read`` (admits nothing, never opens SQLite) and a ``session_start``
  whose payload has ``"readMemory": true`` answer with ``context``, the authorized memory rendered
  as a delimited data block — the bridge freezes it for the process.
"""

from __future__ import annotations

import os

from cmrunner.capture import admission as capture, capacity, pi_inbox
from cmrunner.core import config as config_mod, drainlease, identity, projects, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths
from cmrunner.hooks import runner, stdin

PI_EVENTS = ("session_start", "input", "message_end", "agent_end", "session_shutdown", "memory_flush",
             "memory_read")
READ_ONLY = ("memory_read",)
KEYS = ("version", "sessionId", "eventId", "event", "cwd", "hostInstance", "payload")
USAGE = "cm capture --home <absolute path>"
TEXT_EVENTS = ("input", "message_end")  # the drain reads payload.text of these
LATEST_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last instant a date can hold


def _bad(field: str, expected: str) -> InputError:
    return InputError("INVALID_CAPTURE_INPUT", f"field '{field}' must be {expected}; the event was not admitted")


def validate(event: dict) -> dict:
    for key in event:
        if key not in KEYS:
            raise _bad(key, "absent (unknown field)")
    if event.get("version") != 1 or isinstance(event.get("version"), bool):
        raise _bad("version", "1")
    for field in ("sessionId", "eventId"):
        value = event.get(field)
        if not isinstance(value, str) or not identity.is_plain_id(value):
            raise _bad(field, "1-200 characters of letters, digits and :._-")
    name = event.get("event")
    if not isinstance(name, str):
        raise _bad("event", "a string")
    if name not in PI_EVENTS:
        raise InputError("UNKNOWN_CAPTURE_EVENT", f"Pi event {name[:64]!r} is not one cm captures; update the bridge")
    cwd = event.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise _bad("cwd", "an absolute path")
    instance = event.get("hostInstance", "")
    if "hostInstance" in event and (not isinstance(instance, str) or not identity.is_plain_id(instance)):
        raise _bad("hostInstance", "1-200 characters of letters, digits and :._-")
    payload = event.get("payload")
    if not isinstance(payload, dict):
        raise _bad("payload", "an object")
    if name in TEXT_EVENTS and not isinstance(payload.get("text"), str):
        raise _bad("payload.text", "a string")
    stamp = payload.get("timestamp")
    if stamp is not None and (isinstance(stamp, bool) or not isinstance(stamp, (int, float))
                              or not 0 <= stamp <= LATEST_TIMESTAMP_MS):
        raise _bad("payload.timestamp", f"milliseconds since 1970 between 0 and {LATEST_TIMESTAMP_MS}")
    return event


def _host_instance(event: dict) -> str:
    if "hostInstance" in event:
        return event["hostInstance"]
    if identity.HOST_INSTANCE_ENV in os.environ:
        return identity.host_instance()
    parent = identity.of(os.getppid())
    if parent is None:
        raise CmError("INVALID_HOST_INSTANCE", "the Pi process that started this capture is gone; nothing was admitted")
    return f"pi:{parent.key()}"


def handle(home: str, event: dict) -> dict:
    validate(event)
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    answer: dict = {"ok": True}
    if event["event"] in READ_ONLY or (event["event"] == "session_start" and event["payload"].get("readMemory") is True):
        from cmrunner.reading import reader  # memory reads only: per-turn captures skip it

        scope = projects.scope_for(paths, event["cwd"])
        contexts = reader.authorized_contexts(cfg.allowed_scopes, scope if scope != "global" else None)
        view = reader.read_memory(paths, contexts, home)
        from cmrunner.capture import waiting  # memory reads only: per-turn captures skip it

        answer["context"], warning = reader.render_block(view, waiting=waiting.turns_in(paths, [scope]),
                                                         refresh=reader.REFRESH_COMMAND)
        if warning:
            answer["warning"] = warning
        if event["event"] in READ_ONLY:
            return answer
    return {**answer, **_admit(home, cfg, paths, event)}


def _admit(home: str, cfg: config_mod.Config, paths: DataPaths, event: dict) -> dict:
    instance = _host_instance(event)
    session_id = capture.session_key("pi", instance, event["sessionId"])
    scope = projects.scope_for(paths, event["cwd"])
    body = capture.canonical_json({"event": event["event"], "cwd": os.path.normpath(event["cwd"]),
                                   "payload": event["payload"]})
    digest = capture.sha256_text(body)
    conn = store.open_store(paths, store.HOOK_BUSY_MS)
    # Closed only on failure: after a commit it is left to the process exit (cmrunner.core.db, "hook connections").
    try:
        with store.immediate(conn, store.HOOK_BUSY_MS):
            # admitted_events outlives the inbox row (the drain deletes consumed rows), so a
            # re-delivery after consumption is still recognised.
            prefix = f"pi:{event['eventId']}:"
            admitted = capture.admitted_with_prefix(conn, session_id, prefix)
            if admitted is not None:
                if admitted != prefix + digest:
                    raise CmError(
                        "CAPTURE_CONFLICT",
                        "this eventId was already admitted with a different payload; the bridge must use a new id",
                    )
                return {"ok": True, "admitted": False, "duplicate": True}
            capacity.check_capacity(conn, cfg, session_id, len(body.encode("utf-8")))
            pi_inbox.append(conn, session_id, event["eventId"], event["event"], digest, body, scope, capture.now_ms(),
                            user_turn=pi_inbox.delivers_turn(event["event"], event["payload"]))
            capture.mark_admitted(conn, session_id, prefix + digest)
            drainlease.ensure_drain(conn, home)
    except BaseException:
        conn.close()
        raise
    return {"ok": True, "admitted": True, "duplicate": False}


def main(argv: list[str]) -> int:
    """Entry for ``cm capture …`` (argv excludes ``cm capture``)."""

    def body() -> dict:
        home = runner.parse_home(argv, USAGE)
        return handle(home, stdin.read_event(0, code="INVALID_CAPTURE_INPUT"))

    return runner.run(body, "capture")
