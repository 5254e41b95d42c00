"""``cm cancel``: queued, waiting or failed work dropped before it is ever sent.

Contract (inside the caller's ``BEGIN IMMEDIATE`` transaction):
- ``cancel(conn, target, now)`` takes what the user named: an observation id (digits), an import id
  (``md-<sha256>``, every part of that import in every context) or a job id (any unique prefix,
  ``jobs.resolve_id``).
- Cancellable are observations that are ``pending``, ``claimed``, ``dead``, ``paused`` or
  ``quarantined``: their state becomes ``cancelled`` (issue ``CANCELLED``) and their text is deleted.
  A job none of whose observations is left to process is ``cancelled`` too, so it leaves the
  queue and never runs again; jobs are serialised, so a cancelled waiting job unblocks the queue.
- Never cancelled: processed work (already sent and committed: use forget), ``buffered`` turns of
  an open session (not yet queued: they are sealed into a batch first), and a job that is
  committing: ``running`` under a live lease. Naming such a job or one of its observations is
  ``JOB_COMMITTING``; an import with a part in it cancels the rest and reports what it skipped.
  Nothing to cancel is ``NOTHING_TO_CANCEL``.
- One tombstone per cancel (``observations.record_cancellation``): the target, the job and
  observation ids and the bytes deleted, never text.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from dataclasses import dataclass

from cmrunner.capture import observations
from cmrunner.core import jobstore
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import jobs

CANCELLABLE = frozenset({"pending", "claimed", "dead", "paused", "quarantined"})
_FINISHED = frozenset({"processed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Cancelled:
    target: str
    job_ids: list[str]
    observation_ids: list[int]
    text_bytes: int
    skipped: int  # parts of an import left alone because their job is committing


def _committing(conn: sqlite3.Connection, job_id: str | None, now: int) -> int | None:
    """The lease expiry of ``job_id`` if it is running under a live lease, else ``None``."""
    if job_id is None:
        return None
    lease = jobstore.lease_of(conn, job_id)
    return lease[1] if lease is not None and lease[0] == "running" and lease[1] > now else None


def _refuse_committing(job_id: str, expires: int) -> CmError:
    until = datetime.datetime.fromtimestamp(expires / 1000, datetime.UTC).strftime("%H:%M:%S UTC")
    return CmError("JOB_COMMITTING", f"job {job_id[:12]} is being processed now (its lease runs to {until}); "
                                     "wait until it finishes, then cancel what is left (`cm status`)")


def _rows(conn: sqlite3.Connection, target: str, now: int) -> tuple[list[tuple[int, str, str | None]], list[str]]:
    """The observations ``target`` names, and the jobs it names whole."""
    if target.isdigit():
        found = observations.state_of(conn, int(target))
        if found is None:
            raise CmError("UNKNOWN_OBSERVATION", f"no observation has id {target}; see `cm status`")
        return [(int(target), found[0], found[1])], []
    if target.startswith("md-"):
        prefix = "import:" + json.dumps(["markdown", "v2", target], separators=(",", ":"))[:-1] + ","
        rows = observations.in_namespace_prefix(conn, prefix)
        if not rows:
            raise CmError("UNKNOWN_IMPORT", f"no import has id {target}; `cm import` printed it when it queued")
        return rows, []
    job_id = jobs.resolve_id(conn, target)
    return [(oid, state, job_id) for oid, state in observations.of_job(conn, job_id)], [job_id]


def cancel(conn: sqlite3.Connection, target: str, now: int) -> Cancelled:
    target = target.strip()
    rows, named_jobs = _rows(conn, target, now)
    for named in named_jobs:
        expires = _committing(conn, named, now)
        if expires is not None:
            raise _refuse_committing(named, expires)
    chosen: list[int] = []
    touched: set[str] = set(named_jobs)
    skipped = 0
    for oid, state, job_id in rows:
        if state not in CANCELLABLE:
            continue
        expires = _committing(conn, job_id, now)
        if expires is not None:
            if len(rows) == 1:
                raise _refuse_committing(str(job_id), expires)
            skipped += 1
            continue
        chosen.append(oid)
        if job_id is not None:
            touched.add(job_id)
    if not chosen:
        if skipped:
            raise CmError("JOB_COMMITTING", "every part left is being processed now; wait until it finishes")
        raise CmError("NOTHING_TO_CANCEL", f"{target} holds no queued, waiting or failed work (processed work is "
                                           "forgotten with Adjust Memory, not cancelled)")
    deleted = observations.cancel(conn, chosen)
    cancelled_jobs = []
    for job_id in sorted(touched):
        left = [state for _oid, state in observations.of_job(conn, job_id) if state not in _FINISHED]
        lease = jobstore.lease_of(conn, job_id)
        if not left and lease is not None and lease[0] not in ("done", "cancelled"):
            jobstore.cancel(conn, job_id, now)
            cancelled_jobs.append(job_id)
    observations.record_cancellation(conn, now, target, cancelled_jobs, chosen, deleted)
    return Cancelled(target, cancelled_jobs, chosen, deleted, skipped)
