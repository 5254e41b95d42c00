"""The runtime store: one SQLite file per data root, durable on every commit.

Contract:
- ``runtime.sqlite`` runs in WAL mode with ``synchronous=FULL`` (plus ``fullfsync`` on macOS), so
  a returned COMMIT is on the medium.
- Every mutation happens inside ``immediate(conn)`` (``BEGIN IMMEDIATE``): the write lock is taken
  up front, so a transaction never fails half-way with a lock upgrade error; store connections
  queue on the fair write gate first (``cmrunner.gate``).
- Hooks use a short busy timeout (they live under a 3 s host timeout); the drain and the CLI use a
  longer one. A lock held past the timeout becomes ``STORE_BUSY``; nothing is half-written.
- ``open_store`` brings the schema to the version this code knows (``cmrunner.migrations``) and
  refuses a database from a newer version.
Stdlib only (hook path).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cmrunner import fsutil, gate
from cmrunner.errors import StoreError
from cmrunner.home import DataPaths

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
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        raise StoreError("STORE_UNAVAILABLE", f"cannot prepare {db_path}; check the data root's permissions") from None
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection, busy_ms: int = DRAIN_BUSY_MS) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls the whole transaction back.

    A connection from ``open_store`` first queues on the data root's write gate
    (``cmrunner.gate``), and gate and SQLite lock share the one ``busy_ms`` budget. Every writer —
    hook, capture, drain, CLI — queues the same way, so a busy drain cannot starve a hook with
    SQLite's back-off sleeps, nor the other way round.
    """
    gate_path = getattr(conn, "gate_path", None)
    if gate_path is None:
        with _transaction(conn, busy_ms):
            yield conn
        return
    started = time.monotonic()
    with gate.held(gate_path, busy_ms / 1000):
        left_ms = max(50, busy_ms - int((time.monotonic() - started) * 1000))
        conn.execute(f"PRAGMA busy_timeout={left_ms}")
        with _transaction(conn, busy_ms):
            yield conn


@contextmanager
def _transaction(conn: sqlite3.Connection, busy_ms: int) -> Iterator[sqlite3.Connection]:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        raise
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if "locked" in str(exc) or "busy" in str(exc):
            raise _busy(busy_ms) from None
        raise StoreError("STORE_WRITE_FAILED", "the runtime database refused a commit; check free disk space") from None


def prepare_data_root(paths: DataPaths) -> None:
    """Create the data root's directories (0700) if missing; refuse symlinked components."""
    for directory, what in ((paths.root, "data root"), (paths.runtime, "runtime directory")):
        fsutil.ensure_private_dir(directory, what)
    if os.path.lexists(paths.db) and (os.path.islink(paths.db) or not os.path.isfile(paths.db)):
        raise StoreError("UNSAFE_PATH", f"{paths.db} is not a regular file; move it aside")
    if not os.access(paths.root, os.W_OK):
        raise StoreError("DATA_ROOT_UNWRITABLE", f"the data root {paths.root} is not writable; fix its permissions")


def open_store(paths: DataPaths, busy_ms: int = DRAIN_BUSY_MS) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the runtime store of ``paths``."""
    from cmrunner import migrations

    prepare_data_root(paths)
    existed = os.path.exists(paths.db)
    conn = connect(paths.db, busy_ms, gate_path=paths.write_gate)
    try:
        if not existed:
            os.chmod(paths.db, 0o600)
        migrations.migrate(conn, paths, busy_ms)
    except BaseException:
        conn.close()
        raise
    return conn


def open_existing(paths: DataPaths, busy_ms: int = DRAIN_BUSY_MS) -> sqlite3.Connection | None:
    """Open the store read-mostly for status: ``None`` if it does not exist; never creates it."""
    if not os.path.isfile(paths.db) or os.path.islink(paths.db):
        return None
    from cmrunner import migrations

    try:
        conn = sqlite3.connect(f"file:{paths.db}?mode=ro", uri=True, timeout=busy_ms / 1000, isolation_level=None)
    except sqlite3.Error:
        raise StoreError("STORE_UNAVAILABLE", f"cannot open {paths.db} for reading; check its permissions") from None
    migrations.check_readable(conn)
    return conn
