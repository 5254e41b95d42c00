"""What to do when one queued item (an inbox row, a session, a job) fails to be consumed.

Contract:
- ``transient(exc)`` is true for a failure of the environment, not of the item: the store is busy,
  locked, full, read-only or damaged (``StoreError``, or a ``sqlite3.OperationalError`` whose
  SQLite error is one of those), the disk or a file failed (``OSError``), memory ran out. Such a
  failure propagates: setting the item aside would punish good data for a bad disk, and the drain
  records it and gives its job back (``writer_proc.drain``).
- Anything else that one item raises is the item's own: the consumer sets it aside, with a stable
  code, in the transaction that rolled its work back, and goes on with the rest. An expected
  ``CmError`` keeps its code; anything else becomes ``UNEXPECTED`` with ``detail(exc)``: the
  exception's class and the innermost ``file:line:function`` of cm's own code — never the
  exception's message, which may quote what the item held.
Stdlib only.
"""

from __future__ import annotations

import sqlite3

from cmrunner.core import drainfailures
from cmrunner.core.errors import CmError, StoreError

UNEXPECTED = "UNEXPECTED_FAILURE"
# SQLite result codes that describe the database or the machine, never the row being written.
_ENVIRONMENT = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_NOMEM", "SQLITE_READONLY",
                "SQLITE_CANTOPEN", "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_INTERRUPT", "SQLITE_PROTOCOL")


def transient(exc: BaseException) -> bool:
    """True when ``exc`` says the environment failed, not the item (module contract)."""
    if not isinstance(exc, Exception) or isinstance(exc, (StoreError, OSError, MemoryError)):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        name = getattr(exc, "sqlite_errorname", "") or ""
        return name.startswith(_ENVIRONMENT) or "locked" in str(exc) or "busy" in str(exc)
    return False


def detail(exc: BaseException) -> str:
    """``<class> at <file:line:function>``: where in cm's code the failure surfaced."""
    frames = drainfailures.frames(exc.__traceback__)
    own = [f for f in frames if f.startswith("cmrunner/")]
    where = (own or frames or ["?"])[-1]
    return f"{type(exc).__name__} at {where}"


def code_of(exc: Exception, expected: frozenset[str]) -> tuple[str, str | None]:
    """``(code, detail)`` to set an item aside with: an expected ``CmError`` speaks for itself;
    anything else is ``UNEXPECTED`` with its detail."""
    if isinstance(exc, CmError) and exc.code in expected:
        return exc.code, None
    return UNEXPECTED, detail(exc)
