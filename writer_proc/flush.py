"""``cm flush``: the drain's loop in the foreground, with progress and a truthful exit code.

Contract:
- A flush request is recorded durably first (legacy relay/import thresholds no longer hold work
  back), then this process takes the drain lease and runs the same consumers as the drain,
  reporting each job outcome through ``progress``. It never bypasses a backoff or a live lease:
  short waits (≤ ``WAIT_BOUND_MS``) are waited through, longer ones end the flush incomplete.
- While another live drain holds the lease, the flush does not compete: it follows that drain
  until the lease is free, then runs its own forced pass over what that drain left (a drain
  started before the request, or before a model was configured, may leave inbox rows, pending
  turns or below-threshold imports it would not take); a drain that wins the lease first is
  followed again, at most ``MAX_FOLLOWS`` times.
- ``FlushReport.complete`` is true only if nothing failed or was quarantined in this run and no
  observation is left pending, claimed, buffered or dead, and no job waits; the CLI exits 1
  otherwise (the specification's rule). Turns of live sessions that are not sealed yet (fewer
  than ten settled interactions, session still open: ``sessions.open_backlog``) are not queued
  work: no flush may seal them, so they are reported as ``open_turns`` and never make it fail.
  Buffered observations of ended or isolated sessions, or of other sources, still do.
- Work a spend cap holds back (``cmrunner.core.spend``) is not processed: the report names the
  cap (``cap``), and the CLI ends with ``SPEND_CAP_REACHED`` and what releases it.
- An unexpected failure is recorded and handled by ``drain.run`` exactly as in the detached drain
  (job back to retry, lease released, "last drain failure" in ``cm status``) and reaches the
  CLI as one ``CmError`` line, never a traceback.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from cmrunner.capture import observations, sessions
from cmrunner.core import config as config_mod, drainlease, jobstore, spend, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import drain, jobs
from cmrunner.writer_proc.writer import Outcome

WAIT_BOUND_MS = 10_000
FOLLOW_POLL_SECONDS = 0.1
MAX_FOLLOWS = 5  # drains that win the lease before the flush's own pass; each one ran to idle


class FlushReport:
    __slots__ = ("outcomes", "remaining", "followed", "waiting", "open_turns", "cap")

    def __init__(self, outcomes: list[Outcome], remaining: dict[str, int], followed: bool, waiting: bool,
                 open_turns: int = 0, cap: spend.Block | None = None) -> None:
        self.outcomes = outcomes
        self.remaining = remaining  # observations flush should have processed, by state
        self.followed = followed
        self.waiting = waiting
        self.open_turns = open_turns  # unsealed turns of live sessions: expected, not a failure
        self.cap = cap  # the spend cap that holds the remaining work back, if one does

    @property
    def complete(self) -> bool:
        bad = any(o.state not in ("committed", "ignored") for o in self.outcomes)
        return not bad and not self.waiting and not any(self.remaining.values())


def _remaining(conn: sqlite3.Connection) -> tuple[dict[str, int], int]:
    """Observations left by state (live sessions' unsealed turns excluded), and those turns."""
    counts = {state: 0 for state in ("buffered", "pending", "claimed", "dead")}
    conn.execute("BEGIN")  # one read snapshot (WAL), so the subtraction below sees one state
    try:
        for state, count in observations.queued_counts(conn):
            counts[state] = count
        turns, held = sessions.open_backlog(conn)
    finally:
        conn.execute("COMMIT")
    counts["buffered"] -= held
    return counts, turns


def _follow(conn: sqlite3.Connection) -> None:
    while drainlease.live_holder(conn) is not None:
        time.sleep(FOLLOW_POLL_SECONDS)


def flush(paths: DataPaths, cfg: config_mod.Config, progress: Callable[[Outcome], None]) -> FlushReport:
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            jobstore.request_flush(conn)
            holder = drainlease.live_holder(conn)
        followed = holder is not None
        outcomes: list[Outcome] = []
        if followed:
            _follow(conn)

        def record(outcome: Outcome) -> None:
            outcomes.append(outcome)
            progress(outcome)

        # The drain this flush followed may have started before the request (or before a model was
        # configured) and ended with work it would not do, so the flush then runs its own pass. A
        # drain that takes the lease first is followed again, a bounded number of times.
        for _ in range(MAX_FOLLOWS):
            if _own_pass(paths, cfg, conn, record) != "busy":
                break
            followed = True
            _follow(conn)
        now = int(time.time() * 1000)
        waiting = jobs.next_due(conn, now) is not None
        remaining, open_turns = _remaining(conn)
        report = FlushReport(outcomes, remaining, followed, waiting, open_turns)
        if not report.complete:
            report.cap = spend.blocked(conn, spend.Caps.of(cfg.spend), now)
        return report
    finally:
        conn.close()


def _own_pass(paths: DataPaths, cfg: config_mod.Config, conn: sqlite3.Connection,
              record: Callable[[Outcome], None]) -> str:
    """The drain's loop under this process's lease, forced; ``busy`` if another drain holds it."""
    if drain.agent_port(cfg) is None and jobs.has_pending(conn):
        raise CmError("UNCONFIGURED", "no model is configured, so nothing can be processed; run `cm config init` with --base-url and --model")
    made: list = []

    def make_work() -> list:
        made.extend(drain.consumers(paths, cfg, force=True))
        for consumer in made:
            if isinstance(consumer, drain.WriterConsumer):
                consumer.on_outcome = record
        return made

    try:
        return drain.run(paths, make_work, lambda: False, linger_ms=0, wait_bound_ms=WAIT_BOUND_MS,
                         process="flush")
    finally:
        for consumer in made:
            if isinstance(consumer, drain.WriterConsumer):
                consumer.writer.close()
