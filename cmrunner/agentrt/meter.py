"""The meter: every model request checked against the spend caps before it is sent, and recorded
in the disclosure ledger after it ends, whatever its outcome.

Contract:
- One ``Meter`` per attempt (or per ``cm network-test``), built with the store connection of the
  process, the grant the request is sent under (``Grant``: scopes and provenance classes) and the
  job and attempt it belongs to. Its connection is used from the thread that runs the attempt.
- ``blocked()`` is the reached cap (``cmrunner.core.spend``) that forbids the next request, or
  ``None``; the agent then fails the attempt with ``SPEND_CAP_REACHED`` (retryable; the Writer gives
  the job back to wait, never dead). ``Meter.unmetered`` has no caps (``cm network-test``'s one
  small probe still goes into the ledger).
- ``record(...)`` appends exactly one ledger row in its own transaction and returns the token
  counts it recorded, which the attempt sums for the receipt. Tokens: the provider's numbers when
  they are sane (both input and output present; input at most the request's bytes plus
  ``FRAMING_TOKENS``; output at most ``MAX_OUTPUT_TOKENS``; cached and reasoning within them),
  else an estimate (``tokencount``) of the request and of what the model produced, when the
  provider accepted the request (2xx); a refused or unanswered request bills nothing (``none``).
  An accepted request whose answer failed (cut off, too large, malformed, past the deadline) is
  estimated by ``tokencount.rough`` (bytes / 4), never by the tokenizer: its count only guards
  the caps, and a provider that keeps failing must not make the drain load the tokenizer's
  tables (67 MiB; issue 22, ``bench/flush_memory.py``).
- A ledger that cannot be written never fails the attempt or blocks a commit: the failure is
  logged (its code only) and the request goes on unrecorded.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from cmrunner.agentrt import tokencount
from cmrunner.core import ledger, spend, store
from cmrunner.core.errors import CmError

# A provider counts a few tokens per message and tool for framing; a prompt never has more
# tokens than bytes otherwise (every token covers at least one byte).
FRAMING_TOKENS = 10_000
MAX_OUTPUT_TOKENS = 10_000_000
INTERNAL_OUTCOME = "INTERNAL_ERROR"  # a request ended by anything but a CmError (the drain records the rest)
# A child of the ``cm`` logger, which the drain's log (``writer_proc/drainlog.py``) writes to when the
# lease holder attached it; named here so the runtimes need nothing of the Writer.
log = logging.getLogger("cm.meter")


class WireCounts(Protocol):
    """What one request did on the wire (``netclient.Exchange``): bytes sent and received, and
    whether the provider answered 2xx (took the request, so it may bill it)."""

    sent: int
    received: int

    @property
    def accepted(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Grant:
    """What a request may carry: the scopes of its sources and documents, the sources' classes."""

    scopes: tuple[str, ...]
    provenance: tuple[str, ...]


def provider_host(base_url: str) -> str:
    """The host of a base URL, nothing else (no credentials, path or query reach the ledger)."""
    return (urlsplit(base_url).hostname or "unknown").lower()


def sane_usage(usage: dict[str, int | None], request_bytes: int) -> dict[str, int | None] | None:
    """The provider's counts if they can be true (module contract), else ``None``."""
    inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
    if inputs is None or outputs is None:
        return None
    if inputs > request_bytes + FRAMING_TOKENS or outputs > MAX_OUTPUT_TOKENS:
        return None
    cached, reasoning = usage.get("cached_input_tokens"), usage.get("reasoning_tokens")
    return {"input_tokens": inputs, "output_tokens": outputs,
            "cached_input_tokens": cached if cached is not None and cached <= inputs else None,
            "reasoning_tokens": reasoning if reasoning is not None and reasoning <= outputs else None}


def runtime_identity(remote: dict) -> dict[str, str]:
    """How the ledger names a runtime: the provider's host, model and protocol; for an agent CLI,
    the CLI, the model passed to it (``default``: the CLI's own choice) and ``agent-cli``."""
    if remote.get("provider") == "agent-cli":
        return {"host": str(remote["agent"]), "model": str(remote.get("model") or "default"), "api": "agent-cli"}
    return {"host": provider_host(remote["baseUrl"]), "model": str(remote["model"]),
            "api": str(remote.get("api", "responses"))}


