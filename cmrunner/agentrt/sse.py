"""A bounded Server-Sent Events decoder for model streams.

Contract:
- ``decode(chunks, max_event_bytes)`` turns an iterator of body byte chunks into ``Event``
  objects (``event`` name, default ``message``, and ``data``: the event's ``data:`` lines joined by
  ``\\n``, decoded as UTF-8 with replacement). Lines end in LF, CRLF or CR; ``:`` lines are
  comments; ``id`` and ``retry`` fields are ignored (a model stream is never resumed). As the SSE
  specification says, an event is dispatched by its blank line; one the body ends inside is dropped.
- Memory is bounded whatever the server sends: the bytes buffered for one event (its fields and
  the unfinished line, comments included) may not exceed ``max_event_bytes``, else
  ``EventTooLarge`` is raised at once, without waiting for the line or the event to end.
- Byte budgets over the whole stream are the caller's: it sees every chunk before it is decoded
  (see ``netclient``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_LINE_END = re.compile(rb"\r\n|\r|\n")


class EventTooLarge(Exception):
    """One event (or one line) outgrew the bound."""


class Event:
    __slots__ = ("event", "data")

    def __init__(self, event: str, data: str) -> None:
        self.event = event
        self.data = data


def decode(chunks: Iterable[bytes], max_event_bytes: int) -> Iterator[Event]:
    pending = b""  # the unfinished line
    name = ""
    data: list[bytes] = []
    size = 0  # bytes of the current event's fields
    for chunk in chunks:
        buffer = pending + chunk if pending else chunk
        start = 0
        for match in _LINE_END.finditer(buffer):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # a CR at the end may be the first half of CRLF: wait for the next chunk
            line = buffer[start:match.start()]
            start = match.end()
            if not line:
                if data or name:
                    yield Event(name or "message", b"\n".join(data).decode("utf-8", "replace"))
                name, data, size = "", [], 0
                continue
            size += len(line)
            if size > max_event_bytes:
                raise EventTooLarge()
            if line.startswith(b":"):
                size -= len(line)  # a comment is dropped, so it only counts while it is buffered
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode("utf-8", "replace")
        pending = buffer[start:]
        if size + len(pending) > max_event_bytes:
            raise EventTooLarge()
    # An event is dispatched only by its blank line; a body that ends without one drops it. The
    # one blank line still buffered is a lone CR at the very end (it could have begun a CRLF).
    if pending == b"\r" and (data or name):
        yield Event(name or "message", b"\n".join(data).decode("utf-8", "replace"))
