"""Crash suite: SIGKILL of a real drain at every commit step, then a random-time soak.

After every crash the next drain must leave: each observation processed exactly once with a
receipt or still recoverable, every document at the last receipt's after-hash, no transaction
directory, ``PRAGMA integrity_check`` ok, and no model call for a job whose files were published.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from drain_support import (
    MIXED,
    TEMPLATES,
    check_crash_state,
    check_end_state,
    drain_env,
    start_drain,
    transaction_dirs,
    write_script,
)
from support import killwindow
from writer_support import admit, configure, rows

from cmrunner.core import store

FAULTS = ["before_stage", "after_stage_file:1", "after_stage_copy:1", "after_stage_file:2", "after_stage_copy:2",
          "after_stage_file:3", "after_stage_copy:3", "after_journal", "after_marker", "after_publish_file:1",
          "after_publish_file:2", "after_publish_file:3", "after_publish"]
PUBLISHED = {"after_marker", "after_publish_file:1", "after_publish_file:2", "after_publish_file:3", "after_publish"}


# The seam SIGKILLs the drain at the named step itself (no delay), so this is load-independent.
@pytest.mark.parametrize("fault", FAULTS)
def test_sigkill_at_each_commit_step(home, tmp_path, fault):
    paths, _cfg = configure(home)
    oid = admit(paths, "a fact worth keeping", "e1", batch="b1")
    script = write_script(str(tmp_path), TEMPLATES)
    calls = str(tmp_path / "calls.log")
    crashed = start_drain(home, drain_env(script, calls, CM_TEST_FAULT=fault))
    assert crashed.wait(timeout=60) == -signal.SIGKILL, crashed.stderr.read()
    receipt_before = rows(paths, "SELECT COUNT(*) FROM receipts")[0][0]
    assert receipt_before == 0, "the kill came before the database commit"
    # The lease of the dead drain's job has not expired; make the job reclaimable now, as time would.
    conn = sqlite3.connect(paths.db)
    conn.execute("UPDATE jobs SET expires = 0")
    conn.commit()
    conn.close()
    calls_before = open(calls).read().split()
    second = start_drain(home, drain_env(script, calls))
    assert second.wait(timeout=60) == 0, second.stderr.read()
    check_end_state(paths, receipts=1)
    assert transaction_dirs(paths) == []
    assert rows(paths, "SELECT state FROM observations WHERE id = ?", (oid,)) == [("processed",)]
    calls_after = open(calls).read().split()
    if fault in PUBLISHED:
        assert calls_after == calls_before, "recovery must replay the receipt, not call the model"
        assert rows(paths, "SELECT retries FROM jobs") == [(0,)]
    else:
        assert len(calls_after) == len(calls_before) + 1  # never committed: one more attempt
    text = open(paths.document("profile")).read()
    assert text.count(f"## Fact {oid}") == 1


def _commits(paths) -> dict[str, int]:
    """Commits so far, as ``check_end_state`` counts them: each observation is its own batch and is
    processed in its job's commit; MIXED's second template (every 4th id from 2) ignores, so it
    publishes no document."""
    processed = [oid for (oid,) in rows(paths, "SELECT id FROM observations WHERE state = 'processed'")]
    return {"receipts": len(processed), "published": sum((oid - 1) % 4 != 1 for oid in processed)}


@contextmanager
def _time_passes(paths) -> Iterator[None]:
    """While the block runs, every job waiting in retry becomes due at once (a thread)."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.1):
            conn = sqlite3.connect(paths.db, timeout=30)
            try:
                conn.execute("UPDATE jobs SET available = 0 WHERE state = 'retry' AND available > 0")
                conn.commit()
            finally:
                conn.close()

    clock = threading.Thread(target=tick, daemon=True)
    clock.start()
    try:
        yield
    finally:
        stop.set()
        clock.join()


OPEN_WORK = 2  # observations a soak drain starts with (topped up before each trial)


def _open_work(paths) -> int:
    return rows(paths, "SELECT COUNT(*) FROM observations WHERE state IN ('pending', 'claimed')")[0][0]


def _timed_drain(home: str, paths, env: dict[str, str]) -> float:
    """One whole, unkilled drain: seconds from its first job's claim to its last job's outcome.
    Both come from the job rows' own timestamps (the drain's clock), so nothing polls the store
    while the drain runs and slows it down."""
    started_ms = time.time() * 1000
    drain = start_drain(home, env)
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    (first, last), = rows(paths, "SELECT MIN(created_at), MAX(updated_at) FROM jobs WHERE created_at >= ?",
                          (int(started_ms),))
    assert first is not None, "the calibration drain claimed no job"
    return (last - first) / 1000


def _wait_for_claim(paths, drain) -> None:
    """Return once ``drain`` holds a live job lease (or has exited). Polled every 5 ms through one
    read-only connection, cheap beside a drain's start-up."""
    conn = sqlite3.connect(f"file:{paths.db}?mode=ro", uri=True, timeout=30)
    try:
        while drain.poll() is None:
            if conn.execute("SELECT 1 FROM jobs WHERE state = 'running' AND expires > 0").fetchone():
                return
            time.sleep(0.005)
    finally:
        conn.close()