class Meter:
    def __init__(self, conn: sqlite3.Connection, process: str, remote: dict, grant: Grant,
                 caps: spend.Caps | None, job_id: str | None = None, attempt: int | None = None,
                 now: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.conn = conn
        self.process = process
        identity = runtime_identity(remote)
        self.host, self.model, self.api = identity["host"], identity["model"], identity["api"]
        self.grant = grant
        self.caps = caps
        self.job_id = job_id
        self.attempt = attempt
        self.now = now

    @classmethod
    def unmetered(cls, conn: sqlite3.Connection, process: str, remote: dict, grant: Grant) -> Meter:
        return cls(conn, process, remote, grant, None)

    def blocked(self) -> spend.Block | None:
        """The reached spend cap that forbids the next request, if any."""
        return None if self.caps is None else spend.blocked(self.conn, self.caps, self.now())

    def start(self) -> tuple[int, float]:
        """When a request starts: (wall clock ms for the row, monotonic seconds for its duration)."""
        return self.now(), time.monotonic()

    def record_run(self, turns: int, started: tuple[int, float], sent: int, received: int,
                   usage: dict[str, int | None] | None, outcome: str) -> dict[str, int]:
        """One ledger row for a whole agent-CLI run (``turn`` holds its model turns): the tokens the
        CLI reported (``provider``), else a rough estimate from the bytes cm exchanged with it
        (``tokencount.rough``; the CLI's own prompts are not in it); returns the tokens recorded."""
        inputs = usage.get("input_tokens") if usage else None
        outputs = usage.get("output_tokens") if usage else None
        if inputs is not None and outputs is not None:
            cached, source = (usage or {}).get("cached_input_tokens"), "provider"
        else:
            inputs, source = tokencount.rough(b"\0" * sent)
            outputs = tokencount.rough(b"\0" * received)[0]
            cached = None
        entry = ledger.Entry(started[0], self.process, self.job_id, self.attempt, turns, self.host, self.model,
                             self.api, self.grant.scopes, self.grant.provenance, sent, received, int(inputs), cached,
                             int(outputs), None, source, int((time.monotonic() - started[1]) * 1000), outcome)
        try:
            with store.immediate(self.conn):
                ledger.append(self.conn, entry)
        except (CmError, sqlite3.Error) as exc:
            log.warning("ledger row not written: %s", exc.code if isinstance(exc, CmError) else type(exc).__name__)
        return {"input_tokens": int(inputs), "output_tokens": int(outputs), "cached_input_tokens": cached or 0,
                "reasoning_tokens": 0}

    def record(self, turn: int | None, started: tuple[int, float], request: bytes, wire: WireCounts,
               usage: dict[str, int | None] | None, produced: bytes, outcome: str) -> dict[str, int]:
        """One ledger row for one request (module contract): ``wire`` says what crossed the wire,
        ``produced`` is what the model wrote (for an estimate); returns the tokens it recorded."""
        started_at, started_clock = started
        duration_ms = int((time.monotonic() - started_clock) * 1000)
        reported = sane_usage(usage, len(request)) if usage else None
        if reported is not None:
            inputs, outputs = int(reported["input_tokens"] or 0), int(reported["output_tokens"] or 0)
            cached, reasoning, source = reported["cached_input_tokens"], reported["reasoning_tokens"], "provider"
        elif wire.accepted:
            count = tokencount.estimate if outcome == "ok" else tokencount.rough
            inputs, source = count(request)
            outputs = count(produced)[0]
            cached = reasoning = None
        else:
            inputs = outputs = 0
            cached = reasoning = None
            source = "none"
        entry = ledger.Entry(started_at, self.process, self.job_id, self.attempt, turn, self.host, self.model, self.api,
                             self.grant.scopes, self.grant.provenance, wire.sent, wire.received, inputs, cached, outputs,
                             reasoning, source, duration_ms, outcome)
        try:
            with store.immediate(self.conn):
                ledger.append(self.conn, entry)
        except (CmError, sqlite3.Error) as exc:
            log.warning("ledger row not written: %s", exc.code if isinstance(exc, CmError) else type(exc).__name__)
        return {"input_tokens": inputs, "output_tokens": outputs, "cached_input_tokens": cached or 0,
                "reasoning_tokens": reasoning or 0}
