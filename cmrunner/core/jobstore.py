"""The job queue's repository: every read and write of the ``jobs`` and ``settings`` tables.

Contract:
- SQL only. The drain's policy (claiming rules, fencing, the recovery budget, backoff, outcomes)
  is ``cmrunner.writer_proc.jobs``; views, manage, MCP and capture read the queue here without
  importing the Writer's room.
- Every function runs inside the caller's connection and transaction and never begins, commits
  or rolls back one, so a caller's ``BEGIN IMMEDIATE`` block wraps exactly the statements it
  wrapped before.
- A job row is fenced by ``(id, token, generation)``: the lease-checked statements here match all
  three plus ``state = 'running'`` and an unexpired ``expires``.
- A job's cause (m010): ``failure`` is the code its last failed attempt ended with, ``rejection``
  the last tool rejection the model received in that attempt (JSON of codes, rule names, a JSON
  path, a document, a section heading that passed the scanner and a finding's fingerprint: never
  text), ``model_failures`` how many attempts failed on the model's own decisions. ``issue`` is
  the one cause the user sees (``cmrunner.writer_proc.jobs.fail`` decides it).
- ``settings`` holds one flag today, ``FLUSH_KEY``: set by whoever asks for a flush, cleared by
  the claim that finds the queue empty.
Stdlib only (capture path).
"""

from __future__ import annotations

import json
import sqlite3

FLUSH_KEY = "flush_requested"

# The columns of a claimed job, in the order ``cmrunner.writer_proc.jobs.Job`` unpacks them.
JOB_COLUMNS = "id, token, generation, scope, provenance, task_kind, attempts, retries, expires"

_UNFINISHED = "state IN ('running', 'retry', 'dead', 'paused')"


# -- the flush flag ---------------------------------------------------------------------------

def request_flush(conn: sqlite3.Connection) -> None:
    """Ask the Writer to process non-session work now instead of waiting for its thresholds."""
    conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, '1')", (FLUSH_KEY,))


