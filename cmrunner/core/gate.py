"""A fair queue in front of the store's write lock for processes that run under host timeouts.

Why: SQLite's busy handler sleeps with a growing back-off (up to 100 ms between attempts), so
when dozens of hook processes wait at once some of them keep losing and time out while the lock
is mostly free. Hooks and captures therefore first queue on an ``flock`` of
``runtime/write.gate``: the kernel wakes a waiter the moment the holder releases, so waiting time
is the sum of real hold times, not of back-off sleeps. The drain does not take the gate; its rare
short transactions still meet the hooks at SQLite's own lock.

Contract: ``held(path, seconds)`` acquires the gate or raises ``STORE_BUSY`` after ``seconds``
(a blocking ``flock`` bounded by ``SIGALRM`` in the main thread; short polling in other threads,
where Python allows no signal handlers); with ``seconds`` ``None`` it waits as long as it takes
(the project registry's lock, ``cmrunner.core.projects``, whose holders only read and rename a
small file);
the lock is released when the block ends or the process dies (the kernel drops it). Stdlib only.
"""

from __future__ import annotations

import fcntl
import os
import time

from cmrunner.core.errors import StoreError


class _Expired(Exception):
    pass


def _expire(_signum: int, _frame: object) -> None:
    raise _Expired


def _busy(seconds: float) -> StoreError:
    return StoreError(
        "STORE_BUSY",
        f"other cm processes kept the store busy for more than {int(seconds * 1000)} ms; "
        "retry, or run `cm status` to see what is running",
    )


def _poll(fd: int, seconds: float) -> None:
    """The gate for a thread that cannot use SIGALRM: short non-blocking tries until the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        time.sleep(0.002)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _busy(seconds) from None


class held:  # lower case: used as ``with gate.held(path, seconds):``, like the function it was
    """The gate, held for a ``with`` block (a class, not ``contextlib.contextmanager``: contextlib
    costs every hook about a millisecond of import, issue 35)."""

    __slots__ = ("path", "seconds", "fd")

    def __init__(self, path: str, seconds: float | None) -> None:
        self.path = path
        self.seconds = seconds
        self.fd = -1

    def __enter__(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _acquire(fd, self.seconds)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def __exit__(self, *_exc: object) -> None:
        fd, self.fd = self.fd, -1
        os.close(fd)


def _acquire(fd: int, seconds: float | None) -> None:
    if seconds is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        import signal  # only when contended: importing it costs every uncontended hook ~0.5 ms

        try:
            previous = signal.signal(signal.SIGALRM, _expire)
        except ValueError:  # not the main thread (e.g. an MCP tool's worker): no signals there
            _poll(fd, seconds)
        else:
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except _Expired:
                raise _busy(seconds) from None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
