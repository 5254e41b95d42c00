"""A change the user asks for (undo, restore, purge) committed through the Writer's own path.

Contract:
- ``exclusive(paths, home)`` holds the drain lease for the action, as a drain would: it waits for
  a running drain to finish (``DRAIN_BUSY`` after ``wait``, ``WAIT_SECONDS`` unless a caller
  with a deadline of its own gives less), finishes any commit a crash
  interrupted (``commit.recover`` under the repository lock), and at the end releases the lease
  and starts a drain in the same transaction, so nothing a capture admitted meanwhile waits.
- ``commit_change`` publishes the changed documents with a receipt of their own (job id
  ``user-<hex>``, decision kind ``undo`` / ``restore`` / ``purge`` / ``sync``, no observations, no model) by
  ``commit.commit``: repository lock → transaction → lease fence → CAS → publish → database side.
  Its history versions are the user's, staged before publishing like a Memory Agent commit's.
- No model is ever called; nothing is published unless the whole change succeeds.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from cmrunner.core import drainlease, history, identity, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.identity import Identity
from cmrunner.core.sections import Document
from cmrunner.writer_proc import commit

RECEIPT_PREFIX = "user-"
WAIT_SECONDS = 60.0
POLL_SECONDS = 0.1


def now_ms() -> int:
    return int(time.time() * 1000)


class Session:
    """An open store and the lease this process holds for one user action."""

    def __init__(self, paths: DataPaths, conn: sqlite3.Connection, me: Identity) -> None:
        self.paths = paths
        self.conn = conn
        self.me = me


@contextmanager
def exclusive(paths: DataPaths, home: str, wait: float = WAIT_SECONDS) -> Iterator[Session]:
    conn = store.open_store(paths)
    me = identity.current()
    try:
        deadline = time.monotonic() + wait
        while True:
            with store.immediate(conn):
                if drainlease.acquire(conn, me):
                    break
            if time.monotonic() > deadline:
                raise CmError("DRAIN_BUSY", f"a drain kept processing memory for {wait:.0f} s; "
                                            "run the command again when `cm status` shows it idle")
            time.sleep(POLL_SECONDS)
        try:
            with commit.repository_lock(paths):
                commit.recover(paths, conn, now_ms)
            yield Session(paths, conn, me)
        finally:
            with store.immediate(conn):
                drainlease.release(conn, me)
                drainlease.ensure_drain(conn, home)
    finally:
        conn.close()


def commit_change(session: Session, snapshot: dict[str, Document], changed: dict[str, Document],
                  kind: str, who: history.Provenance | None = None, trashed: frozenset[str] = frozenset()) -> str:
    """Publish ``changed`` (documents read into ``snapshot``) as the user's ``kind``; returns the receipt id.

    ``who`` names the change's origin in history (a sync: the device it came from); ``trashed`` the
    section keys whose replaced text goes to the trash (``history.stage``)."""
    job_id = RECEIPT_PREFIX + uuid.uuid4().hex
    now = now_ms()
    receipt = {
        "version": 1, "id": job_id, "jobId": job_id, "observationIds": [], "decisions": [kind],
        "editResult": None, "promptDigest": "", "model": "user", "timestamp": now, "usage": {},
        "documents": [{"target": t, "before": snapshot[t].hash, "after": changed[t].hash} for t in sorted(changed)],
        "invalidatedTargets": [], "linkTargets": [], "links": [], "forgetSourceIds": [], "purgeSourceIds": [],
        "watermarks": [],
    }
    with store.immediate(session.conn):
        history.stage(session.conn, job_id, snapshot, changed, {}, who or history.Provenance(history.USER), now,
                      kind=kind, trashed=trashed)
    commit.commit(session.paths, session.conn, job_id, lambda: drainlease.assert_held(session.conn, session.me),
                  snapshot, changed, receipt, now_ms)
    return job_id
