"""Finding the detached drains of one home through /proc (shared by the tests and the benchmarks)."""

from __future__ import annotations

import os
import time


def drain_pids(home: str) -> list[int]:
    """PIDs of live ``session-drain`` processes for ``home`` (zombies excluded)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if b"session-drain" in argv and home.encode() in argv and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def wait_no_drain(home: str, timeout: float = 30.0) -> None:
    """Return once no drain of ``home`` is alive; ``TimeoutError`` (naming the PIDs) if one still is
    after ``timeout`` seconds, so a caller never goes on as if the drains had finished."""
    deadline = time.monotonic() + timeout
    while pids := drain_pids(home):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"drains of {home} still alive after {timeout} s: {pids}")
        time.sleep(0.02)
