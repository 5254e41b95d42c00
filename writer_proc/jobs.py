"""Jobs: claiming batches, fenced leases, failure outcomes and explicit retry.

Contract (every function runs inside the caller's ``BEGIN IMMEDIATE`` transaction):
- This module is the queue's policy; its SQL belongs to the tables' owners,
  ``cmrunner.core.jobstore`` (jobs, the flush flag) and ``cmrunner.capture.observations``.
- A job holds one scope, one provenance class and one task kind, the queue head's; an ``edit``
  task is always alone; a sealed session batch (``batch_id``) is claimed whole and never mixed
  with other work. A claim never crosses a scope or provenance class, not even inside a sealed
  batch: members of another class (a batch sealed before sealing split them) wait for their own job.
- Jobs are serialised: while any job is ``running`` with a live lease or waiting in ``retry``, no
  new job is created, so evidence is committed in admission order and global writes never race.
- A claim issues a fresh random ``token``, ``generation + 1`` and ``expires = now + leaseMs``.
  ``assert_lease`` (and every lease-checked write) requires id, token, generation, state
  ``running`` and an unexpired lease; anything else is ``STALE_LEASE``, so a late answer after
  expiry, cancellation or takeover can never commit.
- Recovery budget: the first attempt plus at most ``MAX_RECOVERIES`` automatic recoveries per job
  (``jobs.retries``, persisted), shared by retryable failures and expired-lease re-claims; then
  the job is ``dead`` with the real cause of its last failure (an expired lease that finds the
  budget spent: ``RECOVERY_BUDGET_EXHAUSTED``, the process that held it left no other record).
  Backoff is ``min(600 s, 2^n s)``; a provider's ``Retry-After`` (``retry_after_ms``, already
  capped at 600 s) lengthens it: the job's next attempt time, ``jobs.available``, is
  ``now + max(backoff, retry_after)``.
- Failures on the model's own decisions (diagnostic stage ``model_output`` or ``core_validation``:
  rejected submissions, no submission, output cut short) have a smaller budget: the job is
  ``dead`` when ``MAX_MODEL_FAILURES`` attempts ended that way. Every attempt starts a fresh
  conversation with the same input and the same model; the first retry absorbs a one-off slip,
  a second identical failure is how this model treats this input, and each further attempt
  would cost as much again for the same end (issue 24: six attempts, 114 requests). A
  ``cm retry`` after changing the model gives it one more attempt.
- The job's cause (``fail``): ``failure`` is the code the attempt ended with, ``rejection`` the
  last tool rejection the model received in it, and ``issue`` the one cause the user sees: the
  rejection's code when the model ended without a valid decision after a rejection
  (``ENDED_WITHOUT_DECISION``; e.g. ``SENSITIVE_CONTENT_REJECTED``, then ``MISSING_SUBMISSION``),
  else the failure's code (an attempt ended by repeated rejections fails with the rejection's code).
- A spend cap met mid-attempt (``SPEND_CAP_REACHED``) is not a failure of the job: ``defer`` gives
  it back to ``retry``, due at once and without spending a recovery; the Writer claims nothing
  while a cap stands, so it waits for the next window or a raised cap, never dead.
- Permanent provider failures (``AUTHENTICATION``, ``PROXY_AUTHENTICATION``, ``CONFIGURATION``) and
  non-retryable ones make the job ``dead`` at once; ``FORGOTTEN_SOURCE`` makes it ``quarantined``.
  The job's observations share the outcome. ``retry`` revives a dead or quarantined job keeping
  its id, counters and history; it does not refill the recovery budget.
- Job ids given by a user are resolved only by ``resolve_id``: any unique prefix of at least
  ``MIN_ID_PREFIX`` characters; shorter is ``JOB_ID_TOO_SHORT``, several matches
  ``AMBIGUOUS_JOB_ID`` (listing them), none ``UNKNOWN_JOB``.
- Non-session work (relay, import) waits for the legacy thresholds: ``turnThreshold`` expressions,
  ``byteThreshold`` bytes, ``idleMs`` since the newest, ``maxWaitMs`` since the oldest, or a flush.
  A claim of it stops before the observation that would take its text past one job's sources
  (``budget.JOB_SOURCE_BYTES``), so the parts of a large import are claimed about one per job.
"""

