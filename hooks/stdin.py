"""Reading one host event from stdin: bounded, strict, and validated before anything is written.

Contract: at most ``limit`` bytes are read (the limit is enforced while reading, so a huge or
endless stdin cannot exhaust memory); the bytes must be strict UTF-8 without NUL and parse as one
JSON object that is strict JSON (``cmrunner.core.strictjson``: no NaN or Infinity, no duplicate
key, no lone surrogate, no NUL, bounded depth). Anything else raises ``InputError`` with a stable
code naming the field; ``bad_field`` / ``text_field`` say the same for one field of a host's hook
event (``INVALID_HOOK_INPUT``).
Stdlib only.
"""

from __future__ import annotations

import os

from cmrunner.core import strictjson
from cmrunner.core.errors import InputError

EVENT_LIMIT = 1 << 20


def read_bytes(fd: int, limit: int = EVENT_LIMIT) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise InputError("INPUT_TOO_LARGE", f"the event on stdin is larger than {limit} bytes; it was not admitted")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_event(raw: bytes, code: str = "INVALID_HOOK_INPUT") -> dict:
    """Decode one event; see module contract. ``code`` is the entry's code for input that is not
    strict JSON (``strictjson.code_for`` keeps its own for bad text and depth)."""
    if b"\x00" in raw:
        raise InputError(code, "the event contains a NUL byte; it was not admitted")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise InputError("INVALID_ENCODING", "the event on stdin is not valid UTF-8; it was not admitted") from None
    try:
        event = strictjson.loads(text)
    except strictjson.Rejected as exc:
        raise InputError(strictjson.code_for(exc, code), f"{exc.what()}; the event was not admitted") from None
    if not isinstance(event, dict):
        raise InputError(code, "the event on stdin must be a JSON object; it was not admitted")
    return event


def read_event(fd: int = 0, limit: int = EVENT_LIMIT, code: str = "INVALID_HOOK_INPUT") -> dict:
    return parse_event(read_bytes(fd, limit), code)


def bad_field(field: str, expected: str) -> InputError:
    """The refusal of a hook event whose ``field`` is not ``expected``."""
    return InputError("INVALID_HOOK_INPUT", f"field '{field}' must be {expected}; the event was not admitted")


def text_field(event: dict, field: str, limit: int = 512) -> str:
    """``event[field]``, a non-empty string of at most ``limit`` characters (else ``bad_field``)."""
    value = event.get(field)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise bad_field(field, f"a non-empty string of at most {limit} characters")
    return value
