"""Adjust Memory and Processing Status: interactive edit requests to the same Writer.

Contract:
- A request is the user's own words typed in the terminal: one ``interactive`` observation
  (provenance ``user_explicit``) with ``task_kind = "edit"`` in the scope the user chose. The
  Writer and its contract interpret it (correction, forget, promotion) exactly as any edit task;
  choosing a project grants nothing new.
- Before anything is written: the scope must be personal (``global``) or a registered project,
  and in both ``disclosure.allowedScopes`` and ``writableScopes``; ``user_explicit`` must be an
  allowed provenance; the text must be non-empty, at most ``MAX_REQUEST_BYTES`` and pass the
  sensitive-content scan. Admission, the flush request and the drain reservation share one
  ``BEGIN IMMEDIATE`` transaction, so an accepted request is durable and a consumer is on its way.
  Leaving the screen afterwards does not withdraw it.
- Status comes from the observation and its job (``mcp_items.outcome``), so idle leases, backoff,
  failures and cancellation show as what they are: only ``processed`` is a finished request.
  A processed request carries ``changes``: the sections its commit added, changed or removed
  (``core.history``, by the job's receipt), empty when the Writer kept nothing from it.
- ``overview`` reads the store read-only and never creates it; it carries the same grouped reasons
  and remedies and the last drain failure as ``cm status``; ``continue_processing`` and
  ``retry`` use the same queue rules as ``cm flush`` / ``cm retry`` (quarantine and live leases
  are not bypassed).
"""

from __future__ import annotations

import datetime
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, drainfailures, drainlease, history, jobstore, projects, reasons, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.mcpserver import items as mcp_items
from cmrunner.secrets import safety
from cmrunner.views import status, usage

if TYPE_CHECKING:
    from cmrunner.writer_proc.cancel import Cancelled

_T = TypeVar("_T")

NAMESPACE = "interactive:cm"
MAX_REQUEST_BYTES = 16 * 1024
ACTIVE_JOB_STATES = ("running", "retry", "dead", "quarantined", "paused")


@dataclass(frozen=True)
class ScopeChoice:
    scope: str
    label: str


def scopes(home: str) -> list[ScopeChoice]:
    """Personal memory and registered projects authorized for reading and writing."""
    cfg = config_mod.load(home)
    allowed, writable = set(cfg.allowed_scopes), set(cfg.writable_scopes)
    found = [ScopeChoice("global", "Personal memory (Profile and Preferences)")] \
        if "global" in allowed and "global" in writable else []
    for project in projects.load(DataPaths(cfg.data_root)):
        if project.scope in allowed and project.scope in writable:
            found.append(ScopeChoice(project.scope, f"Project: {project.name}"))
    return found


@dataclass(frozen=True)
class Submitted:
    entry_id: str
    task_id: str
    state: str
    duplicate: bool


def _iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_request(home: str, scope: str, text: str) -> str:
    """Every check that precedes admission; returns the text to store (see module contract)."""
    if scope not in {c.scope for c in scopes(home)}:
        raise CmError("UNAUTHORIZED_SCOPE", f"{scope} is not authorized for reading and writing; add it to "
                                            "disclosure.allowedScopes and writableScopes first")
    cfg = config_mod.load(home)
    if "user_explicit" not in cfg.disclosure.allowed_provenance or not cfg.disclosure.enabled:
        raise CmError("UNAUTHORIZED_PROVENANCE", "your own requests (user_explicit) are not allowed to reach the "
                                                 "model; enable them in disclosure.allowedProvenance")
    if not text.strip():
        raise CmError("INVALID_TEXT", "write what should change, for example: forget that I use Vim")
    if len(text.encode("utf-8")) > MAX_REQUEST_BYTES:
        raise CmError("INVALID_TEXT_SIZE", f"a request is limited to {MAX_REQUEST_BYTES // 1024} KiB; split it")
    violations = safety.scan_value({"text": text})
    if violations:
        raise safety.SensitiveContentError(violations)
    return text


def submit(home: str, scope: str, text: str, entry_id: str | None = None) -> Submitted:
    """Admit one edit request and start a drain (see module contract)."""
    text = check_request(home, scope, text)
    entry_id = entry_id or f"edit-{int(time.time() * 1000)}-{os.urandom(4).hex()}"
    paths = DataPaths(config_mod.load(home).data_root)
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            admitted = observations.admit(conn, namespace=NAMESPACE, entry_id=entry_id, text=text, scope=scope,
                                          source="interactive", observed_at=_iso_now(), agent="cm-adjust",
                                          task_kind="edit")
            if admitted.state not in mcp_items.FINAL_STATES:
                jobstore.request_flush(conn)
                drainlease.ensure_drain(conn, home)
    finally:
        conn.close()
    return Submitted(entry_id, str(admitted.id), admitted.state, admitted.duplicate)


