"""The disclosure ledger: the repository of the ``ledger`` table, one row per model request.

Contract:
- SQL only. Who records and when is the Writer side's business (``cmrunner.agentrt.meter``);
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


def breakdown(conn: sqlite3.Connection, since_ms: int | None = None) -> dict:
    """One pass over the rows since ``since_ms``: ``total`` and the totals ``byDay`` and
    ``byMonth`` (UTC, oldest first), ``byModel`` (host, model and protocol) and ``byOutcome``
    (most requests first), and ``byGrant``: what left this machine per (scope, provenance class),
    where a request counts under every scope and class of its grant (it could carry text of each),
    so those rows may overlap; an empty grant (``cm network-test``'s probe) is ``("-", "-")``.
    Each list holds ``(key, totals)`` pairs, ``byGrant`` ``(scope, provenance, totals)``."""
    where, args = _window(since_ms, None)
    rows = conn.execute(
        "SELECT strftime('%Y-%m-%d', at / 1000, 'unixepoch'), host || ' ' || model || ' (' || api || ')', outcome,"
        f" scopes, provenance, {_TOTALS} FROM ledger{where} GROUP BY 1, 2, 3, 4, 5", args).fetchall()
    groups: dict[str, dict] = {name: {} for name in ("total", "byDay", "byMonth", "byModel", "byOutcome", "byGrant")}

    def add(name: str, key: object, counts: list[int]) -> None:
        into = groups[name].setdefault(key, [0] * len(counts))
        for i, value in enumerate(counts):
            into[i] += value

    for day, model, outcome, scopes, provenance, *raw in rows:
        counts = [int(v or 0) for v in raw]
        add("total", "", counts)
        add("byDay", str(day), counts)
        add("byMonth", str(day)[:7], counts)
        add("byModel", str(model), counts)
        add("byOutcome", str(outcome), counts)
        for scope in str(scopes or "").split(","):
            for prov in str(provenance or "").split(","):
                add("byGrant", (scope or "-", prov or "-"), counts)

    def listed(name: str, by_time: bool) -> list:
        pairs = [(key, _totals(tuple(counts))) for key, counts in groups[name].items()]
        return sorted(pairs, key=(lambda p: p[0]) if by_time else (lambda p: (-p[1]["requests"], p[0])))

    return {"total": _totals(tuple(groups["total"].get("", [0] * 10))),
            "byDay": listed("byDay", True), "byMonth": listed("byMonth", True),
            "byModel": listed("byModel", False), "byOutcome": listed("byOutcome", False),
            "byGrant": [(scope, prov, totals) for (scope, prov), totals in listed("byGrant", True)]}


def used(conn: sqlite3.Connection, starts: list[int]) -> list[tuple[int, int]]:
    """(tokens, requests) recorded at or after each of ``starts``, in one indexed pass: what the
    spend caps' windows have used."""
    tokens = ("(CASE WHEN typeof(input_tokens) = 'integer' AND input_tokens >= 0 THEN input_tokens ELSE 0 END"
              " + CASE WHEN typeof(output_tokens) = 'integer' AND output_tokens >= 0 THEN output_tokens ELSE 0 END)")
    columns = ", ".join(f"SUM(CASE WHEN at >= ? THEN {tokens} ELSE 0 END), SUM(at >= ?)" for _ in starts)
    row = conn.execute(f"SELECT {columns} FROM ledger WHERE at >= ?",
                       [value for start in starts for value in (start, start)] + [min(starts)]).fetchone()
    return [(int(row[2 * i] or 0), int(row[2 * i + 1] or 0)) for i in range(len(starts))]


def prune(conn: sqlite3.Connection, before_ms: int) -> int:
    """Remove rows older than ``before_ms`` (the retention rule); returns how many."""
    return conn.execute("DELETE FROM ledger WHERE at < ?", (before_ms,)).rowcount
