"""Admission of observations: the one way material enters the Writer's queue.

Contract:
- ``admit`` runs inside the caller's ``BEGIN IMMEDIATE`` transaction and inserts at most one row.
  Identity is ``(namespace, entry_id)``: the same identity with the same text is a duplicate (the
  existing row is returned), with different text it is ``SUBMISSION_CONFLICT``.
- The provenance class comes from the source name alone (``provenance_of``); a source with no
  class is admitted ``quarantined`` (``UNSUPPORTED_SOURCE``) and never disclosed.
- A non-edit observation whose normalised text was forgotten in the same scope is admitted
  ``quarantined`` with ``FORGOTTEN_SOURCE``: a forget is not undone by repeating the exact words.
- Scope is frozen here; nothing later re-derives it.
- ``quarantined_by_issue`` and ``release`` serve ``cm status`` and ``cm release``: a released
  observation goes back to ``pending`` unchanged (same text, scope and provenance), so the Writer's
  checks run on it again; the release policy itself is the caller's (``cmrunner.core.reasons``).
Stdlib only.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
import unicodedata

from cmrunner.core import scopes
from cmrunner.core.errors import CmError

PROVENANCE = {
    "interactive": "user_explicit",
    "rpc": "user_explicit",
    "mcp_user_submission": "user_explicit",
    "codex_user_delivery": "user_explicit",
    "agent_import": "agent_observation",
    "document_import": "document_import",
}
TASK_KINDS = ("observation", "edit")
ADMISSION_STATES = ("buffered", "pending")


def provenance_of(source: str) -> str | None:
    """The disclosure class of a source name, or ``None`` when it may never be disclosed."""
    return PROVENANCE.get(source)


def content_digest(text: str) -> str:
    """Digest of the normalised text, the key of forget tombstones (exact text, not paraphrase)."""
    normal = unicodedata.normalize("NFC", text).strip()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


class Admitted:
    __slots__ = ("id", "state", "duplicate")

    def __init__(self, id: int, state: str, duplicate: bool) -> None:
        self.id = id
        self.state = state
        self.duplicate = duplicate


def _check_text(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise CmError("INVALID_OBSERVATION", "an observation needs non-empty text")
    if "\x00" in text:
        raise CmError("INVALID_OBSERVATION", "an observation must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CmError("INVALID_OBSERVATION", "an observation must be well-formed Unicode") from None
    return text


def admit(conn: sqlite3.Connection, *, namespace: str, entry_id: str, text: str, scope: str, source: str,
          observed_at: str, task_kind: str = "observation", state: str = "pending",
          batch_id: str | None = None) -> Admitted:
    """Admit one observation inside the caller's transaction (see module contract)."""
    _check_text(text)
    if not scopes.is_scope(scope):
        raise CmError("INVALID_OBSERVATION", "an observation's scope must be global or project:<id>")
    if task_kind not in TASK_KINDS or state not in ADMISSION_STATES:
        raise CmError("INVALID_TASK_KIND", "task kind must be observation or edit, state buffered or pending")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    row = conn.execute(
        "SELECT id, digest, state FROM observations WHERE namespace = ? AND entry_id = ?", (namespace, entry_id)
    ).fetchone()
    if row is not None:
        if row[1] != digest:
            raise CmError(
                "SUBMISSION_CONFLICT",
                "this submission id was already used with different content; use a new id",
            )
        return Admitted(int(row[0]), row[2], duplicate=True)
    provenance = provenance_of(source)
    cdigest = content_digest(text)
    issue = None
    if provenance is None:
        state, issue = "quarantined", "UNSUPPORTED_SOURCE"
    elif task_kind != "edit" and conn.execute(
        "SELECT 1 FROM forgotten_sources WHERE scope = ? AND digest = ?", (scope, cdigest)
    ).fetchone():
        state, issue = "quarantined", "FORGOTTEN_SOURCE"
    cursor = conn.execute(
        "INSERT INTO observations(namespace, entry_id, text, digest, content_digest, scope, source, provenance,"
        " task_kind, state, observed_at, enqueued_at, batch_id, issue)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (namespace, entry_id, text, digest, cdigest, scope, source, provenance, task_kind, state, observed_at,
         int(time.time() * 1000), batch_id, issue),
    )
    return Admitted(int(cursor.lastrowid), state, duplicate=False)


