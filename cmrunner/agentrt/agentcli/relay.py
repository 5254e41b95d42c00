"""``cm memory-agent-mcp``: the stdio MCP server an agent CLI starts for one Memory Agent attempt.

Contract:
- Started by the CLI (never by a user) with ``COMMON_MEMORY_AGENT_SOCKET`` (a Unix socket in the
  attempt's private directory) and ``COMMON_MEMORY_AGENT_TOKEN`` in its environment. It holds no
  memory, no store and no tool logic: every ``tools/list`` and ``tools/call`` is forwarded, one
  JSON line each way, to the attempt that opened the socket (``runtime``), which answers with
  ``Toolbox`` for that job's lease only. The first line it sends is the token.
- MCP over stdio, newline-delimited JSON-RPC 2.0: ``initialize`` (tools capability only),
  ``ping``, ``tools/list``, ``tools/call``; notifications get no answer; any other method is
  -32601. A line that is not strict JSON (``cmrunner.core.strictjson``) or longer than
  ``MAX_LINE_BYTES`` is -32700 with id null, and the next line is served.
- A tool result is one compact JSON text part; ``isError`` is set for a rejection, whose text
  names the code (hosts send the text, not structured content, on error).
- When the attempt's socket is gone (the attempt ended or was killed), a call is answered with
  an error and the server exits at the end of stdin. It never writes anything but JSON-RPC to
  stdout and logs nothing.
Stdlib and ``cmrunner.core`` only.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from cmrunner.core import strictjson

SOCKET_ENV = "COMMON_MEMORY_AGENT_SOCKET"
TOKEN_ENV = "COMMON_MEMORY_AGENT_TOKEN"
MAX_LINE_BYTES = 8 << 20
PROTOCOLS = ("2025-06-18", "2025-03-26", "2024-11-05")
SERVER = {"name": "cm-memory-agent", "version": "1"}


class Upstream:
    """The line connection to the attempt (opened at the first forwarded request)."""

    def __init__(self, path: str, token: str) -> None:
        self.path, self.token = path, token
        self.sock: socket.socket | None = None
        self.buffer = b""

    def ask(self, request: dict) -> dict | None:
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(self.path)
                self.sock.sendall(json.dumps({"token": self.token}).encode() + b"\n")
            self.sock.sendall(json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
            while b"\n" not in self.buffer:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return None
                self.buffer += chunk
                if len(self.buffer) > MAX_LINE_BYTES:
                    return None
            line, _, self.buffer = self.buffer.partition(b"\n")
            answer = json.loads(line)
            return answer if isinstance(answer, dict) else None
        except (OSError, ValueError):
            self.sock = None
            return None


def _error(msg_id: object, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def handle(message: object, upstream: Upstream) -> dict | None:
    """The answer to one JSON-RPC message, or ``None`` for a notification."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return _error(None, -32600, "INVALID_MCP_INPUT: not a JSON-RPC 2.0 message")
    method, msg_id = message["method"], message.get("id")
    if "id" not in message:
        return None
    raw_params = message.get("params")
    params: dict = raw_params if isinstance(raw_params, dict) else {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOLS else PROTOCOLS[0]
        return {"jsonrpc": "2.0", "id": msg_id, "result": {
            "protocolVersion": version, "capabilities": {"tools": {"listChanged": False}}, "serverInfo": SERVER}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": msg_id, "result": {}}
    if method == "tools/list":
        answer = upstream.ask({"op": "list"})
        if answer is None or not isinstance(answer.get("tools"), list):
            return _error(msg_id, -32603, "ATTEMPT_ENDED: the Memory Agent attempt is over")
        return {"jsonrpc": "2.0", "id": msg_id, "result": {"tools": answer["tools"]}}
    if method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments")
        raw = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        answer = upstream.ask({"op": "call", "name": name if isinstance(name, str) else "", "arguments": raw})
        if answer is None or not isinstance(answer.get("text"), str):
            return {"jsonrpc": "2.0", "id": msg_id, "result": {
                "content": [{"type": "text", "text": '{"error":"ATTEMPT_ENDED"}'}], "isError": True}}
        return {"jsonrpc": "2.0", "id": msg_id, "result": {
            "content": [{"type": "text", "text": answer["text"]}], "isError": bool(answer.get("isError"))}}
    return _error(msg_id, -32601, f"METHOD_NOT_FOUND: {method[:64]!r} is not served")


def _write(out: object, answer: dict) -> None:
    data = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    out.write(data)  # type: ignore[attr-defined]
    out.flush()  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    del argv  # everything comes from the environment the attempt gave the CLI
    path, token = os.environ.get(SOCKET_ENV), os.environ.get(TOKEN_ENV)
    if not path or not token:
        sys.stderr.write("MEMORY_AGENT_ONLY: cm memory-agent-mcp is started by cm's Memory Agent runtime, "
                         "not by hand\n")
        return 2
    upstream = Upstream(path, token)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline(MAX_LINE_BYTES + 1)
        if not line:
            return 0
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = stdin.readline(MAX_LINE_BYTES)
            _write(stdout, _error(None, -32700, "INPUT_TOO_LARGE: a line over the limit"))
            continue
        if not line.strip():
            continue
        try:
            message = strictjson.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, strictjson.Rejected):
            _write(stdout, _error(None, -32700, "INVALID_MCP_INPUT: not strict JSON"))
            continue
        answer = handle(message, upstream)
        if answer is not None:
            _write(stdout, answer)