from __future__ import annotations

import json
import os
import sqlite3

from cmrunner.agentrt import budget
from cmrunner.capture import observations
from cmrunner.core import jobstore, reasons
from cmrunner.core.errors import CmError

MAX_RECOVERIES = 5
MAX_MODEL_FAILURES = 2
MODEL_STAGES = frozenset({"model_output", "core_validation"})
ENDED_WITHOUT_DECISION = frozenset({"MISSING_SUBMISSION", "AGENT_TURN_LIMIT"})
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


def backoff_ms(retries_before: int) -> int:
    return min(MAX_BACKOFF_MS, 1000 * 2 ** min(retries_before, 10))


def _fence(conn: sqlite3.Connection, job_id: str, now: int, lease_ms: int, retries: int) -> Job:
    jobstore.fence(conn, job_id, os.urandom(16).hex(), now + lease_ms, retries, now)
    return _load(conn, job_id)


def _load(conn: sqlite3.Connection, job_id: str) -> Job:
    row = jobstore.load(conn, job_id)
    return Job(row, observations.ids_of_job(conn, job_id))


def _set_outcome(conn: sqlite3.Connection, job_id: str, state: str, issue: str, now: int) -> None:
    jobstore.set_outcome(conn, job_id, state, issue, now)
    observations.set_job_outcome(conn, job_id, state, issue)


def flush_requested(conn: sqlite3.Connection) -> bool:
    return jobstore.flush_requested(conn)


def _ready(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool) -> bool:
    """Legacy readiness of non-session pending work (relay, import)."""
    count, size, oldest, newest = observations.pending_unbatched(conn)
    if not count:
        return False
    return (force or count >= scheduler["turnThreshold"] or size >= scheduler["byteThreshold"]
            or now - oldest >= scheduler["maxWaitMs"] or now - newest >= scheduler["idleMs"])


def claim(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool = False) -> Job | None:
    """Resume a due job or create one from the queue head (see module contract)."""
    lease_ms = scheduler["leaseMs"]
    active = jobstore.active(conn)
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
    if jobstore.active(conn):
        return None
    head = observations.pending_head(conn)
    if head is None:
        jobstore.clear_flush(conn)
        return None
    head_id, scope, provenance, task_kind, batch_id = head
    if batch_id is not None:
        ids = observations.pending_in_batch(conn, batch_id, scope, provenance)
    elif task_kind == "edit":
        ids = [head_id]
    else:
        if not _ready(conn, scheduler, now, force or flush_requested(conn)):
            return None
        ids, size = [], 0
        for oid, o_scope, o_prov, o_kind, o_batch, o_bytes in observations.pending(conn):
            if (o_scope, o_prov, o_kind, o_batch) != (scope, provenance, "observation", None):
                break
            if ids and size + o_bytes > budget.JOB_SOURCE_BYTES:
                break  # shaping would send it back (its bytes as sent are never fewer): not claimed at all
            ids.append(oid)
            size += o_bytes
            if len(ids) >= scheduler["turnThreshold"]:
                break
    job_id = os.urandom(16).hex()
    jobstore.create(conn, job_id, os.urandom(16).hex(), scope, provenance or "", task_kind, now + lease_ms, now)
    observations.claim_for(conn, job_id, ids)
    if not observations.has_pending(conn):
        jobstore.clear_flush(conn)
    return _load(conn, job_id)


def assert_lease(conn: sqlite3.Connection, job: Job, now: int) -> None:
    if not jobstore.holds_lease(conn, job.id, job.token, job.generation, now):
        raise CmError("STALE_LEASE", "this job's lease was lost (expired, cancelled or taken over); its result is discarded")


def renew(conn: sqlite3.Connection, job: Job, now: int, lease_ms: int) -> bool:
    return jobstore.renew(conn, job.id, job.token, job.generation, now + lease_ms, now) == 1


