"""A fake OpenAI-compatible model server for tests: loopback only, scripted, recorded, bounded.

Contract:
- Binds ``127.0.0.1`` on an ephemeral port and writes the port (atomically) to ``--port-file``.
- Records every request as one JSONL line in ``--log``: ``seq``, ``method``, ``path``, ``headers``
  (lower-cased names, ``Authorization`` removed; ``authorized`` says whether it was present),
  ``body`` (parsed JSON, or ``null``), and ``reply`` (the script index used, ``"default"`` or
  ``null`` for requests that consume nothing).
- Answers model calls from a **script** (``--script``, JSON): ``{"replies": [...], "default": {...}}``
  (a bare list means replies only). Replies are consumed in order by ``POST /v1/responses`` and
  ``POST /v1/chat/completions`` alike; once exhausted, ``default`` answers (a fixed text when absent).
  ``GET /v1/models`` consumes nothing. A reply is an object with these optional keys:
  ``text`` (assistant text), ``tool_calls`` (list of ``{name, arguments, call_id?, namespace?}``;
  ``arguments`` is an object or a JSON string), ``usage`` (``{input_tokens?, output_tokens?}``),
  ``error`` (``{status, body?, headers?}``: an HTTP error instead of a stream), ``truncate`` (close the
  connection mid-stream, before the completion event), ``delay_seconds`` (pause after the first
  event, so a client can be interrupted mid-stream).
- Streams both wire protocols: Responses SSE (``response.created`` … ``response.completed``) and Chat
  Completions SSE (``chat.completion.chunk`` … ``data: [DONE]``); ``"stream": false`` gets one JSON body.
- Exits by itself after ``--lifetime-seconds`` (default 300), or on SIGTERM/SIGINT.
- Stdlib only; runnable as a script (``python fakemodel.py …``) or with ``python -m``.
- ``running()`` starts it as a subprocess for a test and always stops it by PID (SIGTERM, then
  SIGKILL) when the ``with`` block ends, so no test leaves a server behind.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
DEFAULT_TEXT = "Hello from the fake model."
DEFAULT_LIFETIME = 300.0
REPLY_KEYS = frozenset({"text", "tool_calls", "usage", "error", "truncate", "delay_seconds"})
CALL_KEYS = frozenset({"name", "arguments", "call_id", "namespace"})
MAX_BODY = 64 * 1024 * 1024


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
                              or not 400 <= error["status"] <= 599):
        raise ScriptError(f"{where}.error must be {{status: 400..599, body?, headers?}}")
    usage = reply.get("usage", {})
    if not isinstance(usage, dict) or any(not isinstance(v, int) or v < 0 for v in usage.values()):
        raise ScriptError(f"{where}.usage must map names to non-negative integers")
    if not isinstance(reply.get("delay_seconds", 0), (int, float)):
        raise ScriptError(f"{where}.delay_seconds must be a number")
    return reply


def load_script(raw: object) -> tuple[list[dict], dict]:
    """Validate a script document; returns (replies, default reply)."""
    if isinstance(raw, list):
        raw = {"replies": raw}
    if not isinstance(raw, dict) or set(raw) - {"replies", "default"}:
        raise ScriptError("the script must be a list of replies or {replies, default}")
    replies = raw.get("replies", [])
    if not isinstance(replies, list):
        raise ScriptError("replies must be a list")
    checked = [_check_reply(r, f"replies[{i}]") for i, r in enumerate(replies)]
    default = _check_reply(raw.get("default", {"text": DEFAULT_TEXT}), "default")
    return checked, default


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
    """Append-only JSONL of every request; each line flushed before the reply is sent."""

    def __init__(self, path: str) -> None:
        self._handle = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._seq = 0

    def record(self, method: str, path: str, headers: dict[str, str], authorized: bool,
               body: object, reply: int | str | None) -> int:
        with self._lock:
            self._seq += 1
            line = {"seq": self._seq, "time": time.time(), "method": method, "path": path,
                    "headers": headers, "authorized": authorized, "body": body, "reply": reply}
            self._handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            self._handle.flush()
            return self._seq


def _arguments(call: dict) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args, separators=(",", ":"))


def _usage(reply: dict, body: object) -> tuple[int, int]:
    usage = reply.get("usage", {})
    # Rough default counts so that token-limit knobs (auto-compaction) react to real sizes.
    prompt = max(1, len(json.dumps(body)) // 4)
    produced = max(1, len(reply.get("text", "")) // 4 + sum(len(_arguments(c)) // 4 for c in reply.get("tool_calls", [])))
    return usage.get("input_tokens", prompt), usage.get("output_tokens", produced)


def responses_events(reply: dict, seq: int, model: str, body: object) -> list[dict]:
    """The Responses API SSE events for one reply, in wire order (without the completion cut)."""
    resp_id = f"resp_{seq:06d}"
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
    events: list[dict] = [{"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}]
    output: list[dict] = []
    if "text" in reply or not reply.get("tool_calls"):
        text = reply.get("text", "")
        item_id = f"msg_{seq:06d}"
        idx = len(output)
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.output_item.added", "output_index": idx, "item": {
            "id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}})
        events.append({"type": "response.content_part.added", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "part": part})
        for chunk in _chunks(text):
            events.append({"type": "response.output_text.delta", "item_id": item_id, "output_index": idx,
                           "content_index": 0, "delta": chunk})
        events.append({"type": "response.output_text.done", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "text": text})
        done_part = {**part, "text": text}
        events.append({"type": "response.content_part.done", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "part": done_part})
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": [done_part]}
        events.append({"type": "response.output_item.done", "output_index": idx, "item": item})
        output.append(item)
    for n, call in enumerate(reply.get("tool_calls", [])):
        idx = len(output)
        item_id = f"fc_{seq:06d}_{n}"
        args = _arguments(call)
        item = {"id": item_id, "type": "function_call", "status": "in_progress",
                "call_id": call.get("call_id", f"call_{seq:06d}_{n}"), "name": call["name"], "arguments": ""}
        if call.get("namespace"):
            item["namespace"] = call["namespace"]
        events.append({"type": "response.output_item.added", "output_index": idx, "item": item})
        for chunk in _chunks(args):
            events.append({"type": "response.function_call_arguments.delta", "item_id": item_id,
                           "output_index": idx, "delta": chunk})
        events.append({"type": "response.function_call_arguments.done", "item_id": item_id,
                       "output_index": idx, "arguments": args})
        done = {**item, "status": "completed", "arguments": args}
        events.append({"type": "response.output_item.done", "output_index": idx, "item": done})
        output.append(done)
    tokens_in, tokens_out = _usage(reply, body)
    usage = {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens_out,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens_in + tokens_out}
    events.append({"type": "response.completed",
                   "response": {**base, "status": "completed", "output": output, "usage": usage}})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def chat_chunks(reply: dict, seq: int, model: str, body: object, include_usage: bool) -> list[dict]:
    """The Chat Completions ``chat.completion.chunk`` objects for one reply (without ``[DONE]``)."""
    base = {"id": f"chatcmpl-{seq:06d}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in _chunks(reply.get("text", "")):
        chunks.append(chunk({"content": piece}))
    calls = reply.get("tool_calls", [])
    for n, call in enumerate(calls):
        call_id = call.get("call_id", f"call_{seq:06d}_{n}")
        chunks.append(chunk({"tool_calls": [{"index": n, "id": call_id, "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        for piece in _chunks(_arguments(call)):
            chunks.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    if include_usage:
        tokens_in, tokens_out = _usage(reply, body)
        chunks.append({**base, "choices": [], "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                                        "total_tokens": tokens_in + tokens_out}})
    return chunks


def chat_completion(reply: dict, seq: int, model: str, body: object) -> dict:
    """A non-streaming Chat Completions body."""
    calls = [{"id": c.get("call_id", f"call_{seq:06d}_{n}"), "type": "function",
              "function": {"name": c["name"], "arguments": _arguments(c)}}
             for n, c in enumerate(reply.get("tool_calls", []))]
    message: dict = {"role": "assistant", "content": reply.get("text", "" if not calls else None)}
    if calls:
        message["tool_calls"] = calls
    tokens_in, tokens_out = _usage(reply, body)
    return {"id": f"chatcmpl-{seq:06d}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}}


def _chunks(text: str, size: int = 16) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _error_body(status: int) -> dict:
    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": f"scripted error {status}", "type": kind, "code": None, "param": None}}


class FakeModelHandler(BaseHTTPRequestHandler):
    """One request; every reply closes the connection, so there is no keep-alive state to get wrong."""

    # Never name a method ``responses``: it would shadow BaseHTTPRequestHandler.responses (hosts.md §4).
    protocol_version = "HTTP/1.1"
    server_version = "cm-fakemodel/1"
    script: Script
    log: RequestLog

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass  # the JSONL request log is the record; stderr stays quiet

    def _headers_for_log(self) -> tuple[dict[str, str], bool]:
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
        return headers, "authorization" in {k.lower() for k in self.headers}

    def _read_body(self) -> object:
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError:
            return {"unparsed": raw[:4096].decode("utf-8", "replace")}

    def _send_json(self, status: int, body: object, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
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

    def _stream(self, frames: list[bytes], reply: dict) -> None:
        """Send SSE frames; ``truncate`` cuts the connection before the last (completion) frames."""
        self._start_stream()
        keep = max(1, len(frames) // 2) if reply.get("truncate") else len(frames)
        for index, frame in enumerate(frames[:keep]):
            self._write_chunk(frame)
            if index == 0 and reply.get("delay_seconds"):
                time.sleep(float(reply["delay_seconds"]))
        if reply.get("truncate"):
            # No terminating zero-length chunk: the client sees the body end mid-stream.
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        headers, authorized = self._headers_for_log()
        path = self.path.split("?", 1)[0]
        self.log.record("GET", self.path, headers, authorized, None, None)
        if path in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "cm-tests"}]})
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        headers, authorized = self._headers_for_log()
        body = self._read_body()
        path = self.path.split("?", 1)[0]
        if path not in ("/v1/responses", "/v1/chat/completions"):
            self.log.record("POST", self.path, headers, authorized, body, None)
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        reply, index = self.script.take()
        seq = self.log.record("POST", self.path, headers, authorized, body, index)
        error = reply.get("error")
        if error is not None:
            self._send_json(error["status"], error.get("body", _error_body(error["status"])), error.get("headers"))
            return
        request = body if isinstance(body, dict) else {}
        model = request.get("model") if isinstance(request.get("model"), str) else "fake-model"
        streaming = request.get("stream") is True
        if path == "/v1/responses":
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
            self._stream(frames, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away mid-stream (an interrupted turn): nothing more to send


def _write_port(path: str, port: int) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write(f"{port}\n")
    os.replace(tmp, path)


def serve(port_file: str, log_path: str, script_path: str | None, lifetime: float) -> int:
    """Run until the lifetime ends or a signal arrives; returns the exit status."""
    raw: object = []
    if script_path:
        with open(script_path, encoding="utf-8") as handle:
            raw = json.load(handle)
    replies, default = load_script(raw)
    handler = type("Handler", (FakeModelHandler,), {"script": Script(replies, default), "log": RequestLog(log_path)})
    server = ThreadingHTTPServer((HOST, 0), handler)
    server.daemon_threads = True
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    _write_port(port_file, server.server_address[1])
    stop.wait(lifetime)
    server.shutdown()
    server.server_close()
    return 0


class FakeModelError(RuntimeError):
    """The fake server did not start (its stderr tail is in the message)."""


class FakeModel:
    """A running fake server as seen by a test."""

    def __init__(self, process: subprocess.Popen, port: int, log_path: str) -> None:
        self.process = process
        self.pid = process.pid
        self.port = port
        self.log_path = log_path
        self.base_url = f"http://{HOST}:{port}/v1"

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
            start_timeout: float = 10.0) -> Iterator[FakeModel]:
    """Start the server in ``workdir`` (script, port file, log, stderr live there) and stop it after."""
    os.makedirs(workdir, exist_ok=True)
    port_file = os.path.join(workdir, "fakemodel.port")
    log_path = os.path.join(workdir, "fakemodel.requests.jsonl")
    script_path = os.path.join(workdir, "fakemodel.script.json")
    stderr_path = os.path.join(workdir, "fakemodel.stderr")
    if os.path.exists(port_file):
        os.unlink(port_file)
    load_script(script if script is not None else [])  # a bad script fails here, in the test's process
    with open(script_path, "w", encoding="utf-8") as handle:
        json.dump(script if script is not None else [], handle)
    argv = [sys.executable, os.path.abspath(__file__), "--port-file", port_file, "--log", log_path,
            "--script", script_path, "--lifetime-seconds", str(lifetime_seconds)]
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
        yield FakeModel(process, port, log_path)
    finally:
        stop_process(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cm's fake OpenAI-compatible model server (127.0.0.1 only)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--script")
    parser.add_argument("--lifetime-seconds", type=float, default=DEFAULT_LIFETIME)
    args = parser.parse_args(argv)
    if args.lifetime_seconds <= 0:
        parser.error("--lifetime-seconds must be positive")
    try:
        return serve(args.port_file, args.log, args.script, args.lifetime_seconds)
    except (OSError, ValueError) as exc:
        print(f"fakemodel: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
