"""The runtime store: one SQLite file per data root, durable on every commit.

Contract:
- ``runtime.sqlite`` runs in WAL mode with ``synchronous=FULL`` (plus ``fullfsync`` on macOS), so
  a returned COMMIT is on the medium.
- Every mutation happens inside ``immediate(conn)`` (``BEGIN IMMEDIATE``, from ``cmrunner.core.db``,
  re-exported here with ``connect`` and the busy budgets so callers name one module): the write
  lock is taken up front, and store connections queue on the fair write gate first.
- Hooks use a short busy timeout (they live under a 3 s host timeout); the drain and the CLI use a
  longer one. A lock held past the timeout becomes ``STORE_BUSY``; nothing is half-written.
- ``open_store`` brings the schema to the version this code knows (``cmrunner.core.migrations``) and
  refuses a database from a newer version.
Stdlib only (hook path).
"""

from __future__ import annotations

import os
import sqlite3

from cmrunner.core import fsutil, migrations

# Re-exported: callers name the store for every database operation.
from cmrunner.core.db import (
    DRAIN_BUSY_MS as DRAIN_BUSY_MS,
    HOOK_BUSY_MS as HOOK_BUSY_MS,
    connect as connect,
    damaged,
    immediate as immediate,
)
from cmrunner.core.errors import StoreError
from cmrunner.core.home import DataPaths


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
    prepare_data_root(paths)
    existed = os.path.exists(paths.db)
    conn = connect(paths.db, busy_ms, gate_path=paths.write_gate)
    try:
        if not existed:
            os.chmod(paths.db, 0o600)
        migrations.migrate(conn, paths, busy_ms)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError):
            raise
        raise damaged(paths.db) from None
    except BaseException:
        conn.close()
        raise
    return conn


def open_existing(paths: DataPaths, busy_ms: int = DRAIN_BUSY_MS) -> sqlite3.Connection | None:
    """Open the store read-mostly for status: ``None`` if it does not exist; never creates it."""
    if not os.path.isfile(paths.db) or os.path.islink(paths.db):
        return None
    try:
        conn = sqlite3.connect(f"file:{paths.db}?mode=ro", uri=True, timeout=busy_ms / 1000, isolation_level=None)
    except sqlite3.Error:
        raise StoreError("STORE_UNAVAILABLE", f"cannot open {paths.db} for reading; check its permissions") from None
    try:
        migrations.check_readable(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError):
            raise
        raise damaged(paths.db) from None
    return conn
