"""Jobs: claiming batches, fenced leases, failure outcomes and explicit retry.

Contract (every function runs inside the caller's ``BEGIN IMMEDIATE`` transaction):
- A batch holds one scope, one provenance class and one task kind; an ``edit`` task is always
  alone; a sealed session batch (``batch_id``) is claimed whole and never mixed with other work.
- Jobs are serialised: while any job is ``running`` with a live lease or waiting in ``retry``, no
  new job is created, so evidence is committed in admission order and global writes never race.
- A claim issues a fresh random ``token``, ``generation + 1`` and ``expires = now + leaseMs``.
  ``assert_lease`` (and every lease-checked write) requires id, token, generation, state
  ``running`` and an unexpired lease; anything else is ``STALE_LEASE``, so a late answer after
  expiry, cancellation or takeover can never commit.
- Recovery budget: the first attempt plus at most ``MAX_RECOVERIES`` automatic recoveries per job
  (``jobs.retries``, persisted), shared by retryable failures and expired-lease re-claims; then
  the job is ``dead`` with ``RECOVERY_BUDGET_EXHAUSTED``. Backoff is ``min(600 s, 2^n s)``; a
  provider's ``Retry-After`` (``retry_after_ms``, already capped at 600 s) lengthens it: the job's
  next attempt time, ``jobs.available``, is ``now + max(backoff, retry_after)``.
- Permanent provider failures (``AUTHENTICATION``, ``PROXY_AUTHENTICATION``, ``CONFIGURATION``) and
  non-retryable ones make the job ``dead`` at once; ``FORGOTTEN_SOURCE`` makes it ``quarantined``.
  The job's observations share the outcome. ``retry`` revives a dead or quarantined job keeping
  its id, counters and history; it does not refill the recovery budget.
- Job ids given by a user are resolved only by ``resolve_id``: any unique prefix of at least
  ``MIN_ID_PREFIX`` characters; shorter is ``JOB_ID_TOO_SHORT``, several matches
  ``AMBIGUOUS_JOB_ID`` (listing them), none ``UNKNOWN_JOB``.
- Non-session work (relay, import) waits for the legacy thresholds: ``turnThreshold`` expressions,
  ``byteThreshold`` bytes, ``idleMs`` since the newest, ``maxWaitMs`` since the oldest, or a flush.
"""

from __future__ import annotations

import json
import os
import sqlite3

from cmrunner.capture.observations import FLUSH_KEY
from cmrunner.core.errors import CmError

MAX_RECOVERIES = 5
MAX_BACKOFF_MS = 600_000
PERMANENT = frozenset({"AUTHENTICATION", "PROXY_AUTHENTICATION", "CONFIGURATION"})
NOT_RETRYABLE = frozenset({"AGENT_TURN_LIMIT", "CONTEXT_LIMIT", "MODEL_REFUSAL", "RECOVERY_CONFLICT",
                           "SENSITIVE_CONTENT_REJECTED"})
QUARANTINE = frozenset({"FORGOTTEN_SOURCE"})
MIN_ID_PREFIX = 8
MAX_CANDIDATES = 5


class Job:
    """A claimed job as the Writer holds it: identity, fence and batch."""

    __slots__ = ("id", "token", "generation", "scope", "provenance", "task_kind", "attempts", "retries",
                 "expires", "observation_ids")

    def __init__(self, row: sqlite3.Row | tuple, observation_ids: list[int]) -> None:
        (self.id, self.token, self.generation, self.scope, self.provenance, self.task_kind, self.attempts,
         self.retries, self.expires) = row
        self.observation_ids = observation_ids


_JOB_COLUMNS = "id, token, generation, scope, provenance, task_kind, attempts, retries, expires"


def backoff_ms(retries_before: int) -> int:
    return min(MAX_BACKOFF_MS, 1000 * 2 ** min(retries_before, 10))


def _fence(conn: sqlite3.Connection, job_id: str, now: int, lease_ms: int, retries: int) -> Job:
    token = os.urandom(16).hex()
    conn.execute(
        "UPDATE jobs SET token = ?, generation = generation + 1, state = 'running', expires = ?, attempts = attempts + 1,"
        " retries = ?, updated_at = ? WHERE id = ?",
        (token, now + lease_ms, retries, now, job_id),
    )
    return _load(conn, job_id)