def request_status(home: str, entry_id: str) -> dict | None:
    """The request's outcome (state, issue, job, attempts, retryAt, diagnostic), or ``None``."""
    conn = store.open_existing(DataPaths(config_mod.load(home).data_root))
    if conn is None:
        return None
    try:
        found = mcp_items.outcome(conn, NAMESPACE, entry_id)
        if found is None:
            return None
        result = found[0]
        if result["state"] == "processed" and result["jobId"]:
            result["changes"] = [{"target": v.target, "section": v.title, "kind": v.kind}
                                 for v in history.by_receipt(conn, result["jobId"])]
    finally:
        conn.close()
    return result


@dataclass(frozen=True)
class JobRow:
    id: str
    state: str
    scope: str
    kind: str
    attempts: int
    issue: str | None
    retry_at: int | None
    lease_live: bool
    cause: str | None = None  # ``reasons.cause``: the issue with where the model's last rejection went wrong

    @property
    def retryable_by_user(self) -> bool:
        return self.state in ("dead", "quarantined", "paused")


@dataclass(frozen=True)
class Overview:
    exists: bool
    observations: dict[str, int]
    jobs: list[JobRow]
    drain_alive: bool
    requests: list[dict]
    problems: dict | None = None          # ``status.problems``: grouped reasons and remedies
    last_failure: dict | None = None      # ``drainfailures.latest``
    waiting: dict | None = None           # the spend cap that holds work back (``spend.Block.describe``)


def overview(home: str, limit: int = 20) -> Overview:
    """Pending work, unfinished jobs and recent interactive requests (read-only)."""
    cfg = config_mod.load(home)
    conn = store.open_existing(DataPaths(cfg.data_root))
    if conn is None:
        return Overview(False, {}, [], False, [])
    now = int(time.time() * 1000)
    try:
        counts = observations.count_by_state(conn)
        jobs = [JobRow(r[0], r[1], r[2], r[3], int(r[4]), r[5], int(r[6]) if r[1] == "retry" and r[6] else None,
                       r[1] == "running" and int(r[7]) > now,
                       reasons.cause(r[5], r[8], jobstore.decode_rejection(r[9])) if r[5] else None)
                for r in jobstore.listed(conn, ACTIVE_JOB_STATES, limit)]
        requests = []
        recent = observations.recent_entries(conn, NAMESPACE, limit)
        for (entry_id,) in recent:
            found = mcp_items.outcome(conn, NAMESPACE, entry_id)
            if found:
                requests.append({"entryId": entry_id, "scope": found[1], **found[0]})
        alive = drainlease.live_holder(conn) is not None
        remote = cfg.remote or {}
        grouped = status.problems(conn, remote.get("baseUrl"))  # an agent CLI has no URL to name
        waiting = usage.read(conn, cfg, brief=True)["blocked"]
        failure = drainfailures.latest(conn)
    finally:
        conn.close()
    return Overview(True, counts, jobs, alive, requests, grouped, failure, waiting)


def continue_processing(home: str) -> bool:
    """Ask for a flush and reserve a drain; ``False`` when there is no store yet (nothing to do)."""
    paths = DataPaths(config_mod.load(home).data_root)
    if not os.path.isfile(paths.db):
        return False
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            jobstore.request_flush(conn)
            drainlease.ensure_drain(conn, home)
    finally:
        conn.close()
    return True


def _in_queue(home: str, missing: str, change: Callable[[sqlite3.Connection], _T]) -> _T:
    """``change`` in one write transaction on the home's store; ``missing`` is the code when
    nothing was ever queued there (no store yet)."""
    paths = DataPaths(config_mod.load(home).data_root)
    if not os.path.isfile(paths.db):
        raise CmError(missing, "nothing has been queued yet")
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            return change(conn)
    finally:
        conn.close()


def retry(home: str, job_id: str) -> str:
    """Revive a dead or quarantined job (``jobs.retry``; a unique id prefix is enough) and reserve a
    drain, in one transaction; returns the full job id."""
    from cmrunner.writer_proc import jobs

    def revive(conn: sqlite3.Connection) -> str:
        full = jobs.retry(conn, job_id, int(time.time() * 1000))
        drainlease.ensure_drain(conn, home)
        return full

    return _in_queue(home, "UNKNOWN_JOB", revive)


def cancel(home: str, target: str) -> Cancelled:
    """Drop queued, waiting or failed work before it is sent (``writer_proc.cancel``), in one transaction."""
    from cmrunner.writer_proc import cancel as cancel_mod

    return _in_queue(home, "NOTHING_TO_CANCEL", lambda conn: cancel_mod.cancel(conn, target, int(time.time() * 1000)))
