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
- This module is the repository of ``observations`` and ``forgotten_sources``: every statement
  against them is one of its functions, run in the caller's transaction (none begins or commits
  one). Callers that combine observations with another table's rows pass ids, never SQL.
- ``quarantined_by_issue`` and ``release`` serve ``cm status`` and ``cm release``: a released
  observation goes back to ``pending`` unchanged (same text, scope and provenance), so the Writer's
  checks run on it again; the release policy itself is the caller's (``cmrunner.core.reasons``).
Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time

from cmrunner.core import scopes
from cmrunner.core.errors import CmError

PROVENANCE = {
    "interactive": "user_explicit",
    "rpc": "user_explicit",
    "mcp_user_submission": "user_explicit",
    "codex_user_delivery": "user_explicit",
    "claude_user_prompt": "user_explicit",
    "gemini_user_prompt": "user_explicit",
    "agent_import": "agent_observation",
    "document_import": "document_import",
}
TASK_KINDS = ("observation", "edit")
ADMISSION_STATES = ("buffered", "pending")

# A processed observation's words are kept this long, then pruned (the specification's 7-day rule).
PRUNE_AFTER_MS = 7 * 24 * 3600 * 1000


def provenance_of(source: str) -> str | None:
    """The disclosure class of a source name, or ``None`` when it may never be disclosed."""
    return PROVENANCE.get(source)


def content_digest(text: str) -> str:
    """Digest of the normalised text, the key of forget tombstones (exact text, not paraphrase)."""
    import unicodedata  # deferred: a reading SessionStart imports this module for its count (~15 ms cold)

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


def agent_instance(conn: sqlite3.Connection, agent: str) -> str:
    """The stable, non-secret id of one client integration of this install: ``<agent>:<install id>``."""
    from cmrunner.core import jobstore  # deferred: admission only; the hooks' freshness count skips it

    return f"{agent}:{jobstore.install_id(conn)}"


def admit(conn: sqlite3.Connection, *, namespace: str, entry_id: str, text: str, scope: str, source: str,
          observed_at: str, agent: str, task_kind: str = "observation", state: str = "pending",
          batch_id: str | None = None) -> Admitted:
    """Admit one observation inside the caller's transaction (see module contract); ``agent`` names
    the client integration that captured it (``codex``, ``pi``, ``mcp-<client id>``, ``cm-import``…)."""
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
        " task_kind, state, observed_at, enqueued_at, batch_id, issue, agent_instance)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (namespace, entry_id, text, digest, cdigest, scope, source, provenance, task_kind, state, observed_at,
         int(time.time() * 1000), batch_id, issue, agent_instance(conn, agent)),
    )
    assert cursor.lastrowid is not None
    return Admitted(cursor.lastrowid, state, duplicate=False)


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


# -- lookups by identity ------------------------------------------------------------------------

def exists(conn: sqlite3.Connection, namespace: str, entry_id: str) -> bool:
    return conn.execute("SELECT 1 FROM observations WHERE namespace = ? AND entry_id = ?",
                        (namespace, entry_id)).fetchone() is not None


def scope_of_entry(conn: sqlite3.Connection, namespace: str, entry_id: str) -> str | None:
    """The frozen scope of the observation with this identity, or ``None``."""
    row = conn.execute("SELECT scope FROM observations WHERE namespace = ? AND entry_id = ?",
                       (namespace, entry_id)).fetchone()
    return None if row is None else row[0]


def item(conn: sqlite3.Connection, namespace: str, entry_id: str) -> tuple | None:
    """(id, state, issue, scope, job id) of the observation with this identity, or ``None``."""
    return conn.execute("SELECT id, state, issue, scope, job_id FROM observations WHERE namespace = ? AND entry_id = ?",
                        (namespace, entry_id)).fetchone()


def recent_entries(conn: sqlite3.Connection, namespace: str, limit: int) -> list[tuple[str]]:
    """Entry ids of the namespace, newest first."""
    return conn.execute("SELECT entry_id FROM observations WHERE namespace = ? ORDER BY id DESC LIMIT ?",
                        (namespace, limit)).fetchall()


# -- counts -----------------------------------------------------------------------------------

def count_by_state(conn: sqlite3.Connection) -> dict[str, int]:
    return {row[0]: int(row[1]) for row in conn.execute(
        "SELECT state, COUNT(*) FROM observations GROUP BY state ORDER BY state")}


