"""A loopback TCP server that accepts every connection and never answers (a remote that hangs).

Run as ``python silent_server.py <port file> <event log> <lifetime seconds>``: it binds 127.0.0.1 on
an ephemeral port, writes the port to the port file, and appends ``accepted`` when a client
connects and ``closed`` when that client's side goes away (a killed git closes its socket). It
exits by itself after the lifetime; tests stop it earlier by its PID."""

from __future__ import annotations

import os
import selectors
import socket
import sys
import time


def main(port_file: str, events: str, lifetime: float) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    tmp = port_file + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(str(server.getsockname()[1]))
    os.replace(tmp, port_file)
    chosen = selectors.DefaultSelector()
    chosen.register(server, selectors.EVENT_READ)
    ends = time.monotonic() + lifetime
    with open(events, "a", buffering=1, encoding="ascii") as log:
        while time.monotonic() < ends:
            for key, _mask in chosen.select(timeout=0.2):
                if key.fileobj is server:
                    conn, _addr = server.accept()
                    chosen.register(conn, selectors.EVENT_READ)
                    log.write("accepted\n")
                    continue
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                try:
                    data = conn.recv(65536)  # read what the client sends, answer nothing
                except OSError:
                    data = b""
                if not data:
                    chosen.unregister(conn)
                    conn.close()
                    log.write("closed\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
