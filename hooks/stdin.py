"""Reading one host event from stdin: bounded, strict, and validated before anything is written.

Contract: at most ``limit`` bytes are read (the limit is enforced while reading, so a huge or
endless stdin cannot exhaust memory); the bytes must be strict UTF-8 without NUL and parse as one
JSON object whose strings contain no NUL. Anything else raises ``InputError`` with a stable code.
Stdlib only.
"""

from __future__ import annotations

import os

from cmrunner.core import jsonfast
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


def _reject_nul(value: object) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise InputError("INVALID_HOOK_INPUT", "the event contains a NUL character; it was not admitted")
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_nul(key)
            _reject_nul(item)
    elif isinstance(value, list):
        for item in value:
            _reject_nul(item)


def parse_event(raw: bytes) -> dict:
    """Decode one event; see module contract."""
    if b"\x00" in raw:
        raise InputError("INVALID_HOOK_INPUT", "the event contains a NUL byte; it was not admitted")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise InputError("INVALID_ENCODING", "the event on stdin is not valid UTF-8; it was not admitted") from None
    try:
        event = jsonfast.loads(text)
    except (ValueError, RecursionError):
        raise InputError("INVALID_HOOK_INPUT", "the event on stdin is not valid JSON; it was not admitted") from None
    if not isinstance(event, dict):
        raise InputError("INVALID_HOOK_INPUT", "the event on stdin must be a JSON object; it was not admitted")
    try:
        _reject_nul(event)
    except RecursionError:
        raise InputError("INVALID_HOOK_INPUT", "the event on stdin is nested too deeply; it was not admitted") from None
    return event


def read_event(fd: int = 0, limit: int = EVENT_LIMIT) -> dict:
    return parse_event(read_bytes(fd, limit))