def queued_counts(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """(state, count) of buffered, pending, claimed and dead observations (absent states omitted)."""
    return conn.execute(
        "SELECT state, COUNT(*) FROM observations WHERE state IN ('buffered', 'pending', 'claimed', 'dead')"
        " GROUP BY state"
    ).fetchall()


def unfinished_in_scope(conn: sqlite3.Connection, scope: str) -> int:
    """Observations of ``scope`` (imports included) still buffered, sealed or held by a job."""
    return int(conn.execute("SELECT COUNT(*) FROM observations WHERE scope = ?"
                            " AND state IN ('buffered', 'pending', 'claimed')", (scope,)).fetchone()[0])


# The freshness line's share of this table (``cmrunner.capture.waiting`` adds the inboxes' shares in
# one statement): captured turns of ``:scope`` not yet processed (imports are not turns), buffered in
# the session cache, sealed, or held by a job; answered from ``observations_waiting_scope`` (m012).
WAITING_TURNS = ("(SELECT COUNT(*) FROM observations WHERE scope = :scope"
                 " AND state IN ('buffered', 'pending', 'claimed') AND source != 'document_import')")


# -- the queue: pending work and a job's batch ---------------------------------------------------

def has_pending(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM observations WHERE state = 'pending' LIMIT 1").fetchone() is not None


def pending_head(conn: sqlite3.Connection) -> tuple | None:
    """(id, scope, provenance, task kind, batch id) of the oldest pending observation."""
    return conn.execute(
        "SELECT id, scope, provenance, task_kind, batch_id FROM observations WHERE state = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()


def pending_head_kind(conn: sqlite3.Connection) -> tuple | None:
    """(task kind, batch id) of the oldest pending observation."""
    return conn.execute(
        "SELECT task_kind, batch_id FROM observations WHERE state = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()


def pending(conn: sqlite3.Connection) -> sqlite3.Cursor:
    """(id, scope, provenance, task kind, batch id, text bytes) of every pending observation in
    admission order, as a cursor: a caller that stops early reads no further."""
    return conn.execute(
        "SELECT id, scope, provenance, task_kind, batch_id, COALESCE(length(CAST(text AS BLOB)), 0)"
        " FROM observations WHERE state = 'pending' ORDER BY id"
    )


def pending_in_batch(conn: sqlite3.Connection, batch_id: str, scope: str, provenance: str | None) -> list[int]:
    """The pending members of a sealed batch that share ``scope`` and ``provenance``, by id."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM observations WHERE state = 'pending' AND batch_id = ? AND scope = ? AND provenance IS ?"
        " ORDER BY id", (batch_id, scope, provenance))]


def pending_unbatched(conn: sqlite3.Connection) -> tuple:
    """(count, text bytes, oldest and newest admission time) of pending work outside sessions."""
    return conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0), MIN(enqueued_at), MAX(enqueued_at)"
        " FROM observations WHERE state = 'pending' AND batch_id IS NULL"
    ).fetchone()


def claim_for(conn: sqlite3.Connection, job_id: str, ids: list[int]) -> None:
    conn.executemany("UPDATE observations SET state = 'claimed', job_id = ? WHERE id = ?", [(job_id, i) for i in ids])


def ids_of_job(conn: sqlite3.Connection, job_id: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM observations WHERE job_id = ? ORDER BY id", (job_id,))]


def count_of_job(conn: sqlite3.Connection, job_id: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM observations WHERE job_id = ?", (job_id,)).fetchone()[0])


def jobs_holding(conn: sqlite3.Connection, job_ids: list[str]) -> list[str]:
    """Those of ``job_ids`` that at least one observation still belongs to."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT job_id FROM observations WHERE job_id IN (SELECT value FROM json_each(?))",
        (json.dumps(job_ids),))]


def sources_of_job(conn: sqlite3.Connection, job_id: str) -> list[tuple]:
    """(id, text, scope, provenance, source, observed at) of the job's observations, by id."""
    return conn.execute(
        "SELECT id, text, scope, provenance, source, observed_at FROM observations WHERE job_id = ? ORDER BY id",
        (job_id,),
    ).fetchall()


def batch_of_job(conn: sqlite3.Connection, job_id: str) -> list[tuple]:
    """(id, scope, observed at) of the job's observations."""
    return conn.execute("SELECT id, scope, observed_at FROM observations WHERE job_id = ?", (job_id,)).fetchall()


def provenances(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str | None]:
    """The provenance class of each of ``ids`` that exists."""
    return dict(conn.execute("SELECT id, provenance FROM observations WHERE id IN (SELECT value FROM json_each(?))",
                             (json.dumps(ids),)).fetchall())


# -- a session's observations, by the ids its messages hold ----------------------------------------

def text_bytes(conn: sqlite3.Connection, ids: list[int | None]) -> int:
    """UTF-8 bytes of the kept text of ``ids``, each counted as often as it is listed."""
    return int(conn.execute(
        "SELECT COALESCE(SUM(LENGTH(CAST(o.text AS BLOB))), 0) FROM json_each(?) j JOIN observations o ON o.id = j.value",
        (json.dumps(ids),)).fetchone()[0])


def texts(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str | None]:
    """The kept text (``None`` once pruned) of each of ``ids`` that exists."""
    return dict(conn.execute("SELECT id, text FROM observations WHERE id IN (SELECT value FROM json_each(?))",
                             (json.dumps(ids),)).fetchall())


class Evidence:
    """One observation as ``cm why`` shows it (a plain class: ``typing`` stays off the hook path)."""

    __slots__ = ("id", "text", "provenance", "source", "namespace", "observed_at", "state", "processed_at",
                 "agent_instance", "forgotten")

    def __init__(self, id_: int, text: str | None, provenance: str | None, source: str, namespace: str,
                 observed_at: str, state: str, processed_at: int | None, agent_instance: str | None,
                 forgotten: bool) -> None:
        self.id = id_
        self.text = text                      # None once pruned, forgotten or purged
        self.provenance = provenance
        self.source = source
        self.namespace = namespace
        self.observed_at = observed_at
        self.state = state
        self.processed_at = processed_at
        self.agent_instance = agent_instance
        self.forgotten = forgotten            # its words are tombstoned in its scope (a forget or a purge)


def captured_by(conn: sqlite3.Connection, observation_id: int) -> tuple[str | None, str | None]:
    """(agent instance, session or channel namespace) of one observation; the agent instance is
    None for observations captured before agent instances existed."""
    row = conn.execute("SELECT agent_instance, namespace FROM observations WHERE id = ?", (observation_id,)).fetchone()
    return (row[0], row[1]) if row else (None, None)


def evidence(conn: sqlite3.Connection, ids: list[int]) -> list[Evidence]:
    """What ``cm why`` shows of each of ``ids`` that exists, in id order."""
    return [Evidence(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], bool(row[9]))
            for row in conn.execute(
        "SELECT o.id, o.text, o.provenance, o.source, o.namespace, o.observed_at, o.state, o.processed_at, "
        "o.agent_instance, "
        "EXISTS (SELECT 1 FROM forgotten_sources f WHERE f.scope = o.scope AND f.digest = o.content_digest) "
        "FROM observations o WHERE o.id IN (SELECT value FROM json_each(?)) ORDER BY o.id", (json.dumps(ids),))]


def first_texts(conn: sqlite3.Connection, namespaces: list[str]) -> dict[str, str]:
    """The first still-kept text of each of ``namespaces`` (an import's part names its file)."""
    return dict(conn.execute(
        "SELECT namespace, text FROM observations WHERE id IN (SELECT MIN(id) FROM observations"
        " WHERE text IS NOT NULL AND namespace IN (SELECT value FROM json_each(?)) GROUP BY namespace)",
        (json.dumps(namespaces),)).fetchall())


def classes(conn: sqlite3.Connection, ids: list[int]) -> tuple[tuple[str, str | None], ...]:
    """The distinct ``(scope, provenance class)`` pairs that ``ids`` span, sorted."""
    return tuple(conn.execute("SELECT DISTINCT scope, provenance FROM observations"
                              " WHERE id IN (SELECT value FROM json_each(?)) ORDER BY 1, 2", (json.dumps(ids),)))


def any_outside(conn: sqlite3.Connection, ids: list[int], scope: str) -> bool:
    """Whether any of ``ids`` belongs to a scope other than ``scope``."""
    return conn.execute("SELECT 1 FROM observations WHERE id IN (SELECT value FROM json_each(?)) AND scope != ?"
                        " LIMIT 1", (json.dumps(ids), scope)).fetchone() is not None


def buffered_ids(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM observations WHERE state = 'buffered'")]


def buffered_among(conn: sqlite3.Connection, ids: list[int]) -> set[int]:
    """Those of ``ids`` still ``buffered``."""
    return {r[0] for r in conn.execute(
        "SELECT id FROM observations WHERE state = 'buffered' AND id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),))}


def quarantine_buffered(conn: sqlite3.Connection, ids: list[int], issue: str) -> None:
    """Quarantine with ``issue`` those of ``ids`` still ``buffered``."""
    conn.execute("UPDATE observations SET state = 'quarantined', issue = ? WHERE state = 'buffered'"
                 " AND id IN (SELECT value FROM json_each(?))", (issue, json.dumps(ids)))


def seal_buffered(conn: sqlite3.Connection, ids: list[int], batch_id: str) -> None:
    """Queue those of ``ids`` still ``buffered`` as ``pending`` members of the sealed batch."""
    conn.execute("UPDATE observations SET state = 'pending', batch_id = ? WHERE state = 'buffered'"
                 " AND id IN (SELECT value FROM json_each(?))", (batch_id, json.dumps(ids)))


# -- a job's outcome, shared by its observations --------------------------------------------------

def set_job_outcome(conn: sqlite3.Connection, job_id: str, state: str, issue: str) -> None:
    conn.execute("UPDATE observations SET state = ?, issue = ? WHERE job_id = ?", (state, issue, job_id))


def mark_processed(conn: sqlite3.Connection, job_id: str, now: int) -> None:
    conn.execute("UPDATE observations SET state = 'processed', processed_at = ?, issue = NULL WHERE job_id = ?",
                 (now, job_id))


def reclaim(conn: sqlite3.Connection, job_id: str) -> None:
    """A revived job takes its observations back."""
    conn.execute("UPDATE observations SET state = 'claimed' WHERE job_id = ?", (job_id,))


def isolate(conn: sqlite3.Connection, observation_id: int, issue: str) -> None:
    """Take one observation out of its job, quarantined with ``issue`` (its text is kept)."""
    conn.execute("UPDATE observations SET state = 'quarantined', issue = ?, job_id = NULL WHERE id = ?",
                 (issue, observation_id))


def defer(conn: sqlite3.Connection, observation_id: int) -> None:
    """Send one observation back to ``pending`` for a later job."""
    conn.execute("UPDATE observations SET state = 'pending', job_id = NULL WHERE id = ?", (observation_id,))


# -- cancelling (``cm cancel``; policy in ``writer_proc.cancel``) -----------------------------------

def state_of(conn: sqlite3.Connection, observation_id: int) -> tuple[str, str | None] | None:
    """(state, job id) of one observation, or ``None``."""
    row = conn.execute("SELECT state, job_id FROM observations WHERE id = ?", (observation_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def in_namespace_prefix(conn: sqlite3.Connection, prefix: str) -> list[tuple[int, str, str | None]]:
    """(id, state, job id) of every observation whose namespace starts with ``prefix``, in order."""
    return conn.execute("SELECT id, state, job_id FROM observations WHERE substr(namespace, 1, ?) = ? ORDER BY id",
                        (len(prefix), prefix)).fetchall()


def namespaces_with_prefix(conn: sqlite3.Connection, prefix: str) -> list[tuple[str, int]]:
    """(namespace, observations) of every namespace that starts with ``prefix``, oldest first
    (``cm import``'s report of an unchanged file: the parts that carried this exact text)."""
    return conn.execute("SELECT namespace, COUNT(*) FROM observations WHERE substr(namespace, 1, ?) = ?"
                        " GROUP BY namespace ORDER BY MIN(id)", (len(prefix), prefix)).fetchall()


def with_lost_parts(conn: sqlite3.Connection, namespaces: list[str]) -> set[str]:
    """Those of ``namespaces`` with a part that was cancelled or quarantined: what it carried never
    reached memory (``cm import`` sends such sections again once their file changes)."""
    return {r[0] for r in conn.execute(
        "SELECT DISTINCT namespace FROM observations WHERE namespace IN (SELECT value FROM json_each(?))"
        " AND state IN ('cancelled', 'quarantined')", (json.dumps(namespaces),))}


def waiting_imports(conn: sqlite3.Connection) -> int:
    """Import parts queued and not yet processed (``cm status``: what a reached spend cap holds back)."""
    return int(conn.execute("SELECT COUNT(*) FROM observations WHERE source = 'document_import'"
                            " AND state IN ('buffered', 'pending', 'claimed')").fetchone()[0])


def parts_in(conn: sqlite3.Connection, namespaces: list[str]) -> list[tuple[int, str, str | None, str | None]]:
    """(id, state, job id, issue) of every observation in ``namespaces``, in order (``cm import``'s
    plan: only a ``processed`` part committed what it carried)."""
    return conn.execute(
        "SELECT id, state, job_id, issue FROM observations WHERE namespace IN (SELECT value FROM json_each(?))"
        " ORDER BY id", (json.dumps(namespaces),)).fetchall()


def of_job(conn: sqlite3.Connection, job_id: str) -> list[tuple[int, str]]:
    """(id, state) of a job's observations."""
    return conn.execute("SELECT id, state FROM observations WHERE job_id = ? ORDER BY id", (job_id,)).fetchall()


def cancel(conn: sqlite3.Connection, ids: list[int]) -> int:
    """Mark ``ids`` cancelled and delete their text; returns the bytes of text deleted."""
    deleted = 0
    for oid in ids:
        row = conn.execute("SELECT length(CAST(text AS BLOB)) FROM observations WHERE id = ?", (oid,)).fetchone()
        deleted += int(row[0] or 0) if row else 0
        conn.execute("UPDATE observations SET state = 'cancelled', issue = 'CANCELLED', text = NULL WHERE id = ?",
                     (oid,))
    return deleted


def record_cancellation(conn: sqlite3.Connection, at: int, target: str, job_ids: list[str], ids: list[int],
                        text_bytes: int) -> None:
    """The tombstone of one ``cm cancel``: ids and counts, no text."""
    conn.execute("INSERT INTO cancellations(at, target, job_ids, observation_ids, observations, text_bytes)"
                 " VALUES (?, ?, ?, ?, ?, ?)", (at, target, ",".join(job_ids), ",".join(map(str, ids)), len(ids),
                                               text_bytes))


def cancellations(conn: sqlite3.Connection) -> tuple[int, int]:
    """(how many ``cm cancel`` tombstones, how many observations they cancelled)."""
    row = conn.execute("SELECT COUNT(*), SUM(observations) FROM cancellations").fetchone()
    return int(row[0] or 0), int(row[1] or 0)


# -- forgetting and pruning ---------------------------------------------------------------------

def forget(conn: sqlite3.Connection, observation_id: int) -> None:
    """Drop the observation's text and leave a tombstone of its normalised text in its scope, so
    the exact words are not admitted again there."""
    row = conn.execute("SELECT scope, content_digest FROM observations WHERE id = ?", (observation_id,)).fetchone()
    if row is not None and row[1]:
        conn.execute("INSERT OR IGNORE INTO forgotten_sources(scope, digest) VALUES (?, ?)", (row[0], row[1]))
    conn.execute("UPDATE observations SET text = NULL WHERE id = ?", (observation_id,))


def purge_processed(conn: sqlite3.Connection, ids: list[int]) -> None:
    """Drop the text of those of ``ids`` that are processed."""
    conn.executemany("UPDATE observations SET text = NULL WHERE id = ? AND state = 'processed'", [(i,) for i in ids])


def prune_processed(conn: sqlite3.Connection, before_ms: int) -> None:
    """Drop the text of observations processed before ``before_ms``."""
    conn.execute(
        "UPDATE observations SET text = NULL WHERE state = 'processed' AND text IS NOT NULL AND processed_at < ?",
        (before_ms,),
    )


# -- a true purge (``writer_proc.purge``) -----------------------------------------------------------

def tombstone_text(conn: sqlite3.Connection, scope: str, text: str) -> None:
    """Refuse these exact words in ``scope`` from now on (the digest only, as ``forget`` leaves)."""
    conn.execute("INSERT OR IGNORE INTO forgotten_sources(scope, digest) VALUES (?, ?)", (scope, content_digest(text)))


def clear_containing(conn: sqlite3.Connection, needles: list[str]) -> int:
    """Drop the text of every observation that holds one of ``needles``; returns how many."""
    return sum(conn.execute("UPDATE observations SET text = NULL WHERE text IS NOT NULL AND instr(text, ?) > 0",
                            (needle,)).rowcount for needle in needles if needle)
