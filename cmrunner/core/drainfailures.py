"""The ``drain_failures`` table: why a drain or ``cm flush`` stopped unexpectedly.

Contract:
- ``record`` stores one failure: time, process (``drain``/``flush``, or ``hook``/``capture`` for an
  ``INTERNAL_ERROR`` at a hook's boundary), code (a ``CmError``'s code, else ``DRAIN_CRASHED``, or
  the caller's), the exception's class name, a ``CmError``'s message (messages of other
  exceptions may quote anything, so they are never kept), the traceback as ``file:line:function``
  frames only, and the job the process held. Only the newest ``KEEP`` rows are kept.
- ``record_bug`` does the same on its own connection for a boundary's ``INTERNAL_ERROR`` (best effort).
- ``resolve`` marks every open drain or flush failure resolved when a later drain finishes cleanly, so
  ``cm status`` can tell a past crash from a current one.
- ``latest`` returns the newest failure as a plain dict for ``cm status`` (text and JSON).
Stdlib only; this module is the only one that reads or writes the table.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import traceback
from types import TracebackType

import cmrunner
from cmrunner.core import store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

CRASH_CODE = "DRAIN_CRASHED"
INTERNAL_CODE = "INTERNAL_ERROR"  # what a hook, capture or MCP call answers for a cm bug
KEEP = 20
MAX_FRAMES = 16
# The folder holding the installed ``cmrunner`` package: frames are shown relative to it.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cmrunner.__file__)))


def _where(filename: str) -> str:
    """A frame's file as a path inside the installed package, else its base name (no user paths)."""
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE_ROOT + os.sep):
        return os.path.relpath(path, _PACKAGE_ROOT)
    return os.path.basename(path)


def frames(tb: TracebackType | None) -> list[str]:
    """``file:line:function`` of each frame, innermost last, at most ``MAX_FRAMES``."""
    summary = traceback.extract_tb(tb)
    return [f"{_where(f.filename)}:{f.lineno}:{f.name}" for f in summary][-MAX_FRAMES:]


def describe(exc: BaseException) -> tuple[str, str | None]:
    """(code, message) safe to store and show: a ``CmError`` speaks for itself, anything else
    is only its code ``DRAIN_CRASHED``."""
    if isinstance(exc, CmError):
        return exc.code, exc.message
    return CRASH_CODE, None


def record(conn: sqlite3.Connection, process: str, exc: BaseException, job_id: str | None,
           code: str | None = None) -> None:
    """Inside the caller's transaction: store one failure (``code`` overrides the described one)
    and prune old ones."""
    described, message = describe(exc)
    code = code or described
    conn.execute(
        "INSERT INTO drain_failures(at, process, code, exception, message, frames, job_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (int(time.time() * 1000), process, code, type(exc).__name__, message, json.dumps(frames(exc.__traceback__)),
         job_id),
    )
    conn.execute("DELETE FROM drain_failures WHERE id NOT IN (SELECT id FROM drain_failures ORDER BY id DESC LIMIT ?)",
                 (KEEP,))


def record_bug(paths: DataPaths, process: str, exc: BaseException, busy_ms: int) -> None:
    """Best effort, on a connection of its own: keep a cm bug that a boundary answered with
    ``INTERNAL_CODE`` (a hook, a capture, an MCP call) where ``cm status`` shows it. A failure here
    is swallowed: the answer to the host matters more than the record."""
    try:
        conn = store.open_store(paths, busy_ms)
        try:
            with store.immediate(conn, busy_ms):
                record(conn, process, exc, None, INTERNAL_CODE)
        finally:
            conn.close()
    except Exception:
        pass


def resolve(conn: sqlite3.Connection, now: int) -> None:
    """Inside the caller's transaction: a drain finished cleanly after every open drain or flush
    failure (a hook's failure is not the drain's to resolve)."""
    conn.execute("UPDATE drain_failures SET resolved_at = ? WHERE resolved_at IS NULL AND process IN ('drain', 'flush')",
                 (now,))


def latest(conn: sqlite3.Connection) -> dict | None:
    """The newest failure, or ``None`` (also when the table does not exist yet)."""
    try:
        row = conn.execute(
            "SELECT at, process, code, exception, message, frames, job_id, resolved_at FROM drain_failures"
            " ORDER BY id DESC LIMIT 1"
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    if row is None:
        return None
    at, process, code, exception, message, raw_frames, job_id, resolved_at = row
    try:
        stack = [str(f) for f in json.loads(raw_frames)]
    except ValueError:
        stack = []
    return {"at": at, "process": process, "code": code, "exception": exception, "message": message,
            "frames": stack, "jobId": job_id, "resolvedAt": resolved_at}
