"""The single drain of a data root: its lease and its detached spawn.

Contract (why it is lost-wakeup free):
- A capture admits its rows and calls ``ensure_drain`` inside the same ``BEGIN IMMEDIATE``
  transaction. If no live process holds ``drain_lease``, it spawns ``cm session-drain`` and
  records the child's identity with state ``spawned`` before COMMIT, so concurrent captures see
  a live holder and never spawn a second drain.
- The drain claims the lease (``acquire``) and gives it up only in a transaction that also finds
  no runnable work (``release_if_idle``). Whichever of the two transactions runs second sees the
  other's effect: either the drain sees the new rows, or the capture sees no lease and spawns.
- A holder is alive only if its (boot id, pid, start time) still match (``identity.is_alive``);
  a dead holder's lease is taken over at once, not after a timeout.
- The child is detached: a new session (immune to the host's process-group signals), stdio on
  /dev/null and every other inherited descriptor closed, so no host waits on its pipes.
Stdlib only (hook path).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable

from cmrunner.core import identity
from cmrunner.core.errors import CmError
from cmrunner.core.identity import Identity


def _holder(conn: sqlite3.Connection) -> tuple[Identity, str] | None:
    row = conn.execute("SELECT boot_id, pid, starttime, state FROM drain_lease WHERE id = 1").fetchone()
    if row is None:
        return None
    return Identity(row[0], int(row[1]), int(row[2])), row[3]


def live_holder(conn: sqlite3.Connection) -> Identity | None:
    """The identity of the live lease holder, or ``None`` when the lease is free or stale."""
    found = _holder(conn)
    if found is None:
        return None
    holder, _state = found
    return holder if identity.is_alive(holder) else None


def drain_command(home: str) -> list[str]:
    return [sys.executable, "-I", "-m", "cmrunner", "session-drain", "--home", home]


def spawn_detached(argv: list[str]) -> int:
    """Start ``argv`` detached (see module contract) and return its pid without waiting."""
    if os.path.isdir("/proc/self/fd"):
        actions: list[tuple] = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        # posix_spawn keeps every descriptor not marked close-on-exec; a host's pipe inherited by
        # the drain would make the host wait for the drain (python-notes.md §1.6).
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2:
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        return os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions, setsid=True)
    import subprocess  # pragma: no cover - platforms without /proc

    child = subprocess.Popen(  # pragma: no cover
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        close_fds=True, start_new_session=True,
    )
    return child.pid  # pragma: no cover


def ensure_drain(conn: sqlite3.Connection, home: str) -> bool:
    """Inside the caller's transaction: spawn a drain unless a live one holds the lease."""
    if live_holder(conn) is not None:
        return False
    pid = spawn_detached(drain_command(home))
    child = identity.of(pid)
    if child is None:
        return False  # it died at once; the next capture will try again
    conn.execute(
        "INSERT OR REPLACE INTO drain_lease(id, boot_id, pid, starttime, state, acquired_at) "
        "VALUES (1, ?, ?, ?, 'spawned', ?)",
        (child.boot_id, child.pid, child.starttime, int(time.time() * 1000)),
    )
    return True


def acquire(conn: sqlite3.Connection, me: Identity) -> bool:
    """Inside the caller's transaction: take the lease if it is ours, free or stale."""
    found = _holder(conn)
    if found is not None:
        holder, _state = found
        if holder != me and identity.is_alive(holder):
            return False
    conn.execute(
        "INSERT OR REPLACE INTO drain_lease(id, boot_id, pid, starttime, state, acquired_at) "
        "VALUES (1, ?, ?, ?, 'held', ?)",
        (me.boot_id, me.pid, me.starttime, int(time.time() * 1000)),
    )
    return True


def release_if_idle(conn: sqlite3.Connection, me: Identity, has_work: Callable[[sqlite3.Connection], bool]) -> bool:
    """Inside the caller's transaction: drop our lease only if no runnable work is left."""
    if has_work(conn):
        return False
    conn.execute(
        "DELETE FROM drain_lease WHERE id = 1 AND boot_id = ? AND pid = ? AND starttime = ?",
        (me.boot_id, me.pid, me.starttime),
    )
    return True


def release(conn: sqlite3.Connection, me: Identity) -> None:
    """Inside the caller's transaction: drop our lease whatever is left (a failing drain ends)."""
    conn.execute(
        "DELETE FROM drain_lease WHERE id = 1 AND boot_id = ? AND pid = ? AND starttime = ?",
        (me.boot_id, me.pid, me.starttime),
    )


def assert_held(conn: sqlite3.Connection, me: Identity) -> None:
    """``STALE_LEASE`` unless ``me`` holds the lease (a user action's commit fence)."""
    found = _holder(conn)
    if found is None or found[0] != me:
        raise CmError("STALE_LEASE", "another cm process took over the memory while this change was prepared; "
                                     "nothing was changed: run the command again")
