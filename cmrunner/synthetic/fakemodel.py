"""A fake OpenAI-compatible model server for tests: loopback only, scripted, recorded, bounded.

Contract:
- Binds ``127.0.0.1`` on an ephemeral port and writes the port (atomically) to ``--port-file``.
- Records every request as one JSONL line in ``--log``: ``seq``, ``method``, ``path``, ``headers``
  (lower-cased names, ``Authorization`` removed; ``authorized`` says whether it was present),
  ``body`` (parsed JSON, or ``null``), ``bytes`` (the body's size as received), ``reply`` (the
  script index used, ``"default"`` or ``null`` for requests that consume nothing) and ``usage``
  (what the answer reports: input and output tokens, or a reply's ``raw_usage``; ``null`` for an
  HTTP error).
- Answers model calls from a **script** (``--script``, JSON): ``{"replies": [...], "default": {...}}``
  (a bare list means replies only). Replies are consumed in order by ``POST /v1/responses`` and
  ``POST /v1/chat/completions`` alike; once exhausted, ``default`` answers (a fixed text when absent).
  ``GET /v1/models`` (and ``GET /models``, as a server that also answers at its root) consumes
  nothing and lists the script's ``"models"`` (default ``fake-model``; ``null``: no list, a 404). cm's endpoint check, a
  request offering only its probe tool, consumes nothing either (``fakeprobe``): the fake calls
  the tool as asked, or never does with ``"tools": false``. A POST to any other path is a 404. A reply is an object with these optional keys:
  ``text`` (assistant text), ``tool_calls`` (list of ``{name, arguments, call_id?, namespace?}``;
  ``arguments`` is an object or a JSON string), ``usage`` (``{input_tokens?, output_tokens?}``),
  ``raw_usage`` (any JSON sent as the answer's usage object verbatim, ``null`` for none),
  ``error`` (``{status, body?, headers?}``: an HTTP error or redirect, 300–599, instead of a
  stream), ``truncate`` (close the connection mid-stream, before the completion event),
  ``delay_seconds`` (pause after the first event, so a client can be interrupted mid-stream),
  ``gate_file`` (a path: after the first event, hold the answer until the test creates that file,
  at most ``GATE_SECONDS``; a test's way to act while a client waits mid-answer).
- Streams both wire protocols: Responses SSE (``response.created`` … ``response.completed``) and Chat
  Completions SSE (``chat.completion.chunk`` … ``data: [DONE]``); ``"stream": false`` gets one JSON body.
- Prompt caching: every answer's usage reports as cached input the longest byte prefix its request
  body shares with one of the server's earlier requests (``PromptCache``), a quarter of those bytes
  as tokens, unless the reply's ``usage`` names ``cached_tokens`` itself; the script's
  ``cache_report`` says in which provider's fields (``fakewire.CACHE_REPORTS``: ``openai``, the
  default, ``input_tokens_details``/``prompt_tokens_details.cached_tokens``; ``deepseek``,
  ``prompt_cache_hit_tokens``; ``anthropic``, ``cache_read_input_tokens``; ``none``).
- Speaks the hosts' own providers from the same script (``fakehostwire``): Anthropic Messages
  (``POST /v1/messages``, SSE or JSON; ``/v1/messages/count_tokens`` consumes nothing) for Claude
  Code, and Gemini (``POST /v1beta/models/<m>:generateContent`` / ``:streamGenerateContent?alt=sse``;
  ``:countTokens`` consumes nothing) for Gemini CLI. Their root is ``FakeModel.root_url``. Policy
  mode answers on every protocol, so an agent CLI can run the Memory Agent against it (the tools
  as the host names them: ``fakepolicy.offered_names``).
- **Policy mode** ("a diligent model", ``fakepolicy``): a script with ``"policy"`` (a built-in name,
  ``file.py:function`` or ``module:function``) answers every request after the scripted replies
  (and any reply with ``"policy": true``) by reading the conversation so far and calling the next
  read tool, then ``submit_memory_decision`` with the policy's decision; once a submission was
  accepted it answers with text. ``"batch": true`` emits every independent next call in one turn;
  ``"reading"`` is the policy's reading style (``fakepolicy.READING_STYLES``: ``bulk``, the default,
  or ``blocks``, the page-by-page reader of the reference protocol).
  ``"inject": {cue: reply | [replies]}`` replaces the policy's answer the first time(s) a cue comes
  up: ``first`` (the first model request), a tool name the policy is about to call
  (``inspect_ingest``, ``read_ingest``, ``inspect_memory``, ``submit_memory_decision`` or its alias
  ``submit``) or ``done``. An injected ``{"policy": true, ...}`` keeps the policy's calls with the
  reply's modifiers. The log line of a policy answer carries its ``cue``.
- Failure knobs per reply, besides ``error``/``truncate``/``delay_seconds``: ``truncate: "clean"``
  (end the body properly, without the completion event), ``reset`` (TCP RST mid-stream),
  ``malformed`` (an unparsable SSE event), ``header_delay_seconds``, ``refusal`` (text),
  ``finish: "length"`` (output cut by the token limit), ``stream_error`` (an error object inside
  the 200 stream), ``duplicate`` (every tool call twice), ``nest: N`` (after the first event, one
  event holding valid JSON nested N levels deep), ``flood: N`` (after the first event, small
  text deltas until about N bytes were sent, generated while sending, then the rest of the reply)
  and ``line: N`` (after the first event, one ``data:`` line of about N bytes that never ends
  while it is sent, generated while sending, then a line end and the rest of the reply).
  ``error.raw`` (a string) is sent as the error body byte for byte instead of ``error.body``.
- ``--tls-cert``/``--tls-key`` serve HTTPS instead of HTTP (``running(..., tls=(cert, key))``).
- The log never holds the Authorization value: ``auth_sha256`` is its hash, so a test can check
  which key arrived without storing it.
- Exits by itself after ``--lifetime-seconds`` (default 300), or on SIGTERM/SIGINT.
- Stdlib only (with its siblings ``fakewire`` and ``fakepolicy``); run as
  ``python -I -m cmrunner.synthetic.fakemodel …``.
- ``running()`` starts it as a subprocess for a test and always stops it by PID (SIGTERM, then
  SIGKILL) when the ``with`` block ends, so no test leaves a server behind.
- ``run_server(raw, lifetime, on_ready, log_path=None, port=0, models=…)`` is the same server in
  the calling process, for ``cm synthetic-model serve``: a fixed port if asked, the model ids
  ``GET /v1/models`` lists, and no request log at all when ``log_path`` is ``None``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cmrunner.synthetic import fakehostwire, fakepolicy, fakeprobe
from cmrunner.synthetic.fakewire import (
    CACHE_REPORTS,
    chat_chunks,
    chat_completion,
    error_body,
    reported_usage,
    responses_events,
)

HOST = "127.0.0.1"
DEFAULT_TEXT = "Hello from the fake model."
DEFAULT_LIFETIME = 300.0
REPLY_KEYS = frozenset({"text", "tool_calls", "usage", "raw_usage", "error", "truncate", "delay_seconds", "policy",
                        "duplicate", "refusal", "finish", "malformed", "reset", "header_delay_seconds",
                        "stream_error", "nest", "flood", "line", "gate_file"})
GATE_SECONDS = 90.0  # a gate_file never created still ends, before the client's idle timeout (120 s)
CUES = frozenset({"first", "inspect_ingest", "read_ingest", "inspect_memory", "submit_memory_decision", "submit",
                  "done"})
CALL_KEYS = frozenset({"name", "arguments", "call_id", "namespace"})
MAX_BODY = 64 * 1024 * 1024
PROMPT_CACHE_BODIES = 256
FLOOD_DELTA = "x" * 512
FLOOD_BATCH = 256 * 1024


class ScriptError(ValueError):
    """The script file does not have the documented shape."""


def _check_reply(reply: object, where: str) -> dict:
    if not isinstance(reply, dict):
        raise ScriptError(f"{where} must be an object")
    unknown = set(reply) - REPLY_KEYS
    if unknown:
        raise ScriptError(f"{where} has unknown keys {sorted(unknown)}")
    if "text" in reply and not isinstance(reply["text"], str):
        raise ScriptError(f"{where}.text must be a string")
    for i, call in enumerate(reply.get("tool_calls", [])):
        if not isinstance(call, dict) or set(call) - CALL_KEYS or not isinstance(call.get("name"), str):
            raise ScriptError(f"{where}.tool_calls[{i}] must be {{name, arguments, call_id?, namespace?}}")
        if not isinstance(call.get("arguments", {}), (dict, str)):
            raise ScriptError(f"{where}.tool_calls[{i}].arguments must be an object or a string")
    error = reply.get("error")
    if error is not None and (not isinstance(error, dict) or not isinstance(error.get("status"), int)
                              or not 300 <= error["status"] <= 599):
        raise ScriptError(f"{where}.error must be {{status: 300..599, body?, headers?, raw?}}")
    if error is not None and not isinstance(error.get("raw", ""), str):
        raise ScriptError(f"{where}.error.raw must be a string")
    for key in ("nest", "flood", "line"):
        value = reply.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ScriptError(f"{where}.{key} must be a non-negative integer")
    usage = reply.get("usage", {})
    if not isinstance(usage, dict) or any(not isinstance(v, int) or v < 0 for v in usage.values()):
        raise ScriptError(f"{where}.usage must map names to non-negative integers")
    for key in ("delay_seconds", "header_delay_seconds"):
        if not isinstance(reply.get(key, 0), (int, float)):
            raise ScriptError(f"{where}.{key} must be a number")
    if not isinstance(reply.get("gate_file", ""), str):
        raise ScriptError(f"{where}.gate_file must be a path")
    if reply.get("finish") not in (None, "length"):
        raise ScriptError(f"{where}.finish must be \"length\"")
    if "refusal" in reply and not isinstance(reply["refusal"], str):
        raise ScriptError(f"{where}.refusal must be a string")
    if "stream_error" in reply and not isinstance(reply["stream_error"], dict):
        raise ScriptError(f"{where}.stream_error must be an object")
    return reply


def load_full_script(raw: object) -> tuple[list[dict], dict, dict | None]:
    """Validate a script document; returns (replies, default reply, policy settings or None)."""
    if isinstance(raw, list):
        raw = {"replies": raw}
    if not isinstance(raw, dict) or set(raw) - {"replies", "default", "policy", "inject", "batch", "reading", "tools",
                                                     "models", "cache_report"}:
        raise ScriptError("the script must be a list of replies or {replies, default, policy?, inject?, batch?, "
                          "reading?, tools?, models?, cache_report?}")
    if raw.get("cache_report", "openai") not in CACHE_REPORTS:
        raise ScriptError(f"cache_report must be one of {', '.join(CACHE_REPORTS)}")
    if not isinstance(raw.get("tools", True), bool):
        raise ScriptError("tools must be true or false")
    listed = raw.get("models", [])
    if listed is not None and (not isinstance(listed, list) or not all(isinstance(m, str) and m for m in listed)):
        raise ScriptError("models must be a list of model ids, or null for a server without a model list")
    replies = raw.get("replies", [])
    if not isinstance(replies, list):
        raise ScriptError("replies must be a list")
    checked = [_check_reply(r, f"replies[{i}]") for i, r in enumerate(replies)]
    policy = None
    if "policy" in raw:
        if not isinstance(raw["policy"], str):
            raise ScriptError("policy must be a built-in name, file.py:function or module:function")
        try:
            fakepolicy.load_policy(raw["policy"])
        except (ImportError, OSError, ValueError) as exc:
            raise ScriptError(str(exc)) from None
        inject = raw.get("inject", {})
        if not isinstance(inject, dict) or set(inject) - CUES:
            raise ScriptError(f"inject must map cues ({', '.join(sorted(CUES))}) to replies")
        queues = {}
        for cue, value in inject.items():
            items = value if isinstance(value, list) else [value]
            queues[cue] = [_check_reply(r, f"inject.{cue}[{i}]") for i, r in enumerate(items)]
        reading = raw.get("reading", "bulk")
        if reading not in fakepolicy.READING_STYLES:
            raise ScriptError(f"reading must be one of {', '.join(fakepolicy.READING_STYLES)}")
        policy = {"spec": raw["policy"], "inject": queues, "batch": raw.get("batch") is True, "reading": reading}
    elif "inject" in raw or "batch" in raw or "reading" in raw:
        raise ScriptError("inject, batch and reading need a policy")
    fallback = {"policy": True} if policy is not None else {"text": DEFAULT_TEXT}
    default = _check_reply(raw.get("default", fallback), "default")
    return checked, default, policy


class Script:
    """Replies handed out in order, thread-safe; the default once they run out."""

    def __init__(self, replies: list[dict], default: dict) -> None:
        self._replies = replies
        self._default = default
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[dict, int | str]:
        with self._lock:
            if self._next < len(self._replies):
                self._next += 1
                return self._replies[self._next - 1], self._next - 1
            return self._default, "default"


class RequestLog:
    """Append-only JSONL of every request; each line flushed before the reply is sent. Without a
    path it only numbers the requests (``cm synthetic-model serve`` keeps no copy of what it is sent)."""

    def __init__(self, path: str | None) -> None:
        self._handle = open(path, "a", encoding="utf-8") if path is not None else None
        self._lock = threading.Lock()
        self._seq = 0

    def record(self, method: str, path: str, headers: dict[str, str], authorized: bool,
               body: object, reply: int | str | None, cue: str | None = None, auth_sha256: str | None = None,
               size: int = 0, usage: object = None) -> int:
        with self._lock:
            self._seq += 1
            line = {"seq": self._seq, "time": time.time(), "method": method, "path": path,
                    "headers": headers, "authorized": authorized, "auth_sha256": auth_sha256, "body": body,
                    "bytes": size, "reply": reply, "cue": cue, "usage": usage}
            if self._handle is not None:
                self._handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                self._handle.flush()
            return self._seq


class PromptCache:
    """What a provider's prefix cache would serve: the longest byte prefix a request body shares
    with an earlier one (the last ``PROMPT_CACHE_BODIES`` bodies), as providers that cache by exact
    prefix match count it. Thread-safe."""

    def __init__(self) -> None:
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()

    def hit(self, raw: bytes) -> int:
        with self._lock:
            best = max((len(os.path.commonprefix([raw, seen])) for seen in self._bodies), default=0)
            self._bodies = [*self._bodies[-(PROMPT_CACHE_BODIES - 1):], raw]
        return best


class FakeModelHandler(BaseHTTPRequestHandler):
    """One request; every reply closes the connection, so there is no keep-alive state to get wrong."""

    # Never name a method ``responses``: it would shadow BaseHTTPRequestHandler.responses (hosts.md §4).
    protocol_version = "HTTP/1.1"
    server_version = "cm-fakemodel/1"
    script: Script
    log: RequestLog
    driver: fakepolicy.Driver
    cache: PromptCache
    cache_report: str
    models: tuple[str, ...] | None = ("fake-model",)
    calls_tools = True

    def log_message(self, format: str, *args: object) -> None:
        pass  # the JSONL request log is the record; stderr stays quiet

    def _headers_for_log(self) -> tuple[dict[str, str], bool]:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return headers, "authorization" in {k.lower() for k in self.headers}

    def _auth_hash(self) -> str | None:
        value = self.headers.get("Authorization")
        return hashlib.sha256(value.encode()).hexdigest() if value is not None else None

    def _read_body(self) -> tuple[object, int]:
        """The parsed body and its size in bytes as received (the bytes themselves: ``self.raw``)."""
        self.raw = b""
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return None, 0
        raw = self.raw = self.rfile.read(length)
        try:
            return json.loads(raw), len(raw)
        except ValueError:
            return {"unparsed": raw[:4096].decode("utf-8", "replace")}, len(raw)

    def _send_json(self, status: int, body: object, extra: dict[str, str] | None = None, raw: str | None = None) -> None:
        data = raw.encode() if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _write_chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _flood(self, frame: bytes, total: int) -> None:
        """About ``total`` bytes of one small frame, written in batches (never held whole)."""
        batch = frame * max(1, FLOOD_BATCH // len(frame))
        sent = 0
        while sent < total:
            self._write_chunk(batch)
            sent += len(batch)

    def _stream(self, frames: list[bytes], reply: dict, responses: bool = True) -> None:
        """Send SSE frames; ``truncate`` cuts the connection before the last (completion) frames."""
        self._start_stream()
        cut = reply.get("truncate") or reply.get("reset")
        keep = max(1, len(frames) // 2) if cut else len(frames)
        for index, frame in enumerate(frames[:keep]):
            self._write_chunk(frame)
            if index == 0 and reply.get("malformed"):
                self._write_chunk(b"data: {this is not json\n\n")
            if index == 0 and reply.get("nest"):
                depth = reply["nest"]
                self._write_chunk(b'data: {"pad":' + b"[" * depth + b"0" + b"]" * depth + b"}\n\n")
            if index == 0 and reply.get("flood"):
                if responses:
                    delta = {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                             "delta": FLOOD_DELTA}
                    flood = f"event: response.output_text.delta\ndata: {json.dumps(delta)}\n\n".encode()
                else:
                    delta = {"choices": [{"index": 0, "delta": {"content": FLOOD_DELTA}, "finish_reason": None}]}
                    flood = f"data: {json.dumps(delta)}\n\n".encode()
                self._flood(flood, reply["flood"])
            if index == 0 and reply.get("line"):
                self._write_chunk(b"data: ")
                self._flood(b"x", reply["line"])
                self._write_chunk(b"\n\n")
            if index == 0 and reply.get("delay_seconds"):
                time.sleep(float(reply["delay_seconds"]))
            if index == 0 and reply.get("gate_file"):
                opens = time.monotonic() + GATE_SECONDS
                while not os.path.exists(reply["gate_file"]) and time.monotonic() < opens:
                    time.sleep(0.05)
        if reply.get("reset"):
            # SO_LINGER 0 makes close() send RST: a provider that answered 200 and then reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        if reply.get("truncate") and reply["truncate"] != "clean":
            # No terminating zero-length chunk: the client sees the body end mid-stream.
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        headers, authorized = self._headers_for_log()
        path = self.path.split("?", 1)[0]
        self.log.record("GET", self.path, headers, authorized, None, None)
        if path in ("/v1/models", "/models") and self.models is not None:
            self._send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "cm-tests"} for name in self.models]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        headers, authorized = self._headers_for_log()
        body, size = self._read_body()
        path = self.path.split("?", 1)[0]
        host_api = fakehostwire.route(path)
        if path not in ("/v1/responses", "/v1/chat/completions") and host_api in (None, "anthropic-count", "gemini-count"):
            self.log.record("POST", self.path, headers, authorized, body, None, size=size)
            if host_api is None:
                self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            else:
                self._send_json(200, fakehostwire.count(host_api, body))
            return
        probe = fakeprobe.answer(body, self.calls_tools)
        reply, index = (probe, None) if probe is not None else self.script.take()
        cue = "probe" if probe is not None else None
        if reply.get("policy"):
            try:
                reply, cue = self.driver.answer(path, body, reply)
            except Exception:
                import traceback

                traceback.print_exc()
                self.log.record("POST", self.path, headers, authorized, body, index, "policy_failed", size=size)
                self._send_json(500, {"error": {"message": "the fake model's policy failed", "type": "server_error"}})
                return
        if reply.get("error") is None and "cached_tokens" not in reply.get("usage", {}):
            reply = {**reply, "usage": {**reply.get("usage", {}), "cached_tokens": self.cache.hit(self.raw) // 4},
                     "cache_report": self.cache_report}
        usage = None if reply.get("error") is not None else reported_usage(reply, body)
        seq = self.log.record("POST", self.path, headers, authorized, body, index, cue, self._auth_hash(), size, usage)
        if reply.get("header_delay_seconds"):
            time.sleep(float(reply["header_delay_seconds"]))
        error = reply.get("error")
        if error is not None:
            self._send_json(error["status"], error.get("body", error_body(error["status"])), error.get("headers"),
                            error.get("raw"))
            return
        request = body if isinstance(body, dict) else {}
        named = request.get("model")
        model = named if isinstance(named, str) else "fake-model"
        streaming = request.get("stream") is True
        if host_api is not None:
            whole, frames = fakehostwire.answer(host_api, reply, seq, path, body)
            if whole is not None:
                self._send_json(200, whole)
                return
        elif path == "/v1/responses":
            events = responses_events(reply, seq, model, body)
            if not streaming:
                self._send_json(200, events[-1]["response"])
                return
            frames = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
        else:
            if not streaming:
                self._send_json(200, chat_completion(reply, seq, model, body))
                return
            options = request.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            chunks = chat_chunks(reply, seq, model, body, include_usage)
            frames = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
        try:
            self._stream(frames, reply, path == "/v1/responses")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client went away mid-stream (an interrupted turn): nothing more to send


def _write_port(path: str, port: int) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write(f"{port}\n")
    os.replace(tmp, path)


def serve(port_file: str, log_path: str, script_path: str | None, lifetime: float,
          tls: tuple[str, str] | None = None) -> int:
    """Run until the lifetime ends or a signal arrives; returns the exit status."""
    raw: object = []
    if script_path:
        with open(script_path, encoding="utf-8") as handle:
            raw = json.load(handle)
    return run_server(raw, lifetime, lambda port: _write_port(port_file, port), log_path=log_path, tls=tls)


def run_server(raw: object, lifetime: float, on_ready: Callable[[int], None], *, log_path: str | None = None,
               tls: tuple[str, str] | None = None, port: int = 0, models: tuple[str, ...] = ("fake-model",)) -> int:
    """Serve the script ``raw`` on 127.0.0.1:``port`` (0: any free one); ``on_ready`` hears the port
    once it accepts connections; ``GET /v1/models`` lists ``models``. Ends after ``lifetime``
    seconds or at SIGTERM/SIGINT."""
    replies, default, policy = load_full_script(raw)
    settings = raw if isinstance(raw, dict) else {}
    handler = type("Handler", (FakeModelHandler,), {"script": Script(replies, default), "log": RequestLog(log_path),
                                                    "driver": fakepolicy.Driver(policy), "cache": PromptCache(),
                                                    "cache_report": settings.get("cache_report", "openai"),
                                                    "models": None if "models" in settings and settings["models"]
                                                    is None else tuple(settings.get("models") or models),
                                                    "calls_tools": settings.get("tools", True)})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        # The handshake runs in the handler thread, so a client that rejects the certificate
        # never blocks the accept loop.
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    on_ready(server.server_address[1])
    stop.wait(lifetime)
    server.shutdown()
    server.server_close()
    return 0


class FakeModelError(RuntimeError):
    """The fake server did not start (its stderr tail is in the message)."""


class FakeModel:
    """A running fake server as seen by a test."""

    def __init__(self, process: subprocess.Popen, port: int, log_path: str, scheme: str = "http") -> None:
        self.process = process
        self.pid = process.pid
        self.port = port
        self.log_path = log_path
        self.base_url = f"{scheme}://{HOST}:{port}/v1"
        self.root_url = f"{scheme}://{HOST}:{port}"  # ANTHROPIC_BASE_URL / GOOGLE_GEMINI_BASE_URL

    def requests(self) -> list[dict]:
        """Every request recorded so far, in arrival order."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.endswith("\n")]

    def model_requests(self) -> list[dict]:
        """The requests that consumed a scripted reply (model calls)."""
        return [r for r in self.requests() if r["reply"] is not None]


