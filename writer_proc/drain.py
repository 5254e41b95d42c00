"""``cm session-drain --home <abs>``: the detached, single-instance consumer of a data root.

Contract:
- The drain claims ``drain_lease`` for its identity (``drainlease.acquire``); if a live process
  already holds it, the drain exits 0 at once: two drains never run for one data root.
- It runs the registered consumers until none has runnable work, lingers briefly (a burst of host
  events usually follows the first one), then gives the lease up only inside a transaction that
  re-checks for runnable work (``drainlease.release_if_idle``), so no admitted row is stranded.
- SIGTERM makes it stop after the current step and release the lease.
- Before any consumer, with or without a Memory Agent, it finishes interrupted commits and applies
  the retention rules (``housekeeping.at_drain_start``), so forgetting never waits for a model.
- Consumers offer ``runnable(conn)`` and ``step(conn)`` (and optionally ``next_due(conn)``). The
  Writer consumer runs when a Memory Agent is available; a retry backoff or a live lease that ends
  within ``wait_bound_ms`` is waited through, a later one is left to the next drain or ``cm flush``.
- It never dies silently: whatever escapes the loop (a ``CmError`` or any other exception) is
  recorded in ``drain_failures`` (code, exception type, ``file:line:function`` frames — never a
  non-``CmError``'s message) in the same transaction that gives the held job back to retry and
  releases the lease; ``cm status`` shows it as "last drain failure". Anything that is not a
  ``CmError`` is re-raised as ``CmError("DRAIN_CRASHED")``, so ``cm flush`` prints one line and
  never a traceback. A drain that later ends with nothing runnable or waiting marks earlier
  failures resolved.
- When memory sync is set up, a drain that published starts a detached ``cm sync --auto`` on its
  way out (``start_sync``): never waited for, never on a hook path.
- While it holds the lease it writes the rotating drain log (``drainlog``): stages, job ids, codes
  and timings only.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cmrunner.core import config as config_mod, drainfailures, drainlease, identity, records, store, syncstate
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths, resolve_home
from cmrunner.secrets import safety, withhold
from cmrunner.writer_proc import drainlog

if TYPE_CHECKING:
    from cmrunner.agentrt.interface import MemoryAgentPort
    from cmrunner.writer_proc.writer import Outcome, Writer

# How long an idle drain waits for more work before it gives the lease up: a burst of host events
# usually follows the first one. Not a user setting; tests replace it (tests/support/seams.py).
LINGER_MS = 1000
SYNC_RETRY_MS = 300_000  # a failed sync is tried again by the first drain after this, commit or not
POLL_SECONDS = 0.1
INTERRUPTED_CODE = "DRAIN_INTERRUPTED"
log = drainlog.get("drain")


class Consumer:
    """One kind of work the drain knows how to do."""

    name = "consumer"

    def runnable(self, conn: sqlite3.Connection) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def step(self, conn: sqlite3.Connection) -> bool:  # pragma: no cover - interface
        """Do one unit of work in its own transaction(s); ``True`` if anything was done."""
        raise NotImplementedError

    def abandon(self, conn: sqlite3.Connection, code: str) -> str | None:
        """Inside the caller's transaction, after an unexpected failure: give back what this
        consumer holds; returns the id of the job given back, if any."""
        return None


class WriterConsumer(Consumer):
    """Claims jobs and commits decisions through the configured Memory Agent."""

    name = "writer"

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.on_outcome: Callable[[Outcome], object] = lambda _outcome: None

    def runnable(self, conn: sqlite3.Connection) -> bool:
        from cmrunner.writer_proc import jobs

        if self.writer.gate() is not None:
            return False  # a spend cap holds every claim back (``next_due`` says until when)
        return jobs.runnable(conn, self.writer.scheduler, self.writer.now(), self.writer.force)

    def step(self, conn: sqlite3.Connection) -> bool:
        outcome = self.writer.run_once()
        if outcome is not None:
            self.on_outcome(outcome)
        return outcome is not None

    def next_due(self, conn: sqlite3.Connection) -> int | None:
        from cmrunner.writer_proc import jobs

        due = jobs.next_due(conn, self.writer.now())
        block = self.writer.gate()
        if block is None or (due is None and not jobs.has_pending(conn)):
            return due
        return block.until  # work waits for the cap's window to end: wait through it only if that is soon

    def abandon(self, conn: sqlite3.Connection, code: str) -> str | None:
        from cmrunner.writer_proc import jobs

        job = self.writer.holding
        if job is None:
            return None
        try:
            jobs.fail(conn, job, code, self.writer.now(), retryable=True)
        except CmError:
            return None  # the lease is gone: the job belongs to whoever holds it now
        return job.id


def agent_port(cfg: config_mod.Config) -> MemoryAgentPort | None:
    """The Memory Agent for this configuration, or ``None`` when none can run.

    The network agent runs when ``remote`` is configured, disclosure is enabled and the key is in
    the private ``.env``; with ``remote.provider: agent-cli`` the agent-CLI runtime runs instead
    (``agentcli.runtime``: the CLI's own login, no key). Without them work stays queued: nothing is sent anywhere. This function
    is the seam tests replace with a scripted agent (``tests/support/seams.py``); nothing in the
    environment can choose another agent.
    """
    if cfg.remote is None or not cfg.disclosure.enabled:
        return None
    if cfg.remote.get("provider") == "agent-cli":
        from cmrunner.agentrt.agentcli.runtime import AgentCliRuntime

        return AgentCliRuntime.from_config(cfg)
    from cmrunner.agentrt.agent import NetworkAgent

    return NetworkAgent.from_config(cfg)


def consumers(paths: DataPaths, cfg: config_mod.Config, force: bool = False) -> list[Consumer]:
    """The consumers this version of cm knows, in the order they run: host inboxes first, so
    that sealed batches exist before the Writer looks for work. First, with or without a model,
    the drain-start housekeeping (interrupted commits, retention: ``housekeeping``)."""
    from cmrunner.capture.codex_consumer import CodexInbox
    from cmrunner.capture.hook_consumer import HookInbox
    from cmrunner.capture.pi_inbox import PiInbox
    from cmrunner.writer_proc.housekeeping import at_drain_start

    work: list[Consumer] = [CodexInbox(cfg), PiInbox(cfg), HookInbox(cfg)]  # type: ignore[list-item]
    conn = store.open_store(paths, store.DRAIN_BUSY_MS)
    try:
        at_drain_start(paths, conn, cfg, lambda: int(time.time() * 1000))  # model or not
    finally:
        conn.close()
    port = agent_port(cfg)
    if port is None:
        return work
    from cmrunner.writer_proc.writer import Writer

    return work + [WriterConsumer(Writer(paths, cfg, port, force=force))]


def _linger_ms() -> int:
    return LINGER_MS


def run(paths: DataPaths, make_work: Callable[[], list[Consumer]], stop: Callable[[], bool], linger_ms: int,
        wait_bound_ms: int = 60_000, close: bool = True, process: str = "drain") -> str:
    """The drain loop; returns why it ended: ``busy`` (another drain), ``idle`` or ``stopped``.

    ``close=False`` leaves the connection open for a caller that exits at once (see ``main``).
    ``process`` names the caller in the failure record and the log (``drain`` or ``flush``).
    """
    conn = store.open_store(paths, store.DRAIN_BUSY_MS)
    me = identity.current()
    work: list[Consumer] = []
    detach: Callable[[], None] | None = None
    started = time.monotonic()
    try:
        with store.immediate(conn):
            if not drainlease.acquire(conn, me):
                return "busy"
        detach = _attach_log(paths)
        log.info("%s started (pid %d)", process, os.getpid())
        work = make_work()  # after the lease: recovery must never run beside another drain
        log.info("consumers: %s", ", ".join(c.name for c in work))

        def has_work(c: sqlite3.Connection) -> bool:
            return any(consumer.runnable(c) for consumer in work)

        idle_since = time.monotonic()
        while True:
            if stop():
                with store.immediate(conn):
                    drainlease.release_if_idle(conn, me, lambda _c: False)
                log.info("%s stopped on request after %d ms", process, (time.monotonic() - started) * 1000)
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
                        if due is None:  # nothing waits either, not even a job a crash gave back
                            drainfailures.resolve(conn, int(time.time() * 1000))
                        log.info("%s idle after %d ms%s", process, (time.monotonic() - started) * 1000,
                                 "" if due is None else "; a job waits beyond the wait bound")
                        return "idle"
            time.sleep(POLL_SECONDS)
    except BaseException as exc:
        if detach is not None:  # we hold the lease: give everything back and say why
            _give_back(paths, me, work, exc, process)
        conn.close()
        if isinstance(exc, Exception) and not isinstance(exc, CmError):
            raise CmError(drainfailures.CRASH_CODE,
                          f"the {process} stopped on an unexpected internal error ({type(exc).__name__}); the job it "
                          f"held goes back to retry; see `cm status` and {paths.drain_log}") from None
        raise
    finally:
        if detach is not None:
            detach()
        if close:
            conn.close()


def _attach_log(paths: DataPaths) -> Callable[[], None]:
    """The drain log, or a no-op when it cannot be opened (a log must never stop the drain)."""
    try:
        return drainlog.attach(paths)
    except (CmError, OSError):
        return lambda: None


def _give_back(paths: DataPaths, me: identity.Identity, work: list[Consumer], exc: BaseException,
               process: str) -> None:
    """After anything escaped the loop: in one transaction, hand the held job back to retry,
    record the failure and release the lease. Best effort: a failure here is only logged (the
    lease of a process that has exited is free anyway)."""
    failed = isinstance(exc, Exception)
    code = drainfailures.describe(exc)[0] if failed else INTERRUPTED_CODE
    stack = " < ".join(reversed(drainfailures.frames(exc.__traceback__)))
    if failed:
        log.error("%s failed: %s (%s) at %s", process, code, type(exc).__name__, stack or "?")
    else:
        log.warning("%s interrupted (%s)", process, type(exc).__name__)
    try:
        conn = store.open_store(paths, store.DRAIN_BUSY_MS)
    except CmError as inner:
        log.error("could not record the failure: %s", inner.code)
        return

    def settle(give_back: bool) -> str | None:
        job_id = None
        with store.immediate(conn):
            for consumer in work if give_back else []:
                abandon = getattr(consumer, "abandon", None)
                job_id = (abandon(conn, code) if abandon else None) or job_id
            if failed:
                drainfailures.record(conn, process, exc, job_id)
            drainlease.release(conn, me)
        return job_id

    try:
        for give_back in (True, False):  # if giving the job back fails, still record and release
            try:
                job_id = settle(give_back)
            except Exception as inner:
                log.error("could not record the failure: %s (%s) at %s", drainfailures.describe(inner)[0],
                          type(inner).__name__, " < ".join(reversed(drainfailures.frames(inner.__traceback__))) or "?")
                continue
            if job_id is not None:
                log.info("job %s given back to retry (%s)", job_id[:12], code)
            break
    finally:
        conn.close()


def _request_recovery(cfg: config_mod.Config, recovery_id: str | None, code: str | None) -> None:
    """Mark isolated sessions for another try — one by its recovery id, or every one with ``code``
    (``all``: every one) — then let this (or the running) drain take them."""
    from cmrunner.capture import failures

    conn = store.open_store(DataPaths(cfg.data_root))
    try:
        with store.immediate(conn):
            if recovery_id is not None:
                failures.request_recovery(conn, recovery_id)
            elif not failures.request_recovery_of(conn, None if code == "all" else code):
                raise CmError("CODEX_RECOVERY_UNAVAILABLE", "no isolated session waits with that code; see `cm status`")
    finally:
        conn.close()


def start_sync(paths: DataPaths, home: str, committed: list[str]) -> bool:
    """Memory sync (issue 34), never in the way: when sync is set up and this drain published, or
    the last sync failed more than ``SYNC_RETRY_MS`` ago, start a detached ``cm sync --auto`` that
    commits the memory to git (its message names the receipts) and syncs under its own deadlines,
    also when a user's commit (undo, restore, purge, fix) came after the last sync,
    recording its outcome for ``cm status``. The drain never waits for it; hooks never get here."""
    state = syncstate.read(paths)
    if state is None:
        return False
    last = state.get("last") or {}
    retry = last.get("outcome") == "failed" and int(time.time() * 1000) - int(last.get("at") or 0) > SYNC_RETRY_MS
    if not committed and not retry:
        # A user's commit (undo, restore, forget's purge, fix) since the last sync goes out too.
        conn = store.open_existing(paths)
        if conn is None:
            return False
        try:
            newest = records.latest_commit_at(conn)
        finally:
            conn.close()
        if newest is None or newest <= int(last.get("at") or 0):
            return False
    argv = [sys.executable, "-I", "-m", "cmrunner", "sync", "--auto", "--home", home]
    if committed:
        argv[-2:-2] = ["--receipts", ",".join(committed)]
    drainlease.spawn_detached(argv)
    return True


def main(argv: list[str]) -> int:
    """Entry for ``cm session-drain …`` (argv excludes ``cm session-drain``)."""

    home_arg: str | None = None
    recover_id: str | None = None
    recover_code: str | None = None
    rest = list(argv)
    try:
        while rest:
            arg = rest.pop(0)
            if arg == "--home" and rest:
                home_arg = rest.pop(0)
            elif arg == "--recover" and rest:
                recover_id = rest.pop(0)
            elif arg == "--recover-code" and rest:
                recover_code = rest.pop(0)
            else:
                raise InputError("INVALID_ARGUMENTS", "usage: cm session-drain [--home <absolute path>] "
                                 "[--recover <recovery id> | --recover-code <CODE>|all]")
        home = resolve_home(home_arg)
        safety.configure(home, deep=True)  # every scan of this drain: deep rules and the home's allow-list
        cfg = config_mod.load(home)
        if recover_id is not None or recover_code is not None:
            _request_recovery(cfg, recover_id, recover_code)
        stopping = {"flag": False}

        def on_term(_signum: int, _frame: object) -> None:
            stopping["flag"] = True

        signal.signal(signal.SIGTERM, on_term)
        paths = DataPaths(cfg.data_root)
        # The read path consults these deep-scan findings: hand edits since the last drain at
        # start, this drain's commits at the end.
        withhold.refresh(paths)
        committed: list[str] = []

        def work() -> list[Consumer]:
            found = consumers(paths, cfg)
            for consumer in found:
                if isinstance(consumer, WriterConsumer):
                    consumer.on_outcome = lambda o: committed.append(o.job_id) if o.state == "committed" else None
            return found

        run(paths, work, lambda: stopping["flag"], _linger_ms(), close=False)
        withhold.refresh(paths)
        start_sync(paths, home, committed)
        # Exit without interpreter teardown: the lease is already released and every write is
        # committed, so the only thing teardown would add is a window with two drains alive.
        os._exit(0)
    except CmError as exc:
        sys.stderr.write(exc.line() + "\n")
        return 1
    except Exception as exc:
        sys.stderr.write(f"cm: {drainfailures.CRASH_CODE}: the drain stopped on an unexpected internal error "
                         f"({type(exc).__name__}) before it started; run `cm flush` to see it in the foreground\n")
        return 1
