"""Relay and Init admission and item status for ``cm mcp``: the server's only SQLite use.

Contract:
- A relay submission is one ``mcp_user_submission`` observation with the verbatim text; an Init
  is one ``agent_import`` observation whose text is a JSON envelope with a fixed key order
  (``kind, sourceLabel, basis, understanding[, gaps]``). Identity is ``mcp_access``'s namespace
  plus the submission or import id as entry id. The same identity with the same payload and
  context is a duplicate; anything else is ``SUBMISSION_CONFLICT``.
- Before anything is written: enablement, argument checks, context authorization, byte limits and
  the sensitive-content scan. Admission, the flush request and the drain reservation
  (``drainlease.ensure_drain``) share one ``BEGIN IMMEDIATE`` transaction, so an accepted item is
  durable and a consumer is on its way before the tool answers.
- Item status reads the store read-only and never creates it; an item outside this connection's
  capability or current contexts is reported as ``null``, never as another connection's data.
- ``shutdown`` (stdin EOF or SIGTERM of a writing profile) queues a flush and reserves a drain.
Stdlib only; this module is imported only by profiles that can write or report items.
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import time

from cmrunner.capture import observations
from cmrunner.core import drainlease, jobstore, records, store
from cmrunner.core.errors import CmError
from cmrunner.mcpserver.access import (
    Access,
    Binding,
    StatusQuery,
    ToolFailure,
    arguments,
    basis,
    context_id,
    init_namespace,
    item_id,
    next_for_item,
    relay_namespace,
    source_label,
    text,
    unavailable,
)
from cmrunner.secrets import safety

FINAL_STATES = ("processed", "quarantined", "dead")
_STATE_NAMES = {"buffered": "pending", "paused": "dead"}
_DIAGNOSTIC_KEYS = ("stage", "reason", "retryable", "httpStatus", "proxyStatus")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def agent_import_envelope(label: str, basis_value: str, understanding: str, gaps: str | None) -> str:
    body = {"kind": "agent_import", "sourceLabel": label, "basis": basis_value, "understanding": understanding}
    if gaps is not None:
        body["gaps"] = gaps
    return json.dumps(body, ensure_ascii=False)


def _scan(fields: dict[str, str | None]) -> None:
    violations = safety.scan_value({k: v for k, v in fields.items() if v is not None})
    if violations:
        err = safety.SensitiveContentError(violations)
        raise ToolFailure(err.code, err.message)


# -- outcomes --------------------------------------------------------------------------------

def _diagnostic(raw: str | None) -> dict | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {k: data[k] for k in _DIAGNOSTIC_KEYS if k in data}


def outcome(conn: sqlite3.Connection, namespace: str, entry_id: str) -> tuple[dict, str] | None:
    """An item's outcome and its frozen scope, or ``None`` when no such item exists."""
    row = observations.item(conn, namespace, entry_id)
    if row is None:
        return None
    obs_id, state, issue, scope, job_id = row
    job_state, attempts, available, job_issue, diagnostic = jobstore.outcome(conn, job_id)
    state = _STATE_NAMES.get(state, state)
    retained = records.targets_of_source(conn, obs_id)
    processed = state == "processed"
    if issue is None and job_state in ("retry", "dead", "quarantined", "paused"):
        issue = job_issue
    return {
        "taskId": str(obs_id),
        "state": state,
        "issue": None if processed else issue,
        "retainedIn": retained,
        "jobId": job_id,
        "jobState": job_state,
        "attempts": int(attempts or 0),
        "retryAt": int(available) if job_state == "retry" and available else None,
        "diagnostic": None if processed else _diagnostic(diagnostic),
    }, scope


# -- admission -------------------------------------------------------------------------------