# 40 drains, each killed after a delay scaled to this machine's measured drain runs (see the test);
# 2-3 min on the shared 2-core machine at a load average near 10 (docs/benchmarks.md): the suite's
# 120 s default is too tight when the machine is loaded.
@pytest.mark.timeout(600)
def test_random_sigkill_soak(home, tmp_path):
    """Kill drains at random points of their work, then let drains settle every job.

    Each drain starts with two observations of open work (topped up before each trial). Once it
    holds a job's lease (its start-up, most of its life, varies several-fold with the shared
    machine's load, so the kill is anchored to this event rather than to the drain's spawn), it is
    SIGKILLed after a delay from ``support.killwindow``: uniform over twice the median time from
    first claim to last outcome of three whole unkilled drains with the same work (observations
    1-6, which commit normally). So about half the drains die mid-job and the rest while tearing
    down or not at all, whether the machine is quiet or loaded. (The old fixed
    ``uniform(0.0, 0.4)`` from spawn killed most drains in start-up under load, and let most finish
    on a quiet machine once the first backlog was gone: 76 of 200 killed, issue 37.)
    """
    trials = 40
    paths, _cfg = configure(home)
    store.open_store(paths).close()  # the clock below updates jobs from its first tick on
    script = write_script(str(tmp_path), MIXED)
    calls = str(tmp_path / "calls.log")
    admitted = 0

    def add_observation() -> None:
        nonlocal admitted
        admit(paths, f"observation number {admitted}", f"e{admitted}", batch=f"b{admitted}")
        admitted += 1

    # Time passes throughout (retry backoffs end at once), so a drain spends its life working, not
    # waiting out the 1 s backoff of the observations that cite unknown evidence.
    with _time_passes(paths):
        runs = []
        for _ in range(3):
            for _ in range(OPEN_WORK):
                add_observation()
            runs.append(_timed_drain(home, paths, drain_env(script, calls)))
        window = killwindow.Window(span=max(statistics.median(runs), 0.05))
        rng = random.Random(1130)
        outcomes = {"killed": 0, "mid_job": 0, "completed": 0}
        for _ in range(trials):
            while _open_work(paths) < OPEN_WORK:
                add_observation()
            drain = start_drain(home, drain_env(script, calls))
            _wait_for_claim(paths, drain)
            time.sleep(window.delay(rng))
            drain.send_signal(signal.SIGKILL)
            if drain.wait(timeout=60) == -signal.SIGKILL:
                outcomes["killed"] += 1
                # Killed holding a live job lease (a job an earlier kill left has its lease expired
                # below, expires = 0): this drain's kill landed between claim and commit (mid-work).
                outcomes["mid_job"] += bool(rows(paths, "SELECT 1 FROM jobs WHERE state = 'running' AND expires > 0"))
            else:
                outcomes["completed"] += 1
            conn = sqlite3.connect(paths.db, timeout=30)
            conn.execute("UPDATE jobs SET expires = 0 WHERE state = 'running'")  # time passes: leases expire
            conn.commit()
            conn.close()
            check_crash_state(paths, **_commits(paths))
    killwindow.record("writer_crash.soak", trials=trials, window_s=round(2 * window.span, 3), **outcomes)
    # The last drains settle every job; jobs are serialised and a drain waits out each retry's
    # backoff (up to 32 s for a job the kills already cost recoveries), so time is made to pass
    # meanwhile, as during the kills: waiting backoffs end at once.
    with _time_passes(paths):
        for _ in range(11):
            assert start_drain(home, drain_env(script, calls)).wait(timeout=120) == 0
            if not _open_work(paths) and not rows(paths, "SELECT 1 FROM jobs WHERE state IN ('running', 'retry')"):
                break
    check_end_state(paths, **_commits(paths))
    assert transaction_dirs(paths) == []
    states = dict(rows(paths, "SELECT state, COUNT(*) FROM observations GROUP BY state"))
    assert set(states) <= {"processed", "dead"}, states
    # Template 4 (every 4th observation) cites unknown evidence: it can only end dead, never written.
    # Any other observation ends processed, unless the kills happened to expire its job's lease on
    # every one of its attempts (first + 5 recoveries): then it is dead by rule with
    # RECOVERY_BUDGET_EXHAUSTED, never written and never lost.
    dead = {oid for (oid,) in rows(paths, "SELECT id FROM observations WHERE state = 'dead'")}
    never_valid = {oid for (oid,) in rows(paths, "SELECT id FROM observations WHERE (id - 1) % 4 = 3")}
    assert len(never_valid) == admitted // 4 and never_valid <= dead
    exhausted = {oid for (oid,) in rows(paths, "SELECT o.id FROM observations o JOIN jobs j ON j.id = o.job_id"
                                              " WHERE j.issue = 'RECOVERY_BUDGET_EXHAUSTED'")}
    assert dead - never_valid <= exhausted, (sorted(dead), sorted(exhausted))
    assert states.get("processed", 0) == admitted - len(dead)
    assert states.get("processed", 0) >= (admitted - len(never_valid)) // 2, "most jobs must get through the kills"
    # By design about half the drains are killed mid-job (docs/benchmarks.md has the measured
    # fractions); a fifth leaves room for the shared machine's load to change during the soak.
    assert outcomes["mid_job"] >= trials // 5, f"the soak must really kill drains mid-work: {outcomes}"