def record_activity(conn: sqlite3.Connection, job: Job, model_turns: int = 0, tool_calls: int = 0,
                    input_tokens: int = 0, output_tokens: int = 0) -> None:
    jobstore.record_activity(conn, job.id, job.token, job.generation, model_turns, tool_calls, input_tokens,
                             output_tokens)


def cause_code(code: str, rejection: dict | None) -> str:
    """The one cause of a failed attempt (see the module contract)."""
    if code in ENDED_WITHOUT_DECISION and rejection is not None and isinstance(rejection.get("code"), str):
        return rejection["code"]
    return code


def fail(conn: sqlite3.Connection, job: Job, code: str, now: int, retryable: bool = True,
         diagnostic: dict | None = None, retry_after_ms: int | None = None,
         rejection: dict | None = None) -> tuple[str, str]:
    """Record a failed attempt of a job we hold (``rejection``: the last tool rejection the model
    received in it); returns the job's new state and its issue (the cause)."""
    assert_lease(conn, job, now)
    diag = json.dumps(diagnostic, sort_keys=True) if diagnostic else None
    model_failure = (diagnostic or {}).get("stage") in MODEL_STAGES
    model_failures = jobstore.record_failure(conn, job.id, diag, code,
                                             json.dumps(rejection, sort_keys=True) if rejection else None,
                                             model_failure)
    issue = cause_code(code, rejection)
    if code in QUARANTINE:
        state = "quarantined"
    elif (code in PERMANENT or code in NOT_RETRYABLE or not retryable or job.retries >= MAX_RECOVERIES
          or (model_failure and model_failures >= MAX_MODEL_FAILURES)):
        state = "dead"
    else:
        jobstore.schedule_retry(conn, job.id, issue,
                                now + max(backoff_ms(job.retries), min(MAX_BACKOFF_MS, retry_after_ms or 0)), now)
        return "retry", issue
    _set_outcome(conn, job.id, state, issue, now)
    return state, issue


def defer(conn: sqlite3.Connection, job: Job, code: str, now: int) -> None:
    """A job we hold met a spend cap: it waits, due at once, with its recovery budget untouched;
    the claim holds it back while the cap stands (``cmrunner.core.spend``)."""
    assert_lease(conn, job, now)
    jobstore.defer(conn, job.id, code, now)


def quarantine(conn: sqlite3.Connection, job: Job, code: str, now: int) -> None:
    """Isolate a job before any network call (authorization, sensitive input, size)."""
    assert_lease(conn, job, now)
    _set_outcome(conn, job.id, "quarantined", code, now)


def finish(conn: sqlite3.Connection, job: Job, now: int, edit_result: str | None = None) -> None:
    """Mark the job done and its observations processed (called inside the commit transaction)."""
    jobstore.finish(conn, job.id, edit_result, now)
    observations.mark_processed(conn, job.id, now)


def hold_back(conn: sqlite3.Connection, job: Job, ids: list[int], code: str, rejection: dict, now: int) -> str:
    """Move ``ids`` (observations of ``job``, which we hold) into a new job that is ``dead`` with
    ``code`` and ``rejection`` (the document it waits for): the decisions resting on them could not
    be written, so they wait for the user's fix and ``cm retry`` (or ``cm fix``), and the rest of
    ``job`` commits. Returns the new job's id."""
    assert_lease(conn, job, now)
    held_id = os.urandom(16).hex()
    jobstore.create(conn, held_id, os.urandom(16).hex(), job.scope, job.provenance, job.task_kind, 0, now)
    observations.claim_for(conn, held_id, ids)
    jobstore.record_failure(conn, held_id, None, code, json.dumps(rejection, sort_keys=True), False)
    _set_outcome(conn, held_id, "dead", code, now)
    return held_id


