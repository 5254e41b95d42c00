"""The disclosure ledger: the repository of the ``ledger`` table, one row per model request.

Contract:
- SQL only. Who records and when is the Writer side's business (``cmrunner.writer_proc.meter``);
  the spend caps read their windows here (``cmrunner.writer_proc.spend``); ``cm usage`` and
  ``cm status`` read the totals here.
- Every function runs inside the caller's connection and transaction and never begins, commits
  or rolls back one.
- A row holds counts, names and codes only: time, process, job, attempt, turn, the provider's
  host, model and protocol, the grant (scopes and provenance classes the request could carry),
  bytes sent and received, tokens and where they came from (``provider``, an estimator's name,
  or ``none`` when nothing was billed), duration and outcome (``ok`` or a failure code). Never a
  request or response body, a key, a URL path or a query.
- Append-only: rows are only ever added, and removed whole by ``prune`` once older than
  ``RETENTION_DAYS`` (a year of months and the month before it).
- Reading is robust to a damaged row: a count that is not a non-negative integer counts as 0, so
  a corrupt row can neither block a commit nor make a total negative.
- Days and months are UTC, as providers bill them.
Stdlib only.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

RETENTION_DAYS = 400
RETENTION_MS = RETENTION_DAYS * 86_400_000
MEMORY_AGENT = "memory_agent"
NETWORK_TEST = "network_test"

# Each count column summed so that a value of the wrong type or sign counts as nothing.
_COUNTS = ("request_bytes", "response_bytes", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens",
           "duration_ms")
_SUMS = ", ".join(f"SUM(CASE WHEN typeof({c}) = 'integer' AND {c} >= 0 THEN {c} ELSE 0 END)" for c in _COUNTS)
_TOTALS = (f"COUNT(*), SUM(outcome IS NOT 'ok'), "
           f"SUM(token_source NOT IN ('provider', 'none')), {_SUMS}")
_GROUPS = {
    "day": "strftime('%Y-%m-%d', at / 1000, 'unixepoch')",
    "month": "strftime('%Y-%m', at / 1000, 'unixepoch')",
    "model": "host || ' ' || model || ' (' || api || ')'",
    "outcome": "outcome",
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One model request as the ledger keeps it (see module contract)."""

    at: int
    process: str
    job_id: str | None
    attempt: int | None
    turn: int | None
    host: str
    model: str
    api: str
    scopes: tuple[str, ...]
    provenance: tuple[str, ...]
    request_bytes: int
    response_bytes: int
    input_tokens: int
    cached_tokens: int | None
    output_tokens: int
    reasoning_tokens: int | None
    token_source: str
    duration_ms: int
    outcome: str


def append(conn: sqlite3.Connection, entry: Entry) -> None:
    conn.execute(
        "INSERT INTO ledger(at, process, job_id, attempt, turn, host, model, api, scopes, provenance, request_bytes,"
        " response_bytes, input_tokens, cached_tokens, output_tokens, reasoning_tokens, token_source, duration_ms,"
        " outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (entry.at, entry.process, entry.job_id, entry.attempt, entry.turn, entry.host, entry.model, entry.api,
         ",".join(entry.scopes), ",".join(entry.provenance), entry.request_bytes, entry.response_bytes,
         entry.input_tokens, entry.cached_tokens, entry.output_tokens, entry.reasoning_tokens, entry.token_source,
         entry.duration_ms, entry.outcome),
    )


def _totals(row: tuple) -> dict:
    (requests, failed, estimated, sent, received, inputs, cached, outputs, reasoning, duration) = (
        int(v or 0) for v in row)
    return {"requests": requests, "failed": failed, "estimatedRequests": estimated, "bytesSent": sent,
            "bytesReceived": received, "inputTokens": inputs, "cachedTokens": cached, "outputTokens": outputs,
            "reasoningTokens": reasoning, "tokens": inputs + outputs, "seconds": round(duration / 1000, 3)}


def empty() -> dict:
    """``totals`` of no rows: every key, all zero."""
    return _totals((0,) * 10)


def _window(since_ms: int | None, until_ms: int | None) -> tuple[str, list[int]]:
    clauses, args = [], []
    if since_ms is not None:
        clauses.append("at >= ?")
        args.append(since_ms)
    if until_ms is not None:
        clauses.append("at < ?")
        args.append(until_ms)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def totals(conn: sqlite3.Connection, since_ms: int | None = None, until_ms: int | None = None) -> dict:
    """Requests, failures, bytes, tokens and seconds of the rows in ``[since_ms, until_ms)``.

    Keys: ``requests``, ``failed``, ``estimatedRequests`` (rows whose tokens are an estimate),
    ``bytesSent``, ``bytesReceived``, ``inputTokens``, ``cachedTokens``, ``outputTokens``,
    ``reasoningTokens``, ``tokens`` (input + output) and ``seconds`` (time spent in requests).
    """
    where, args = _window(since_ms, until_ms)
    return _totals(conn.execute(f"SELECT {_TOTALS} FROM ledger{where}", args).fetchone())


def grouped(conn: sqlite3.Connection, by: str, since_ms: int | None = None) -> list[tuple[str, dict]]:
    """``totals`` per day, month (UTC), provider/model or outcome, oldest or largest first."""
    key = _GROUPS[by]
    where, args = _window(since_ms, None)
    order = "1" if by in ("day", "month") else "2 DESC, 1"
    rows = conn.execute(f"SELECT {key}, {_TOTALS} FROM ledger{where} GROUP BY 1 ORDER BY {order}", args).fetchall()
    return [(str(row[0]), _totals(row[1:])) for row in rows]


def by_grant(conn: sqlite3.Connection, since_ms: int | None = None) -> list[tuple[str, str, dict]]:
    """What left this machine per (scope, provenance class): a request is counted under every
    scope and class of its grant (it could carry text of each), so the rows may overlap; an empty
    grant (``cm network-test``'s probe) is ``("-", "-")``."""
    where, args = _window(since_ms, None)
    rows = conn.execute(f"SELECT scopes, provenance, {_TOTALS} FROM ledger{where} GROUP BY 1, 2", args).fetchall()
    merged: dict[tuple[str, str], list[int]] = {}
    for scopes, provenance, *counts in rows:
        for scope in str(scopes or "").split(",") or [""]:
            for prov in str(provenance or "").split(",") or [""]:
                into = merged.setdefault((scope or "-", prov or "-"), [0] * len(counts))
                for i, value in enumerate(counts):
                    into[i] += int(value or 0)
    return [(scope, prov, _totals(tuple(counts))) for (scope, prov), counts in sorted(merged.items())]


def used(conn: sqlite3.Connection, since_ms: int) -> tuple[int, int]:
    """(tokens, requests) recorded at or after ``since_ms``: what a spend cap's window has used."""
    found = totals(conn, since_ms)
    return found["tokens"], found["requests"]


def prune(conn: sqlite3.Connection, before_ms: int) -> int:
    """Remove rows older than ``before_ms`` (the retention rule); returns how many."""
    return conn.execute("DELETE FROM ledger WHERE at < ?", (before_ms,)).rowcount