def _load(conn: sqlite3.Connection, job_id: str) -> Job:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    ids = [r[0] for r in conn.execute("SELECT id FROM observations WHERE job_id = ? ORDER BY id", (job_id,))]
    return Job(row, ids)


def _set_outcome(conn: sqlite3.Connection, job_id: str, state: str, issue: str, now: int) -> None:
    conn.execute("UPDATE jobs SET state = ?, issue = ?, updated_at = ? WHERE id = ?", (state, issue, now, job_id))
    conn.execute("UPDATE observations SET state = ?, issue = ? WHERE job_id = ?", (state, issue, job_id))


def flush_requested(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM settings WHERE key = ?", (FLUSH_KEY,)).fetchone() is not None


def _ready(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool) -> bool:
    """Legacy readiness of non-session pending work (relay, import)."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0), MIN(enqueued_at), MAX(enqueued_at)"
        " FROM observations WHERE state = 'pending' AND batch_id IS NULL"
    ).fetchone()
    count, size, oldest, newest = row
    if not count:
        return False
    return (force or count >= scheduler["turnThreshold"] or size >= scheduler["byteThreshold"]
            or now - oldest >= scheduler["maxWaitMs"] or now - newest >= scheduler["idleMs"])


def _active(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT id, state, expires, available, retries FROM jobs WHERE state IN ('running', 'retry') ORDER BY created_at, id"
    ).fetchall()


def claim(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool = False) -> Job | None:
    """Resume a due job or create one from the queue head (see module contract)."""
    lease_ms = scheduler["leaseMs"]
    active = _active(conn)
    for job_id, state, expires, available, retries in active:
        if state == "running" and expires > now:
            return None  # a live lease: its holder is working; jobs are serialised
        if state == "retry" and available > now:
            return None
        if state == "running":  # the lease expired: the holder crashed; that costs a recovery
            if retries >= MAX_RECOVERIES:
                _set_outcome(conn, job_id, "dead", "RECOVERY_BUDGET_EXHAUSTED", now)
                continue
            return _fence(conn, job_id, now, lease_ms, retries + 1)
        return _fence(conn, job_id, now, lease_ms, retries)
    if _active(conn):
        return None
    head = conn.execute(
        "SELECT id, scope, provenance, task_kind, batch_id FROM observations WHERE state = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()
    if head is None:
        conn.execute("DELETE FROM settings WHERE key = ?", (FLUSH_KEY,))
        return None
    head_id, scope, provenance, task_kind, batch_id = head
    if batch_id is not None:
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM observations WHERE state = 'pending' AND batch_id = ? ORDER BY id", (batch_id,))]
    elif task_kind == "edit":
        ids = [head_id]
    else:
        if not _ready(conn, scheduler, now, force or flush_requested(conn)):
            return None
        ids = []
        for oid, o_scope, o_prov, o_kind, o_batch in conn.execute(
            "SELECT id, scope, provenance, task_kind, batch_id FROM observations WHERE state = 'pending' ORDER BY id"
        ):
            if (o_scope, o_prov, o_kind, o_batch) != (scope, provenance, "observation", None):
                break
            ids.append(oid)
            if len(ids) >= scheduler["turnThreshold"]:
                break
    job_id = os.urandom(16).hex()
    conn.execute(
        "INSERT INTO jobs(id, token, generation, state, scope, provenance, task_kind, expires, attempts, retries,"
        " available, created_at, updated_at) VALUES (?, ?, 1, 'running', ?, ?, ?, ?, 1, 0, 0, ?, ?)",
        (job_id, os.urandom(16).hex(), scope, provenance or "", task_kind, now + lease_ms, now, now),
    )
    conn.executemany("UPDATE observations SET state = 'claimed', job_id = ? WHERE id = ?", [(job_id, i) for i in ids])
    if not conn.execute("SELECT 1 FROM observations WHERE state = 'pending' LIMIT 1").fetchone():
        conn.execute("DELETE FROM settings WHERE key = ?", (FLUSH_KEY,))
    return _load(conn, job_id)


def assert_lease(conn: sqlite3.Connection, job: Job, now: int) -> None:
    row = conn.execute(
        "SELECT 1 FROM jobs WHERE id = ? AND token = ? AND generation = ? AND state = 'running' AND expires > ?",
        (job.id, job.token, job.generation, now),
    ).fetchone()
    if row is None:
        raise CmError("STALE_LEASE", "this job's lease was lost (expired, cancelled or taken over); its result is discarded")


def renew(conn: sqlite3.Connection, job: Job, now: int, lease_ms: int) -> bool:
    cursor = conn.execute(
        "UPDATE jobs SET expires = ?, updated_at = ? WHERE id = ? AND token = ? AND generation = ?"
        " AND state = 'running' AND expires > ?",
        (now + lease_ms, now, job.id, job.token, job.generation, now),
    )
    return cursor.rowcount == 1


def record_activity(conn: sqlite3.Connection, job: Job, model_turns: int = 0, tool_calls: int = 0,
                    input_tokens: int = 0, output_tokens: int = 0) -> None:
    conn.execute(
        "UPDATE jobs SET model_turns = model_turns + ?, tool_calls = tool_calls + ?, input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ? WHERE id = ? AND token = ? AND generation = ?",
        (model_turns, tool_calls, input_tokens, output_tokens, job.id, job.token, job.generation),
    )


def fail(conn: sqlite3.Connection, job: Job, code: str, now: int, retryable: bool = True,
         diagnostic: dict | None = None, retry_after_ms: int | None = None) -> str:
    """Record a failed attempt of a job we hold; returns the job's new state."""
    assert_lease(conn, job, now)
    diag = json.dumps(diagnostic, sort_keys=True) if diagnostic else None
    conn.execute("UPDATE jobs SET diagnostic = ? WHERE id = ?", (diag, job.id))
    if code in QUARANTINE:
        state, issue = "quarantined", code
    elif code in PERMANENT or code in NOT_RETRYABLE or not retryable:
        state, issue = "dead", code
    elif job.retries >= MAX_RECOVERIES:
        state, issue = "dead", "RECOVERY_BUDGET_EXHAUSTED"
    else:
        conn.execute(
            "UPDATE jobs SET state = 'retry', issue = ?, retries = retries + 1, available = ?, expires = 0,"
            " updated_at = ? WHERE id = ?",
            (code, now + max(backoff_ms(job.retries), min(MAX_BACKOFF_MS, retry_after_ms or 0)), now, job.id),
        )
        return "retry"
    _set_outcome(conn, job.id, state, issue, now)
    return state


def quarantine(conn: sqlite3.Connection, job: Job, code: str, now: int) -> None:
    """Isolate a job before any network call (authorization, sensitive input, size)."""
    assert_lease(conn, job, now)
    _set_outcome(conn, job.id, "quarantined", code, now)


def finish(conn: sqlite3.Connection, job: Job, now: int, edit_result: str | None = None) -> None:
    """Mark the job done and its observations processed (called inside the commit transaction)."""
    conn.execute("UPDATE jobs SET state = 'done', issue = NULL, edit_result = ?, expires = 0, updated_at = ? WHERE id = ?",
                 (edit_result, now, job.id))
    conn.execute("UPDATE observations SET state = 'processed', processed_at = ?, issue = NULL WHERE job_id = ?",
                 (now, job.id))


def resolve_id(conn: sqlite3.Connection, given: str) -> str:
    """The one job whose id starts with ``given`` (at least ``MIN_ID_PREFIX`` hex characters).

    Every command that takes a job id resolves it here, so the 12 characters ``cm flush`` and
    ``cm status`` print work everywhere; a prefix that fits several jobs lists them.
    """
    text = given.strip().lower()
    if not text or any(c not in "0123456789abcdef" for c in text):
        raise CmError("UNKNOWN_JOB", "no job has that id: job ids are hexadecimal, as `cm status` lists them")
    if len(text) < MIN_ID_PREFIX:
        raise CmError("JOB_ID_TOO_SHORT", f"give at least {MIN_ID_PREFIX} characters of the job id "
                                          f"({len(text)} given); `cm status` lists them")
    found = [r[0] for r in conn.execute(
        "SELECT id FROM jobs WHERE substr(id, 1, ?) = ? ORDER BY created_at, id LIMIT ?",
        (len(text), text, MAX_CANDIDATES + 1))]
    if not found:
        raise CmError("UNKNOWN_JOB", f"no job id starts with {text}; see `cm status`")
    if len(found) > 1:
        more = " and more" if len(found) > MAX_CANDIDATES else ""
        raise CmError("AMBIGUOUS_JOB_ID", f"{text} fits several jobs: {', '.join(found[:MAX_CANDIDATES])}{more}; "
                                          "give more characters")
    return found[0]


def unfinished(conn: sqlite3.Connection, limit: int = 20) -> tuple[list[dict], int]:
    """Jobs that are running, waiting to retry or need the user (oldest first, at most ``limit``),
    and how many there are in all."""
    # A quarantined job whose observations were all set aside individually holds nothing any
    # more: it is history, not something to act on.
    where = ("(state IN ('running', 'retry', 'dead', 'paused') OR (state = 'quarantined'"
             " AND EXISTS (SELECT 1 FROM observations o WHERE o.job_id = jobs.id)))")
    total = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {where}").fetchone()[0]
    rows = conn.execute(
        f"SELECT id, state, issue, task_kind, attempts, retries, available, expires FROM jobs WHERE {where}"
        " ORDER BY created_at, id LIMIT ?", (limit,)).fetchall()
    listed = [{"id": r[0], "state": r[1], "issue": r[2], "kind": r[3], "attempts": int(r[4]), "retries": int(r[5]),
               "nextAttemptAt": int(r[6]) if r[1] == "retry" else None,
               "leaseExpiresAt": int(r[7]) if r[1] == "running" else None} for r in rows]
    return listed, int(total)


def dead_by_issue(conn: sqlite3.Connection) -> list[tuple[str | None, list[str], int]]:
    """Dead (and paused) jobs grouped by issue: (issue, job ids oldest first, observations held)."""
    groups: dict[str | None, tuple[list[str], list[int]]] = {}
    for job_id, issue, held in conn.execute(
        "SELECT j.id, j.issue, (SELECT COUNT(*) FROM observations o WHERE o.job_id = j.id) FROM jobs j"
        " WHERE j.state IN ('dead', 'paused') ORDER BY j.created_at, j.id"
    ):
        ids, count = groups.setdefault(issue, ([], [0]))
        ids.append(job_id)
        count[0] += int(held)
    return sorted(((issue, ids, count[0]) for issue, (ids, count) in groups.items()),
                  key=lambda g: (-len(g[1]), g[0] or ""))


def retry(conn: sqlite3.Connection, job_id: str, now: int) -> str:
    """Revive a dead or quarantined job for another attempt; history and counters are kept.
    ``job_id`` may be a unique prefix (``resolve_id``); returns the full id."""
    job_id = resolve_id(conn, job_id)
    row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row[0] not in ("dead", "quarantined", "paused"):
        raise CmError("JOB_NOT_RETRYABLE", f"job {job_id} is {row[0]}; only dead or quarantined jobs can be retried")
    conn.execute("UPDATE jobs SET state = 'retry', available = 0, expires = 0, updated_at = ? WHERE id = ?", (now, job_id))
    conn.execute("UPDATE observations SET state = 'claimed' WHERE job_id = ?", (job_id,))
    return job_id


def next_due(conn: sqlite3.Connection, now: int) -> int | None:
    """When the earliest waiting job becomes claimable (ms since epoch), or ``None``."""
    row = conn.execute(
        "SELECT MIN(CASE state WHEN 'retry' THEN available ELSE expires END) FROM jobs WHERE state IN ('running', 'retry')"
    ).fetchone()
    return None if row[0] is None else max(now, int(row[0]))


def has_pending(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM observations WHERE state = 'pending' LIMIT 1").fetchone() is not None


def runnable(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool = False) -> bool:
    """Whether ``claim`` would return a job now (without claiming anything)."""
    active = _active(conn)
    if active:  # jobs are serialised: only the oldest active job can run next
        _job_id, state, expires, available, _retries = active[0]
        return not ((state == "running" and expires > now) or (state == "retry" and available > now))
    head = conn.execute(
        "SELECT task_kind, batch_id FROM observations WHERE state = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()
    if head is None:
        return False
    if head[1] is not None or head[0] == "edit":
        return True
    return _ready(conn, scheduler, now, force or flush_requested(conn))