def waiting_for(conn: sqlite3.Connection, target: str, code: str = "INVALID_DOCUMENT") -> list[str]:
    """Dead jobs whose cause is ``code`` on ``target`` (what ``hold_back`` or a blocked attempt left)."""
    found = []
    for job_id, issue, _failure, rejection, _diagnostic in jobstore.dead_or_paused(conn):
        record = jobstore.decode_rejection(rejection)
        if issue == code and record is not None and record.get("target") == target:
            found.append(job_id)
    return found


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
    found = jobstore.ids_with_prefix(conn, text, MAX_CANDIDATES + 1)
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
    holding = observations.jobs_holding(conn, jobstore.quarantined_ids(conn))
    total = jobstore.count_unfinished(conn, holding)
    rows = jobstore.unfinished(conn, holding, limit)
    listed = [{"id": r[0], "state": r[1], "issue": r[2], "kind": r[3], "attempts": int(r[4]), "retries": int(r[5]),
               "nextAttemptAt": int(r[6]) if r[1] == "retry" else None,
               "leaseExpiresAt": int(r[7]) if r[1] == "running" else None,
               "failure": r[8], "rejection": jobstore.decode_rejection(r[9])} for r in rows]
    return listed, int(total)


class DeadGroup:
    """Dead (or paused) jobs with one cause: issue, the code their last attempt ended with, the
    last rejection, the provider's answer when it decides the remedy (``reasons.provider_hint``
    of the diagnostic: ``httpStatus`` and ``reason``, else ``None``), the job ids (oldest first)
    and the observations they hold."""

    __slots__ = ("issue", "failure", "rejection", "hint", "ids", "held")

    def __init__(self, issue: str | None, failure: str | None, rejection: dict | None,
                 hint: dict | None = None) -> None:
        self.issue, self.failure, self.rejection, self.hint = issue, failure, rejection, hint
        self.ids: list[str] = []
        self.held = 0


def dead_by_issue(conn: sqlite3.Connection) -> list[DeadGroup]:
    """Dead (and paused) jobs grouped by cause, largest group first: the issue, the code the last
    attempt ended with and the last rejection when it is the cause (its code is the issue; an
    earlier rejection of an attempt that ended otherwise does not split a group)."""
    groups: dict[tuple, DeadGroup] = {}
    for job_id, issue, failure, rejection_text, diagnostic_text in jobstore.dead_or_paused(conn):
        rejection = jobstore.decode_rejection(rejection_text)
        rejection = rejection if rejection is not None and rejection.get("code") == issue else None
        hint = reasons.provider_hint(jobstore.decode_rejection(diagnostic_text))
        key = (issue, failure, json.dumps(rejection, sort_keys=True), json.dumps(hint, sort_keys=True))
        group = groups.setdefault(key, DeadGroup(issue, failure, rejection, hint))
        group.ids.append(job_id)
        group.held += observations.count_of_job(conn, job_id)
    return sorted(groups.values(), key=lambda g: (-len(g.ids), g.issue or ""))


def retry(conn: sqlite3.Connection, job_id: str, now: int) -> str:
    """Revive a dead or quarantined job for another attempt; history and counters are kept.
    ``job_id`` may be a unique prefix (``resolve_id``); returns the full id."""
    job_id = resolve_id(conn, job_id)
    state = jobstore.state_of(conn, job_id)
    if state not in ("dead", "quarantined", "paused"):
        raise CmError("JOB_NOT_RETRYABLE", f"job {job_id} is {state}; only dead or quarantined jobs can be retried")
    jobstore.revive(conn, job_id, now)
    observations.reclaim(conn, job_id)
    return job_id


def next_due(conn: sqlite3.Connection, now: int) -> int | None:
    """When the earliest waiting job becomes claimable (ms since epoch), or ``None``."""
    due = jobstore.next_due(conn)
    return None if due is None else max(now, due)


def has_pending(conn: sqlite3.Connection) -> bool:
    return observations.has_pending(conn)


def runnable(conn: sqlite3.Connection, scheduler: dict, now: int, force: bool = False) -> bool:
    """Whether ``claim`` would return a job now (without claiming anything)."""
    active = jobstore.active(conn)
    if active:  # jobs are serialised: only the oldest active job can run next
        _job_id, state, expires, available, _retries = active[0]
        return not ((state == "running" and expires > now) or (state == "retry" and available > now))
    head = observations.pending_head_kind(conn)
    if head is None:
        return False
    if head[1] is not None or head[0] == "edit":
        return True
    return _ready(conn, scheduler, now, force or flush_requested(conn))
