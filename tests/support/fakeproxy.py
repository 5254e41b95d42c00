"""A loopback HTTP and SOCKS5 proxy for tests: CONNECT tunnels, absolute-form forwarding, SOCKS5
CONNECT, optional credentials.

Contract:
- Binds ``127.0.0.1`` on an ephemeral port and writes it (atomically) to ``--port-file``; exits
  after ``--lifetime-seconds`` or on SIGTERM/SIGINT.
- Forwards only to loopback targets (``127.0.0.0/8``, ``::1``, ``localhost``); any other target gets
  403 and is never contacted.
- With ``--credentials-file`` (one ``user:password`` line) every request must carry a matching
  ``Proxy-Authorization: Basic …``, else it gets 407 with ``Proxy-Authenticate``. The header is
  removed before forwarding. ``--fail-status N`` answers every request with status N instead.
- Logs one JSONL line per request to ``--log``: ``method``, ``target``, ``authorized`` (bool) and
  ``status``; never a header value.
- A connection whose first byte is 5 speaks SOCKS5 (RFC 1928) instead: CONNECT to an IPv4,
  IPv6 or domain target, with username/password authentication (RFC 1929) when credentials are
  set, and no authentication otherwise; it is logged with ``method`` ``SOCKS5`` and status 200,
  403 (not loopback), 407 (bad credentials) or 502.
- ``running(workdir, credentials=None)`` starts it for a test and always stops it by PID.
Stdlib only.
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

HOST = "127.0.0.1"
HEAD_LIMIT = 64 * 1024


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class ProxyHandler(socketserver.StreamRequestHandler):
    expected: str | None
    fail_status: int | None
    log_path: str
    lock: threading.Lock

    def _log(self, method: str, target: str, authorized: bool, status: int) -> None:
        with self.lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"method": method, "target": target, "authorized": authorized,
                                     "status": status}) + "\n")

    def _reply(self, status: int, reason: str, extra: str = "") -> None:
        self.wfile.write(f"HTTP/1.1 {status} {reason}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n".encode())

    def _recv(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.connection.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the client went away")
            data += chunk
        return data

    def _socks5(self) -> None:
        """One SOCKS5 CONNECT (the version byte was read)."""
        methods = self._recv(self._recv(1)[0])
        wanted = 2 if self.expected is not None else 0
        if wanted not in methods:
            self.connection.sendall(b"\x05\xff")
            return
        self.connection.sendall(bytes([5, wanted]))
        authorized = True
        if wanted == 2:
            self._recv(1)  # the sub-negotiation's version
            user = self._recv(self._recv(1)[0])
            password = self._recv(self._recv(1)[0])
            authorized = base64.b64encode(user + b":" + password).decode() == self.expected
            self.connection.sendall(b"\x01\x00" if authorized else b"\x01\x01")
            if not authorized:
                self._log("SOCKS5", "", False, 407)
                return
        _version, command, _reserved, kind = self._recv(4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, self._recv(4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, self._recv(16))
        else:
            host = self._recv(self._recv(1)[0]).decode("idna")
        port = int.from_bytes(self._recv(2), "big")
        target = f"{host}:{port}"
        failed = b"\x05%c\x00\x01\x00\x00\x00\x00\x00\x00"
        if command != 1 or not _loopback(host):
            self._log("SOCKS5", target, True, 403)
            self.connection.sendall(failed % 2)
            return
        try:
            upstream = socket.create_connection((host, port), timeout=10)
        except OSError:
            self._log("SOCKS5", target, True, 502)
            self.connection.sendall(failed % 5)
            return
        upstream.settimeout(None)
        self._log("SOCKS5", target, True, 200)
        self.connection.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + (0).to_bytes(2, "big"))
        back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
        back.start()
        _pipe(self.connection, upstream)
        back.join()
        upstream.close()

    def handle(self) -> None:
        first = self.connection.recv(1)
        if first == b"\x05":
            try:
                self._socks5()
            except (ConnectionError, OSError):
                pass
            return
        head = first
        while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
            chunk = self.connection.recv(4096)
            if not chunk:
                return
            head += chunk
        raw_head, _, rest = head.partition(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            return
        headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
        given = next((v for k, v in headers if k.lower() == "proxy-authorization"), None)
        authorized = self.expected is None or given == "Basic " + self.expected
        if self.fail_status is not None:
            self._log(method, target, authorized, self.fail_status)
            self._reply(self.fail_status, "Scripted Failure")
            return
        if not authorized:
            self._log(method, target, False, 407)
            self._reply(407, "Proxy Authentication Required", 'Proxy-Authenticate: Basic realm="cm-tests"\r\n')
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            path_head = None
        else:
            parts = urlsplit(target)
            host, port = parts.hostname or "", str(parts.port or 80)
            path_head = f"{method} {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1\r\n"
        if not _loopback(host):
            self._log(method, target, authorized, 403)
            self._reply(403, "Forbidden")
            return
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        except (OSError, ValueError):
            self._log(method, target, authorized, 502)
            self._reply(502, "Bad Gateway")
            return
        upstream.settimeout(None)
        self._log(method, target, authorized, 200)
        if path_head is None:
            self.wfile.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
        else:
            kept = [f"{k}: {v}\r\n" for k, v in headers
                    if k.lower() not in ("proxy-authorization", "proxy-connection", "connection", "keep-alive")]
            upstream.sendall((path_head + "".join(kept) + "Connection: close\r\n\r\n").encode("latin-1") + rest)
        back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
        back.start()
        _pipe(self.connection, upstream)
        back.join()
        upstream.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port_file: str, log_path: str, credentials: str | None, fail_status: int | None, lifetime: float) -> int:
    expected = base64.b64encode(credentials.encode()).decode() if credentials else None
    handler = type("Handler", (ProxyHandler,), {"expected": expected, "fail_status": fail_status,
                                                "log_path": log_path, "lock": threading.Lock()})
    server = _Server((HOST, 0), handler)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    tmp = f"{port_file}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write(f"{server.server_address[1]}\n")
    os.replace(tmp, port_file)
    stop.wait(lifetime)
    server.shutdown()
    server.server_close()
    return 0


class FakeProxy:
    def __init__(self, process: subprocess.Popen, port: int, log_path: str) -> None:
        self.process = process
        self.pid = process.pid
        self.port = port
        self.log_path = log_path

    def url(self, credentials: str | None = None, scheme: str = "http") -> str:
        return f"{scheme}://{credentials + '@' if credentials else ''}{HOST}:{self.port}"

    def requests(self) -> list[dict]:
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.endswith("\n")]


@contextmanager
def running(workdir: str, credentials: str | None = None, fail_status: int | None = None,
            lifetime_seconds: float = 120.0) -> Iterator[FakeProxy]:
    os.makedirs(workdir, exist_ok=True)
    port_file = os.path.join(workdir, "fakeproxy.port")
    log_path = os.path.join(workdir, "fakeproxy.requests.jsonl")
    argv = [sys.executable, os.path.abspath(__file__), "--port-file", port_file, "--log", log_path,
            "--lifetime-seconds", str(lifetime_seconds)]
    if credentials is not None:
        secret = os.path.join(workdir, "fakeproxy.credentials")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as handle:
            handle.write(credentials + "\n")
        argv += ["--credentials-file", secret]
    if fail_status is not None:
        argv += ["--fail-status", str(fail_status)]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fake proxy did not start (exit {process.poll()})")
            time.sleep(0.01)
        yield FakeProxy(process, int(open(port_file, encoding="ascii").read()), log_path)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(3)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cm's loopback test proxy (127.0.0.1 only)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--credentials-file")
    parser.add_argument("--fail-status", type=int)
    parser.add_argument("--lifetime-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    credentials = None
    if args.credentials_file:
        with open(args.credentials_file, encoding="utf-8") as handle:
            credentials = handle.read().strip()
    return serve(args.port_file, args.log, credentials, args.fail_status, args.lifetime_seconds)


if __name__ == "__main__":
    sys.exit(main())