FLUSH_KEY = "flush_requested"


def request_flush(conn: sqlite3.Connection) -> None:
    """Ask the Writer to process non-session work now instead of waiting for its thresholds."""
    conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, '1')", (FLUSH_KEY,))


def quarantined_by_issue(conn: sqlite3.Connection, sample: int = 10) -> list[tuple[str | None, int, list[int], list[str]]]:
    """Quarantined observations grouped by issue, largest group first:
    (issue, count, the first ``sample`` ids, the ids of the jobs they belong to)."""
    groups = []
    for issue, count in conn.execute(
        "SELECT issue, COUNT(*) FROM observations WHERE state = 'quarantined' GROUP BY issue ORDER BY 2 DESC, 1"
    ).fetchall():
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM observations WHERE state = 'quarantined' AND issue IS ? ORDER BY id LIMIT ?", (issue, sample))]
        jobs = [r[0] for r in conn.execute(
            "SELECT job_id FROM observations WHERE state = 'quarantined' AND issue IS ? AND job_id IS NOT NULL"
            " GROUP BY job_id ORDER BY MIN(id) LIMIT ?", (issue, sample))]
        groups.append((issue, int(count), ids, jobs))
    return groups


def quarantined(conn: sqlite3.Connection, observation_id: int | None = None,
                issue: str | None = None) -> list[tuple[int, str, str | None, str | None, bool]]:
    """(id, state, issue, job id, text kept) of one observation by id (any state), or of every
    quarantined observation with ``issue``."""
    columns = "id, state, issue, job_id, text IS NOT NULL"
    if observation_id is not None:
        rows = conn.execute(f"SELECT {columns} FROM observations WHERE id = ?", (observation_id,)).fetchall()
    else:
        rows = conn.execute(f"SELECT {columns} FROM observations WHERE state = 'quarantined' AND issue = ?"
                            " ORDER BY id", (issue,)).fetchall()
    return [(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]


def release(conn: sqlite3.Connection, ids: list[int]) -> int:
    """Inside the caller's transaction: put quarantined observations back to ``pending``."""
    released = 0
    for oid in ids:
        released += conn.execute(
            "UPDATE observations SET state = 'pending', issue = NULL, job_id = NULL"
            " WHERE id = ? AND state = 'quarantined' AND text IS NOT NULL", (oid,)).rowcount
    return released


# Quarantine is final for an observation without a job: admission refused it (unsupported source,
# forgotten text) or the Writer isolated it before any network call (SENSITIVE_INPUT, oversized).
# Its text is kept for the user to inspect, then pruned like a processed body: admission time is
# when it was written, so bodies older than the retention are dropped. The row and its issue stay.
SENSITIVE_ISSUES = ("SENSITIVE_INPUT",)


def prune_quarantined(conn: sqlite3.Connection, before_ms: int) -> int:
    """Drop the text of final quarantined observations admitted before ``before_ms``; how many."""
    return conn.execute(
        "UPDATE observations SET text = NULL WHERE state = 'quarantined' AND job_id IS NULL AND text IS NOT NULL"
        " AND enqueued_at < ?", (before_ms,)).rowcount


def count_sensitive_quarantined(conn: sqlite3.Connection) -> int:
    """Quarantined observations whose kept text failed the sensitive-content scan."""
    marks = ", ".join("?" for _ in SENSITIVE_ISSUES)
    return conn.execute(f"SELECT COUNT(*) FROM observations WHERE state = 'quarantined' AND text IS NOT NULL"
                        f" AND issue IN ({marks})", SENSITIVE_ISSUES).fetchone()[0]


def purge_sensitive_quarantined(conn: sqlite3.Connection) -> int:
    """Drop, now, the text of every quarantined observation that failed the sensitive-content scan."""
    marks = ", ".join("?" for _ in SENSITIVE_ISSUES)
    return conn.execute(f"UPDATE observations SET text = NULL WHERE state = 'quarantined' AND text IS NOT NULL"
                        f" AND issue IN ({marks})", SENSITIVE_ISSUES).rowcount
