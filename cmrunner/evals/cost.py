"""What one world cost, from the disclosure ledger of its temporary home.

Contract: ``world_cost(paths)`` opens the finished home's store read-only and returns the
ledger's totals of every model request the world made (``requests``, ``bytesSent``,
``bytesReceived``, ``inputTokens``, ``outputTokens``, ``tokens``, ``estimatedRequests``,
``seconds``: ``core/ledger.py:totals``), or ``None`` when the world never opened a store.
``per_turn(totals, turns)`` divides them by the world's user turns. No number is made up here:
what the ledger does not hold is absent.
"""

from __future__ import annotations

from cmrunner.core import ledger, store
from cmrunner.core.home import DataPaths

KEYS = ("requests", "bytesSent", "bytesReceived", "inputTokens", "outputTokens", "tokens", "estimatedRequests",
        "seconds")


def world_cost(paths: DataPaths) -> dict | None:
    conn = store.open_existing(paths)
    if conn is None:
        return None
    try:
        totals = ledger.totals(conn)
    finally:
        conn.close()
    return {k: totals[k] for k in KEYS if k in totals}


def add(into: dict, more: dict) -> dict:
    return {k: round(into.get(k, 0) + more.get(k, 0), 3) for k in KEYS if k in into or k in more}


def per_turn(totals: dict, turns: int) -> dict:
    return {k: round(v / turns, 2) for k, v in totals.items()} if turns else {}