def flush_requested(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM settings WHERE key = ?", (FLUSH_KEY,)).fetchone() is not None


def clear_flush(conn: sqlite3.Connection) -> None:
    conn.execute("DELETE FROM settings WHERE key = ?", (FLUSH_KEY,))


def install_id(conn: sqlite3.Connection) -> str:
    """The random, non-secret id the store was given once (m006): half of every agent instance id."""
    row = conn.execute("SELECT value FROM settings WHERE key = 'install_id'").fetchone()
    return row[0] if row else "unknown"


# -- the drain's writes -----------------------------------------------------------------------

def create(conn: sqlite3.Connection, job_id: str, token: str, scope: str, provenance: str, task_kind: str,
           expires: int, now: int) -> None:
    """A new ``running`` job at generation 1, first attempt."""
    conn.execute(
        "INSERT INTO jobs(id, token, generation, state, scope, provenance, task_kind, expires, attempts, retries,"
        " available, created_at, updated_at) VALUES (?, ?, 1, 'running', ?, ?, ?, ?, 1, 0, 0, ?, ?)",
        (job_id, token, scope, provenance, task_kind, expires, now, now),
    )


def fence(conn: sqlite3.Connection, job_id: str, token: str, expires: int, retries: int, now: int) -> None:
    """Re-claim a job: a fresh token, the next generation, another attempt."""
    conn.execute(
        "UPDATE jobs SET token = ?, generation = generation + 1, state = 'running', expires = ?, attempts = attempts + 1,"
        " retries = ?, updated_at = ? WHERE id = ?",
        (token, expires, retries, now, job_id),
    )


def load(conn: sqlite3.Connection, job_id: str) -> tuple:
    """The job's ``JOB_COLUMNS`` (the job exists: its caller just created or fenced it)."""
    return conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()


def set_outcome(conn: sqlite3.Connection, job_id: str, state: str, issue: str, now: int) -> None:
    conn.execute("UPDATE jobs SET state = ?, issue = ?, updated_at = ? WHERE id = ?", (state, issue, now, job_id))


def active(conn: sqlite3.Connection) -> list[tuple]:
    """(id, state, expires, available, retries) of running and retry jobs, oldest first."""
    return conn.execute(
        "SELECT id, state, expires, available, retries FROM jobs WHERE state IN ('running', 'retry') ORDER BY created_at, id"
    ).fetchall()


def holds_lease(conn: sqlite3.Connection, job_id: str, token: str, generation: int, now: int) -> bool:
    return conn.execute(
        "SELECT 1 FROM jobs WHERE id = ? AND token = ? AND generation = ? AND state = 'running' AND expires > ?",
        (job_id, token, generation, now),
    ).fetchone() is not None


def renew(conn: sqlite3.Connection, job_id: str, token: str, generation: int, expires: int, now: int) -> int:
    """Extend a held, unexpired lease to ``expires``; how many rows changed (0 or 1)."""
    return conn.execute(
        "UPDATE jobs SET expires = ?, updated_at = ? WHERE id = ? AND token = ? AND generation = ?"
        " AND state = 'running' AND expires > ?",
        (expires, now, job_id, token, generation, now),
    ).rowcount


def record_activity(conn: sqlite3.Connection, job_id: str, token: str, generation: int, model_turns: int,
                    tool_calls: int, input_tokens: int, output_tokens: int) -> None:
    conn.execute(
        "UPDATE jobs SET model_turns = model_turns + ?, tool_calls = tool_calls + ?, input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ? WHERE id = ? AND token = ? AND generation = ?",
        (model_turns, tool_calls, input_tokens, output_tokens, job_id, token, generation),
    )


def decode_rejection(text: str | None) -> dict | None:
    """A stored ``rejection`` column as a dict (``None`` when absent or unreadable)."""
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def record_failure(conn: sqlite3.Connection, job_id: str, diagnostic: str | None, failure: str, rejection: str | None,
                   model_failure: bool) -> int:
    """A failed attempt's diagnostic, code and last rejection (``None``: the attempt had none);
    returns how many attempts of the job have now failed on the model's own decisions."""
    conn.execute("UPDATE jobs SET diagnostic = ?, failure = ?, rejection = ?, model_failures = model_failures + ?"
                 " WHERE id = ?", (diagnostic, failure, rejection, int(model_failure), job_id))
    return int(conn.execute("SELECT model_failures FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])


def schedule_retry(conn: sqlite3.Connection, job_id: str, issue: str, available: int, now: int) -> None:
    """One recovery spent: the job waits in ``retry`` until ``available``."""
    conn.execute(
        "UPDATE jobs SET state = 'retry', issue = ?, retries = retries + 1, available = ?, expires = 0,"
        " updated_at = ? WHERE id = ?",
        (issue, available, now, job_id),
    )


def defer(conn: sqlite3.Connection, job_id: str, issue: str, now: int) -> None:
    """Give a job back to wait without spending a recovery: claimable again as soon as the
    condition named by ``issue`` lifts (the claim checks it)."""
    conn.execute("UPDATE jobs SET state = 'retry', issue = ?, available = ?, expires = 0, updated_at = ? WHERE id = ?",
                 (issue, now, now, job_id))


def finish(conn: sqlite3.Connection, job_id: str, edit_result: str | None, now: int) -> None:
    conn.execute("UPDATE jobs SET state = 'done', issue = NULL, edit_result = ?, expires = 0, updated_at = ? WHERE id = ?",
                 (edit_result, now, job_id))


def revive(conn: sqlite3.Connection, job_id: str, now: int) -> None:
    """An explicit retry: claimable at once, counters and history kept."""
    conn.execute("UPDATE jobs SET state = 'retry', available = 0, expires = 0, updated_at = ? WHERE id = ?", (now, job_id))


# -- reads ------------------------------------------------------------------------------------

def state_of(conn: sqlite3.Connection, job_id: str) -> str | None:
    row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


def lease_of(conn: sqlite3.Connection, job_id: str) -> tuple[str, int] | None:
    """(state, lease expiry in ms) of a job, or ``None``."""
    row = conn.execute("SELECT state, expires FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row is None else (row[0], int(row[1]))


def cancel(conn: sqlite3.Connection, job_id: str, now: int) -> None:
    """The job is cancelled: it never runs again (``cm cancel``)."""
    conn.execute("UPDATE jobs SET state = 'cancelled', issue = 'CANCELLED', expires = 0, updated_at = ? WHERE id = ?",
                 (now, job_id))


def ids_with_prefix(conn: sqlite3.Connection, prefix: str, limit: int) -> list[str]:
    """Job ids starting with ``prefix``, oldest first, at most ``limit``."""
    return [r[0] for r in conn.execute(
        "SELECT id FROM jobs WHERE substr(id, 1, ?) = ? ORDER BY created_at, id LIMIT ?",
        (len(prefix), prefix, limit))]


def next_due(conn: sqlite3.Connection) -> int | None:
    """The earliest retry time or lease expiry among running and retry jobs (ms), or ``None``."""
    row = conn.execute(
        "SELECT MIN(CASE state WHEN 'retry' THEN available ELSE expires END) FROM jobs WHERE state IN ('running', 'retry')"
    ).fetchone()
    return None if row[0] is None else int(row[0])


def quarantined_ids(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM jobs WHERE state = 'quarantined'")]


def count_unfinished(conn: sqlite3.Connection, quarantined_listed: list[str]) -> int:
    """Running, retry, dead and paused jobs, plus the quarantined ones in ``quarantined_listed``."""
    return int(conn.execute(
        f"SELECT COUNT(*) FROM jobs WHERE ({_UNFINISHED} OR (state = 'quarantined'"
        " AND id IN (SELECT value FROM json_each(?))))", (json.dumps(quarantined_listed),)).fetchone()[0])


def unfinished(conn: sqlite3.Connection, quarantined_listed: list[str], limit: int) -> list[tuple]:
    """(id, state, issue, task_kind, attempts, retries, available, expires, failure, rejection) of
    the jobs ``count_unfinished`` counts, oldest first, at most ``limit``."""
    return conn.execute(
        f"SELECT id, state, issue, task_kind, attempts, retries, available, expires, failure, rejection FROM jobs"
        f" WHERE ({_UNFINISHED}"
        " OR (state = 'quarantined' AND id IN (SELECT value FROM json_each(?)))) ORDER BY created_at, id LIMIT ?",
        (json.dumps(quarantined_listed), limit)).fetchall()


def dead_or_paused(conn: sqlite3.Connection) -> list[tuple[str, str | None, str | None, str | None, str | None]]:
    """(id, issue, failure, rejection, diagnostic) of dead and paused jobs, oldest first."""
    return conn.execute(
        "SELECT id, issue, failure, rejection, diagnostic FROM jobs WHERE state IN ('dead', 'paused')"
        " ORDER BY created_at, id").fetchall()


def listed(conn: sqlite3.Connection, states: tuple[str, ...], limit: int) -> list[tuple]:
    """(id, state, scope, task_kind, attempts, issue, available, expires, failure, rejection) of
    jobs in ``states``, oldest first, at most ``limit``."""
    marks = ",".join("?" * len(states))
    return conn.execute(
        f"SELECT id, state, scope, task_kind, attempts, issue, available, expires, failure, rejection FROM jobs"
        f" WHERE state IN ({marks}) ORDER BY created_at LIMIT ?", (*states, limit)).fetchall()


def outcome(conn: sqlite3.Connection, job_id: str | None) -> tuple:
    """(state, attempts, available, issue, diagnostic) of a job; all ``None`` when there is none."""
    row = None if job_id is None else conn.execute(
        "SELECT state, attempts, available, issue, diagnostic FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return (None, None, None, None, None) if row is None else tuple(row)


def count_live_leases(conn: sqlite3.Connection, now: int) -> int:
    """Running jobs whose lease has not expired at ``now``."""
    return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND expires > ?", (now,)).fetchone()[0])


def count_by_state(conn: sqlite3.Connection) -> dict[str, int]:
    return {row[0]: int(row[1]) for row in conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")}
