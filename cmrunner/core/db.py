"""The SQLite connection layer: durability pragmas and the one way to write (``immediate``).

Contract:
- ``connect`` opens a database file in WAL mode with ``synchronous=FULL`` (plus ``fullfsync`` on
  macOS), so a returned COMMIT is on the medium; it does no schema work.
- Every mutation happens inside ``immediate(conn)`` (``BEGIN IMMEDIATE``): the write lock is taken
  up front, so a transaction never fails half-way with a lock upgrade error; a connection that
  knows its data root's write gate queues on it first (``cmrunner.core.gate``).
- A lock held past the busy budget becomes ``STORE_BUSY``; nothing is half-written.
- Hook connections: a hook or capture process does not close its connection after a successful
  commit; it ends with ``os._exit`` (``cmrunner.entry``). Closing the last connection makes SQLite
  checkpoint the WAL into the database with fsync, which would spend the host's timeout on work
  that is not needed for durability: the COMMIT already synced the WAL (``synchronous=FULL``), the
  next connection to open recovers it, and the drain checkpoints it before it releases its lease.
  That checkpoint also keeps the WAL short (the next write restarts it), so the recovery a first
  opener runs stays cheap; SQLite's auto-checkpoint (1000 pages) bounds it when no drain runs.
This module is below the schema (``migrations`` uses it, ``store`` opens and migrates through it),
so the store and its migrations never import each other. Stdlib only (hook path).
"""

from __future__ import annotations

import sqlite3
import sys
import time

from cmrunner.core import gate
from cmrunner.core.errors import StoreError

# Codex kills a hook after 3 s; leave room for start-up and the commit itself.
HOOK_BUSY_MS = 2000
DRAIN_BUSY_MS = 5000


def _busy(busy_ms: int) -> StoreError:
    return StoreError(
        "STORE_BUSY",
        f"the runtime database stayed locked for more than {busy_ms} ms; retry, "
        "or run `cm status` to see which process holds it",
    )


class StoreConnection(sqlite3.Connection):
    """A connection that knows its data root's write gate (``None``: no gate, e.g. read-only use)."""

    gate_path: str | None = None


def connect(db_path: str, busy_ms: int, gate_path: str | None = None) -> sqlite3.Connection:
    """Open ``db_path`` with the durability pragmas; no schema work."""
    try:
        conn = sqlite3.connect(db_path, timeout=busy_ms / 1000, isolation_level=None, factory=StoreConnection)
        conn.gate_path = gate_path
    except sqlite3.Error as exc:
        raise StoreError("STORE_UNAVAILABLE", f"cannot open {db_path} ({exc}); check the data root's permissions") from None
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError("STORE_UNAVAILABLE", f"{db_path} cannot use WAL journaling (got {mode}); use a local disk")
        conn.execute("PRAGMA synchronous=FULL")
        if sys.platform == "darwin":  # pragma: no cover - macOS only
            conn.execute("PRAGMA fullfsync=ON")
            conn.execute("PRAGMA checkpoint_fullfsync=ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        if not isinstance(exc, sqlite3.OperationalError):
            raise damaged(db_path) from None
        raise StoreError("STORE_UNAVAILABLE", f"cannot prepare {db_path}; check the data root's permissions") from None
    return conn


def damaged(db_path: str) -> StoreError:
    """The one answer for a file that is not a readable SQLite database (``STORE_DAMAGED``)."""
    return StoreError("STORE_DAMAGED", f"{db_path} is not a readable SQLite database; move it aside (cm starts a "
                                       "new queue; memory files are kept) or restore it from runtime/upgrade-backups")


class immediate:  # lower case: used as ``with db.immediate(conn) as conn:``, like the function it was
    """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls the whole transaction back.

    A connection from ``open_store`` first queues on the data root's write gate
    (``cmrunner.core.gate``), and gate and SQLite lock share the one ``busy_ms`` budget. Every writer —
    hook, capture, drain, CLI — queues the same way, so a busy drain cannot starve a hook with
    SQLite's back-off sleeps, nor the other way round. (A class, not ``contextlib.contextmanager``:
    contextlib costs every hook about a millisecond of import, issue 35.)
    """

    __slots__ = ("conn", "busy_ms", "gate")

    def __init__(self, conn: sqlite3.Connection, busy_ms: int = DRAIN_BUSY_MS) -> None:
        self.conn = conn
        self.busy_ms = busy_ms
        self.gate: gate.held | None = None

    def __enter__(self) -> sqlite3.Connection:
        conn, busy_ms = self.conn, self.busy_ms
        gate_path = getattr(conn, "gate_path", None)
        if gate_path is not None:
            started = time.monotonic()
            held = gate.held(gate_path, busy_ms / 1000)
            held.__enter__()
            self.gate = held
            left_ms = max(50, busy_ms - int((time.monotonic() - started) * 1000))
        try:
            if gate_path is not None:
                conn.execute(f"PRAGMA busy_timeout={left_ms}")
            _begin(conn, busy_ms)
        except BaseException:
            self._release()
            raise
        return conn

    def __exit__(self, kind: type[BaseException] | None, _exc: BaseException | None, _tb: object) -> None:
        try:
            if kind is not None:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                return
            _commit(self.conn, self.busy_ms)
        finally:
            self._release()

    def _release(self) -> None:
        held, self.gate = self.gate, None
        if held is not None:
            held.__exit__(None, None, None)


def _begin(conn: sqlite3.Connection, busy_ms: int) -> None:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        raise


def _commit(conn: sqlite3.Connection, busy_ms: int) -> None:
    try:
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        raise StoreError("STORE_WRITE_FAILED", "the runtime database refused a commit; check free disk space") from None
