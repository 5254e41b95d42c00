"""Crash suite: SIGKILL of a real drain at every commit step, then a random-time soak.

After every crash the next drain must leave: each observation processed exactly once with a
receipt or still recoverable, every document at the last receipt's after-hash, no transaction
directory, ``PRAGMA integrity_check`` ok, and no model call for a job whose files were published.
"""

from __future__ import annotations

import random
import signal
import sqlite3
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
from writer_support import admit, configure, rows

FAULTS = ["before_stage", "after_stage_file:1", "after_stage_copy:1", "after_stage_file:2", "after_stage_copy:2",
          "after_stage_file:3", "after_stage_copy:3", "after_journal", "after_marker", "after_publish_file:1",
          "after_publish_file:2", "after_publish_file:3", "after_publish"]
PUBLISHED = {"after_marker", "after_publish_file:1", "after_publish_file:2", "after_publish_file:3", "after_publish"}


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


# About 50 s on an idle 2-core machine (200 drains started and killed, each after up to 0.4 s); the
# suite's 120 s default is too tight when the machine is loaded.
@pytest.mark.timeout(600)
def test_random_sigkill_soak(home, tmp_path):
    trials = 200
    paths, _cfg = configure(home)
    for i in range(24):
        admit(paths, f"observation number {i}", f"e{i}", batch=f"b{i}")
    script = write_script(str(tmp_path), MIXED)
    calls = str(tmp_path / "calls.log")
    rng = random.Random(1130)
    killed = 0
    for _ in range(trials):
        drain = start_drain(home, drain_env(script, calls))
        time.sleep(rng.uniform(0.0, 0.4))
        drain.send_signal(signal.SIGKILL)
        killed += drain.wait(timeout=60) == -signal.SIGKILL
        conn = sqlite3.connect(paths.db)
        conn.execute("UPDATE jobs SET expires = 0 WHERE state = 'running'")  # time passes: leases expire
        conn.execute("UPDATE jobs SET available = 0 WHERE state = 'retry'")
        conn.commit()
        conn.close()
        check_crash_state(paths, **_commits(paths))
    # The last drains settle every job; jobs are serialised and a drain waits out each retry's
    # backoff (up to 32 s for a job the kills already cost recoveries), so time is made to pass
    # meanwhile, as between the kills: waiting backoffs end at once.
    with _time_passes(paths):
        for _ in range(11):
            assert start_drain(home, drain_env(script, calls)).wait(timeout=120) == 0
    check_end_state(paths, **_commits(paths))
    assert transaction_dirs(paths) == []
    states = dict(rows(paths, "SELECT state, COUNT(*) FROM observations GROUP BY state"))
    assert set(states) <= {"processed", "dead"}, states
    # Template 4 (every 4th observation) cites unknown evidence: it can only end dead, never written.
    # Any other observation ends processed, unless the kills happened to expire its job's lease on
    # every one of its attempts (first + 5 recoveries, more likely on a loaded machine): then it is
    # dead by rule with RECOVERY_BUDGET_EXHAUSTED, never written and never lost.
    dead = {oid for (oid,) in rows(paths, "SELECT id FROM observations WHERE state = 'dead'")}
    never_valid = {oid for (oid,) in rows(paths, "SELECT id FROM observations WHERE (id - 1) % 4 = 3")}
    assert len(never_valid) == 6 and never_valid <= dead
    exhausted = {oid for (oid,) in rows(paths, "SELECT o.id FROM observations o JOIN jobs j ON j.id = o.job_id"
                                              " WHERE j.issue = 'RECOVERY_BUDGET_EXHAUSTED'")}
    assert dead - never_valid <= exhausted, (sorted(dead), sorted(exhausted))
    assert states.get("processed", 0) == 24 - len(dead)
    assert states.get("processed", 0) >= 12, "most jobs must get through the kills"
    assert killed >= trials // 2, "the soak must really kill drains mid-work"
