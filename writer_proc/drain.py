"""``cm session-drain --home <abs>``: the detached, single-instance consumer of a data root.

Contract:
- The drain claims ``drain_lease`` for its identity (``drainlease.acquire``); if a live process
  already holds it, the drain exits 0 at once: two drains never run for one data root.
- It runs the registered consumers until none has runnable work, lingers briefly (a burst of host
  events usually follows the first one), then gives the lease up only inside a transaction that
  re-checks for runnable work (``drainlease.release_if_idle``), so no admitted row is stranded.
- SIGTERM makes it stop after the current step and release the lease.
- Consumers offer ``runnable(conn)`` and ``step(conn)`` (and optionally ``next_due(conn)``). The
  Writer consumer runs when a Memory Agent is available; a retry backoff or a live lease that ends
  within ``wait_bound_ms`` is waited through, a later one is left to the next drain or ``cm flush``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cmrunner import config as config_mod, drainlease, identity, safety, secretcache, store
from cmrunner.errors import CmError, InputError
from cmrunner.home import DataPaths, resolve_home

if TYPE_CHECKING:
    from cmrunner.writer_proc.writer import Writer

LINGER_ENV = "COMMON_MEMORY_DRAIN_LINGER_MS"
DEFAULT_LINGER_MS = 1000
POLL_SECONDS = 0.1


class Consumer:
    """One kind of work the drain knows how to do."""

    name = "consumer"

    def runnable(self, conn: sqlite3.Connection) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def step(self, conn: sqlite3.Connection) -> bool:  # pragma: no cover - interface
        """Do one unit of work in its own transaction(s); ``True`` if anything was done."""
        raise NotImplementedError


class WriterConsumer(Consumer):
    """Claims jobs and commits decisions through the configured Memory Agent."""

    name = "writer"

    def __init__(self, writer: "Writer") -> None:
        self.writer = writer
        self.on_outcome: Callable[[object], object] = lambda _outcome: None

    def runnable(self, conn: sqlite3.Connection) -> bool:
        from cmrunner.writer_proc import jobs

        return jobs.runnable(conn, self.writer.scheduler, self.writer.now(), self.writer.force)

    def step(self, conn: sqlite3.Connection) -> bool:
        outcome = self.writer.run_once()
        if outcome is not None:
            self.on_outcome(outcome)
        return outcome is not None

    def next_due(self, conn: sqlite3.Connection) -> int | None:
        from cmrunner.writer_proc import jobs

        return jobs.next_due(conn, self.writer.now())


def agent_port(cfg: config_mod.Config) -> object | None:
    """The Memory Agent for this configuration, or ``None`` when none can run.

    The scripted override (``COMMON_MEMORY_AGENT_SCRIPT``) wins; otherwise the network agent runs
    when ``remote`` is configured, disclosure is enabled and the key is in the private ``.env``.
    Without them work stays queued: nothing is sent anywhere.
    """
    from cmrunner.writer_proc import scripted

    port = scripted.from_environment()
    if port is not None:
        return port
    if cfg.remote is None or not cfg.data["disclosure"]["enabled"]:
        return None
    from cmrunner.writer_proc.agent import NetworkAgent

    return NetworkAgent.from_config(cfg)


def consumers(paths: DataPaths, cfg: config_mod.Config, force: bool = False) -> list[Consumer]:
    """The consumers this version of cm knows, in the order they run: host inboxes first, so
    that sealed batches exist before the Writer looks for work."""
    from cmrunner.codex_inbox import CodexInbox
    from cmrunner.pi_inbox import PiInbox

    work: list[Consumer] = [CodexInbox(cfg), PiInbox(cfg)]  # type: ignore[list-item]
    port = agent_port(cfg)
    if port is None:
        return work
    from cmrunner.writer_proc.writer import Writer

    writer = Writer(paths, cfg, port, force=force)
    writer.recover()
    return work + [WriterConsumer(writer)]


def _linger_ms() -> int:
    raw = os.environ.get(LINGER_ENV)
    if raw is None:
        return DEFAULT_LINGER_MS
    try:
        return max(0, min(60_000, int(raw)))
    except ValueError:
        return DEFAULT_LINGER_MS


def run(paths: DataPaths, make_work: Callable[[], list[Consumer]], stop: Callable[[], bool], linger_ms: int,
        wait_bound_ms: int = 60_000, close: bool = True) -> str:
    """The drain loop; returns why it ended: ``busy`` (another drain), ``idle`` or ``stopped``.

    ``close=False`` leaves the connection open for a caller that exits at once (see ``main``).
    """
    conn = store.open_store(paths, store.DRAIN_BUSY_MS)
    me = identity.current()
    try:
        with store.immediate(conn):
            if not drainlease.acquire(conn, me):
                return "busy"
        work = make_work()  # after the lease: recovery must never run beside another drain

        def has_work(c: sqlite3.Connection) -> bool:
            return any(consumer.runnable(c) for consumer in work)

        idle_since = time.monotonic()
        while True:
            if stop():
                with store.immediate(conn):
                    drainlease.release_if_idle(conn, me, lambda _c: False)
                return "stopped"
            did = False
            for consumer in work:
                did = consumer.step(conn) or did
            if did:
                idle_since = time.monotonic()
                continue
            due = min((d for d in (getattr(c, "next_due", lambda _c: None)(conn) for c in work) if d is not None),
                      default=None)
            waiting = due is not None and due - int(time.time() * 1000) <= wait_bound_ms
            if waiting:
                idle_since = time.monotonic()  # a backoff or a live lease ends soon: wait through it
            elif (time.monotonic() - idle_since) * 1000 >= linger_ms:
                # Checkpoint while still holding the lease: after the release the process must
                # vanish at once, or a capture that finds the lease free starts a second drain
                # while this one is still tearing down.
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                with store.immediate(conn):
                    if drainlease.release_if_idle(conn, me, has_work):
                        return "idle"
            time.sleep(POLL_SECONDS)
    except BaseException:
        conn.close()
        raise
    finally:
        if close:
            conn.close()


def _request_recovery(home: str, cfg: config_mod.Config, recovery_id: str) -> None:
    """Mark an isolated session for another try, then let this (or the running) drain take it."""
    from cmrunner.codex_inbox import request_recovery

    conn = store.open_store(DataPaths(cfg.data_root))
    try:
        with store.immediate(conn):
            request_recovery(conn, recovery_id)
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    """Entry for ``cm session-drain …`` (argv excludes ``cm session-drain``)."""
    import sys

    home_arg: str | None = None
    recover_id: str | None = None
    rest = list(argv)
    try:
        while rest:
            arg = rest.pop(0)
            if arg == "--home" and rest:
                home_arg = rest.pop(0)
            elif arg == "--recover" and rest:
                recover_id = rest.pop(0)
            else:
                raise InputError("INVALID_ARGUMENTS",
                                 "usage: cm session-drain [--home <absolute path>] [--recover <recovery id>]")
        home = resolve_home(home_arg)
        safety.configure(home, deep=True)  # every scan of this drain: deep rules and the home's allow-list
        cfg = config_mod.load(home)
        if recover_id is not None:
            _request_recovery(home, cfg, recover_id)
        stopping = {"flag": False}

        def on_term(_signum: int, _frame: object) -> None:
            stopping["flag"] = True

        signal.signal(signal.SIGTERM, on_term)
        paths = DataPaths(cfg.data_root)
        # The read path consults these deep-scan findings: hand edits since the last drain at
        # start, this drain's commits at the end.
        secretcache.refresh(paths)
        run(paths, lambda: consumers(paths, cfg), lambda: stopping["flag"], _linger_ms(), close=False)
        secretcache.refresh(paths)
        # Exit without interpreter teardown: the lease is already released and every write is
        # committed, so the only thing teardown would add is a window with two drains alive.
        os._exit(0)
    except CmError as exc:
        sys.stderr.write(exc.line() + "\n")
        return 1