def _admit(binding: Binding, access: Access, namespace: str, entry_id: str, body: str, scope: str,
           source: str, ids: dict) -> dict:
    try:
        conn = store.open_store(binding.paths)
    except CmError as exc:
        raise unavailable(exc) from None
    try:
        with store.immediate(conn):
            found_scope = observations.scope_of_entry(conn, namespace, entry_id)
            if found_scope is not None and found_scope != scope:
                raise ToolFailure("SUBMISSION_CONFLICT",
                                  "this id was already used for another context; reuse an id only for the same material")
            admitted = observations.admit(conn, namespace=namespace, entry_id=entry_id, text=body, scope=scope,
                                          source=source, observed_at=_iso_now(),
                                          agent=f"mcp-{binding.launch.client_id or 'unnamed'}")
            if admitted.state not in FINAL_STATES:
                jobstore.request_flush(conn)
                drainlease.ensure_drain(conn, binding.home)
        found = outcome(conn, namespace, entry_id)
    except ToolFailure:
        raise
    except CmError as exc:
        if exc.code == "SUBMISSION_CONFLICT":
            raise ToolFailure(exc.code, "this id was already used with a different payload; reuse an id only for "
                                        "identical material, or use a new id for new material") from None
        raise unavailable(exc) from None
    finally:
        conn.close()
    assert found is not None
    result, _scope = found
    return {"taskId": result["taskId"], "accepted": True, "duplicate": admitted.duplicate,
            "state": result["state"], "contextId": scope,
            "next": next_for_item(ids, result, scope, access, _now_ms())}


def submit_user_turn(binding: Binding, access: Access, raw: object) -> dict:
    args = arguments(raw, ("submissionId", "conversationId", "contextId", "text"))
    if not access.submission_enabled:
        raise ToolFailure("SUBMISSION_DISABLED",
                          "submissions are disabled for this connection (they need --accept-client-reported-user-turns, "
                          "user_explicit in disclosure.allowedProvenance and an allowed context); ask the user")
    submission = item_id(args, "submissionId")
    conversation = item_id(args, "conversationId", required=False)
    scope = access.require_context(context_id(args))
    body = text(args, "text", access.limits)
    _scan({"text": body})
    ids = {"submissionId": submission, **({"conversationId": conversation} if conversation else {})}
    namespace = relay_namespace(binding.launch.client_id or "", submission, conversation)
    return _admit(binding, access, namespace, submission, body, scope, "mcp_user_submission", ids)


def init_import(binding: Binding, access: Access, raw: object) -> dict:
    args = arguments(raw, ("importId", "contextId", "sourceLabel", "basis", "understanding", "gaps"))
    if not access.init_enabled:
        raise ToolFailure("INIT_DISABLED",
                          "Init is disabled for this connection (it needs --capability init, agent_observation in "
                          "disclosure.allowedProvenance and an allowed context); ask the user")
    import_id = item_id(args, "importId")
    scope = access.require_context(context_id(args))
    label = source_label(args)
    basis_value = basis(args)
    understanding = text(args, "understanding", access.limits)
    gaps = text(args, "gaps", access.limits, required=False)
    _scan({"sourceLabel": label, "understanding": understanding, "gaps": gaps})
    body = agent_import_envelope(label, basis_value, understanding, gaps)
    cap = min(c for c in (access.limits.get("maxSourceBytes"), access.limits["maxMessageBytes"]) if c is not None)
    if len(body.encode("utf-8")) > cap:
        raise ToolFailure("INVALID_TEXT_SIZE", f"the import needs more than this connection's limit of {cap} bytes; "
                                               "do not truncate it: ask the user what to keep")
    namespace = init_namespace(binding.launch.client_id or "", import_id)
    return _admit(binding, access, namespace, import_id, body, scope, "agent_import", {"importId": import_id})


def item_status(binding: Binding, access: Access, query: StatusQuery) -> dict:
    """``memory_status`` for one submission or import (see module contract)."""
    try:
        conn = store.open_existing(binding.paths)
    except CmError as exc:
        raise unavailable(exc) from None
    found = None
    if conn is not None:
        try:
            found = outcome(conn, query.namespace, query.entry_id)
        except sqlite3.Error:
            raise ToolFailure("MEMORY_UNAVAILABLE", "the runtime store could not be read; retry later") from None
        finally:
            conn.close()
    result, scope = found if found is not None else (None, None)
    if scope is not None and scope not in access.contexts:
        result = None
    return {query.key: result, "next": next_for_item(query.ids, result, scope, access, _now_ms())}


def shutdown(binding: Binding) -> bool:
    """Queue a flush and reserve a drain for whatever this data root still holds; ``True`` if done."""
    if not os.path.isfile(binding.paths.db):
        return False
    conn = store.open_store(binding.paths)
    try:
        with store.immediate(conn):
            jobstore.request_flush(conn)
            drainlease.ensure_drain(conn, binding.home)
    finally:
        conn.close()
    return True