def stop_process(process: subprocess.Popen, grace: float = 3.0) -> None:
    """Stop one child by its PID: SIGTERM, then SIGKILL after ``grace`` seconds; always reaped."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace)


@contextmanager
def running(workdir: str, script: object = None, lifetime_seconds: float = DEFAULT_LIFETIME,
            start_timeout: float = 10.0, tls: tuple[str, str] | None = None) -> Iterator[FakeModel]:
    """Start the server in ``workdir`` (script, port file, log, stderr live there) and stop it after."""
    os.makedirs(workdir, exist_ok=True)
    port_file = os.path.join(workdir, "fakemodel.port")
    log_path = os.path.join(workdir, "fakemodel.requests.jsonl")
    script_path = os.path.join(workdir, "fakemodel.script.json")
    stderr_path = os.path.join(workdir, "fakemodel.stderr")
    if os.path.exists(port_file):
        os.unlink(port_file)
    load_full_script(script if script is not None else [])  # a bad script fails here, in the test's process
    with open(script_path, "w", encoding="utf-8") as handle:
        json.dump(script if script is not None else [], handle)
    argv = [sys.executable, "-I", "-m", "cmrunner.synthetic.fakemodel", "--port-file", port_file, "--log", log_path,
            "--script", script_path, "--lifetime-seconds", str(lifetime_seconds)]
    if tls is not None:
        argv += ["--tls-cert", tls[0], "--tls-key", tls[1]]
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + start_timeout
        port = None
        while port is None:
            if os.path.exists(port_file):
                port = int(open(port_file, encoding="ascii").read().strip())
            elif process.poll() is not None or time.monotonic() > deadline:
                with open(stderr_path, "rb") as handle:
                    tail = handle.read()[-2000:].decode("utf-8", "replace")
                raise FakeModelError(f"the fake model server did not start (exit {process.poll()}): {tail}")
            else:
                time.sleep(0.01)
        yield FakeModel(process, port, log_path, "https" if tls else "http")
    finally:
        stop_process(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cm's fake OpenAI-compatible model server (127.0.0.1 only)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--script")
    parser.add_argument("--lifetime-seconds", type=float, default=DEFAULT_LIFETIME)
    parser.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate chain")
    parser.add_argument("--tls-key", help="the certificate's PEM private key")
    args = parser.parse_args(argv)
    if args.lifetime_seconds <= 0:
        parser.error("--lifetime-seconds must be positive")
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    try:
        return serve(args.port_file, args.log, args.script, args.lifetime_seconds, tls)
    except (OSError, ValueError) as exc:
        print(f"fakemodel: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
