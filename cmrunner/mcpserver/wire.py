"""The stdio wire of ``cm mcp``: every line a host sends is held to strict JSON and answered.

Why: the MCP SDK's own stdio transport parses each line with pydantic and, when that fails,
drops the line without an answer (the host waits for its timeout), and it takes a duplicate key's
last value. cm reads the wire itself and hands the SDK's server loop only messages that passed.

Contract:
- ``strict_stdio()`` serves the process's stdin/stdout as the SDK's transport does: while it is
  open the wire lives on private descriptors (close-on-exec), fd 0 reads ``/dev/null`` and fd 1
  writes to stderr, so a stray ``print`` or a child process cannot touch the protocol; both are
  restored on exit. It yields the ``(read_stream, write_stream)`` pair the SDK's
  ``Server.run`` takes; stdout carries only JSON-RPC messages, one per line.
- Lines end at ``\\n`` (a trailing ``\\r`` is JSON whitespace). A line holding only whitespace is
  no message and is skipped. A line longer than ``MAX_LINE_BYTES`` (the advertised
  ``maxMessageBytes``, 1 MiB: the protocol's framing limit for a whole message) is never
  buffered past that size: its bytes are skipped up to its newline and it is answered.
- Each other line is judged in this order (``judge``), and a bad one is answered with one
  JSON-RPC 2.0 error while the next line is served as usual:
  not UTF-8 (``INVALID_ENCODING``), too long (``INPUT_TOO_LARGE``) or not JSON at all
  (``INVALID_MCP_INPUT``) -> -32700 Parse error, id null; JSON that is not strict JSON
  (``cmrunner.core.strictjson``: NaN, Infinity, an overflowing number, a duplicate key
  -> ``INVALID_MCP_INPUT``; a lone surrogate -> ``INVALID_TEXT``; more than 100 levels ->
  ``INPUT_TOO_DEEP``; inside a ``tools/call``'s arguments the field names the argument,
  ``params.arguments.text``, and the general code is the tools' ``INVALID_ARGUMENTS``)
  -> -32700 Parse error; strict JSON that is not a JSON-RPC message (the SDK's own
  ``jsonrpc_message_adapter``, or a request whose id is null, a boolean or a fraction, which the
  SDK would take for a notification and never answer) -> -32600 Invalid Request. The last two
  carry the request's id when it can be read safely (``request_id``: a top-level object with a ``method``, no repeated
  key, an integer, a strict-text string or a finite number with a fraction or exponent), so the host's pending request
  ends; else id null. A number id such as ``1.0`` is JSON-RPC's but not MCP's (string or integer): the request is
  refused, and the answer carries that number (``1.0``, never ``1``, which may be another pending request's).
  A NUL character is strict JSON: it passes here, and the tool's own argument check names the
  field (``INVALID_ARGUMENTS``).
- An answer's ``error.message`` is ``CODE: what was wrong``, ``error.data`` is
  ``{"code", "field"}``; the field is a dotted path of short ASCII key names (``strictjson``), never
  a value from the line. Nothing is logged.
- A line that passes is parsed by the SDK exactly as its own transport does
  (``jsonrpc_message_adapter.validate_json``), and answers are written as it writes them, so valid
  traffic is unchanged byte for byte.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from cmrunner.core import strictjson
from cmrunner.mcpserver.access import MAX_MESSAGE_BYTES

MAX_LINE_BYTES = MAX_MESSAGE_BYTES
INVALID_CODE = "INVALID_MCP_INPUT"
_CHUNK = 1 << 16


class _NumberIdError(JSONRPCError):
    """An answer to a request whose id is a JSON number that is no integer: the SDK's model holds
    only a string or integer id, and the host is waiting under the number it sent."""

    id: float  # type: ignore[assignment]


def _error(rpc_code: int, request_id: int | str | float | None, code: str, field: str, what: str) -> JSONRPCError:
    error = ErrorData(code=rpc_code, message=f"{code}: {what}; nothing was accepted", data={"code": code, "field": field})
    if isinstance(request_id, float):
        return _NumberIdError(jsonrpc="2.0", id=request_id, error=error)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def request_id(value: Any) -> int | str | float | None:
    """The id of a parsed request, if it can be read safely (module contract), else None."""
    if not isinstance(value, dict) or strictjson.DUPLICATE in value or "method" not in value:
        return None
    if "result" in value or "error" in value:  # a response's id is the server's own, never echoed
        return None
    found = value.get("id")
    if isinstance(found, bool) or not isinstance(found, int | str | float):
        return None
    try:
        strictjson.check(found)
    except strictjson.Rejected:
        return None
    return found


def _tool_arguments(value: Any) -> dict | None:
    """The ``arguments`` object of a ``tools/call`` request, if its envelope holds no repeated key."""
    if not isinstance(value, dict) or strictjson.DUPLICATE in value or value.get("method") != "tools/call":
        return None
    params = value.get("params")
    if not isinstance(params, dict) or strictjson.DUPLICATE in params:
        return None
    arguments = params.get("arguments")
    return arguments if isinstance(arguments, dict) else None


def too_long() -> JSONRPCError:
    return _error(PARSE_ERROR, None, "INPUT_TOO_LARGE", "",
                  f"a line is longer than {MAX_LINE_BYTES} bytes (maxMessageBytes)")


def judge(line: bytes) -> SessionMessage | JSONRPCError | None:
    """What one line (without its newline) is: a message for the server, an answer, or nothing."""
    if not line.strip(b" \t\r"):
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _error(PARSE_ERROR, None, "INVALID_ENCODING", "", "the line is not valid UTF-8")
    try:
        value = strictjson.scan(text)
    except strictjson.Rejected as exc:
        return _error(PARSE_ERROR, None, strictjson.code_for(exc, INVALID_CODE), exc.field, exc.what())
    try:
        strictjson.check(value, allow_nul=True)
    except strictjson.Rejected as exc:
        code, found = strictjson.code_for(exc, INVALID_CODE), exc
        arguments = _tool_arguments(value)
        try:
            if arguments is not None:  # name the argument, with the tool's own code
                strictjson.check(arguments, allow_nul=True)
        except strictjson.Rejected as inner:
            code = strictjson.code_for(inner, "INVALID_ARGUMENTS")
            found = strictjson.Rejected(inner.kind, "params.arguments" + ("." + inner.field if inner.field else ""))
        return _error(PARSE_ERROR, request_id(value), code, found.field, found.what())
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        return _error(INVALID_REQUEST, request_id(value), INVALID_CODE, "",
                      "the line is JSON but not a JSON-RPC 2.0 request, notification or response")
    if isinstance(message, JSONRPCNotification) and "id" in value:  # the SDK would drop it as a notification
        return _error(INVALID_REQUEST, request_id(value), INVALID_CODE, "id",
                      "a request's id must be a string or an integer; send it again with one")
    return SessionMessage(message)


def lines(chunk: bytes, pending: bytearray, skipping: bool) -> tuple[list[bytes | None], bool]:
    """Split ``chunk`` into complete lines after ``pending`` (kept for the next chunk).

    A ``None`` stands for a line over ``MAX_LINE_BYTES``; once reported, its bytes are skipped up
    to its newline (``skipping`` carries that across chunks).
    """
    found: list[bytes | None] = []
    start = 0
    while True:
        end = chunk.find(b"\n", start)
        piece = chunk[start:] if end < 0 else chunk[start:end]
        if not skipping:
            if len(pending) + len(piece) > MAX_LINE_BYTES:
                pending.clear()
                found.append(None)
                skipping = True
            else:
                pending += piece
        if end < 0:
            return found, skipping
        if not skipping:
            found.append(bytes(pending))
            pending.clear()
        skipping = False
        start = end + 1


async def _read(fd: int, messages: MemoryObjectSendStream[SessionMessage | Exception],
                answers: MemoryObjectSendStream[SessionMessage]) -> None:
    pending = bytearray()
    skipping = False
    async with messages, answers:
        while True:
            # abandon_on_cancel: a blocked read must not keep the server from shutting down.
            chunk = await anyio.to_thread.run_sync(os.read, fd, _CHUNK, abandon_on_cancel=True)
            found, skipping = lines(chunk, pending, skipping) if chunk else ([bytes(pending)], False)
            for line in found:
                outcome = too_long() if line is None else judge(line)
                if isinstance(outcome, SessionMessage):
                    await messages.send(outcome)
                elif outcome is not None:
                    await answers.send(SessionMessage(outcome))
            if not chunk:
                return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def _write(fd: int, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
    async with outgoing:
        async for item in outgoing:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            await anyio.to_thread.run_sync(_write_all, fd, data.encode("utf-8"))


def _claim(fd: int) -> int:
    """Move the wire on ``fd`` to a private descriptor and point ``fd`` away from it."""
    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    diversion = os.open(os.devnull, os.O_RDONLY) if fd == 0 else os.dup(2)
    try:
        os.dup2(diversion, fd)
    finally:
        os.close(diversion)
    return wire


@asynccontextmanager
async def strict_stdio() -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                                MemoryObjectSendStream[SessionMessage]]]:
    """The ``(read_stream, write_stream)`` of this process's stdio (module contract)."""
    wire_in = _claim(0)
    try:
        wire_out = _claim(1)
    except OSError:
        os.dup2(wire_in, 0)
        raise
    # The wire descriptors are never closed: a worker thread may still block reading one after
    # the loop ends, and a recycled descriptor number could then be read or written by mistake.
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_read, wire_in, incoming_send, outgoing.clone())
            group.start_soon(_write, wire_out, outgoing_receive)
            yield incoming, outgoing
    finally:
        os.dup2(wire_out, 1)
        os.dup2(wire_in, 0)
