"""Writer rules beyond the happy path: thresholds, pruning, budgets, unsafe files, receipt replay."""

from __future__ import annotations

import os

import pytest
from writer_support import admit, all_evidence, configure, decision, put, read, retain, rows, writer

from cmrunner.core import store
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import commit, housekeeping, jobs

IGNORE = {"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": [], "reason": "r"}


def _ignore(task, reads):
    return decision(task, dict(IGNORE, evidence=all_evidence(reads)))


@pytest.mark.parametrize(("count", "text", "advance_ms", "ready"), [
    (5, "x", 0, False),                 # below every threshold
    (6, "x", 0, True),                  # six expressions
    (1, "y" * 16384, 0, True),          # 16 KiB
    (1, "x", 120_000, True),            # idle for 120 s
    (1, "x", 119_000, False),
])
def test_legacy_thresholds(home, count, text, advance_ms, ready):
    paths, cfg = configure(home)
    for i in range(count):
        admit(paths, text, f"r{i}", source="mcp_user_submission", batch=None)
    enqueued = rows(paths, "SELECT MAX(enqueued_at) FROM observations")[0][0]
    w, _ = writer(paths, cfg, _ignore, now=lambda: enqueued + advance_ms)
    assert (w.run_once() is not None) == ready
    w.close()


def test_oldest_backlog_of_ten_minutes_is_ready(home):
    paths, cfg = configure(home)
    admit(paths, "old", "r0", source="mcp_user_submission", batch=None)
    oldest = rows(paths, "SELECT enqueued_at FROM observations")[0][0]
    conn = store.open_store(paths)
    with store.immediate(conn):  # a newer expression keeps the idle timer from firing
        conn.execute("UPDATE observations SET enqueued_at = ?", (oldest - 600_000,))
    conn.close()
    admit(paths, "new", "r1", source="mcp_user_submission", batch=None)
    newest = rows(paths, "SELECT MAX(enqueued_at) FROM observations")[0][0]
    w, _ = writer(paths, cfg, _ignore, now=lambda: newest + 1000)
    assert w.run_once().state == "ignored"
    w.close()


def test_processed_bodies_are_pruned_after_seven_days(home):
    paths, cfg = configure(home)
    admit(paths, "old news", "e1")
    w, _ = writer(paths, cfg, _ignore)
    assert w.run_once().state == "ignored"
    assert rows(paths, "SELECT text FROM observations") == [("old news",)]
    w.now = lambda: jobs_now() + 7 * 24 * 3600 * 1000 + 1000
    housekeeping.at_drain_start(paths, w.conn, cfg, w.now)
    assert rows(paths, "SELECT text, state FROM observations") == [(None, "processed")]
    w.close()


def jobs_now() -> int:
    import time

    return int(time.time() * 1000)


def test_document_over_the_hard_budget_is_rejected(home):
    paths, cfg = configure(home)
    admit(paths, "long story", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Big", "x" * 17000 + "\n"))))
    assert w.run_once().code == "DOCUMENT_TOO_LARGE"
    assert read(paths, "profile") is None
    w.close()


def test_path_like_target_is_rejected(home):
    paths, cfg = configure(home)
    admit(paths, "note", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("project:../../etc", "X", "y\n"), applicability="project")))
    assert w.run_once().code == "INVALID_TARGET_REFERENCE"
    assert port.rejections == ["INVALID_TARGET_REFERENCE"]
    assert not os.path.exists(os.path.join(paths.root, "etc"))
    w.close()


def test_symlinked_memory_document_is_never_followed(home, tmp_path):
    paths, cfg = configure(home)
    admit(paths, "note", "e1")
    os.makedirs(paths.memory, exist_ok=True)
    outside = tmp_path / "outside.md"
    outside.write_text("# Profile\n\n## Elsewhere\nnot cm's\n")
    os.symlink(outside, paths.document("profile"))
    w, port = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "A", "b\n"))))
    outcome = w.run_once()
    assert (outcome.state, outcome.code) == ("retry", "UNSAFE_PATH")
    assert port.calls == 0
    assert outside.read_text() == "# Profile\n\n## Elsewhere\nnot cm's\n"
    w.close()


def test_receipt_that_does_not_match_the_database_is_refused(home):
    paths, cfg = configure(home)
    admit(paths, "note", "e1")
    conn = store.open_store(paths)
    with store.immediate(conn):
        job = jobs.claim(conn, cfg.data["scheduler"], jobs_now())
    for wrong in ([job.observation_ids[0] + 1], [job.observation_ids[0] - 1], []):  # after, before, none
        receipt = {"jobId": job.id, "observationIds": wrong, "documents": [], "linkTargets": [],
                   "links": [], "forgetSourceIds": [], "purgeSourceIds": [], "watermarks": []}
        with pytest.raises(CmError) as caught:
            with store.immediate(conn):
                commit.apply_receipt(conn, receipt, jobs_now())
        assert caught.value.code == "RECOVERY_CONFLICT"
    assert rows(paths, "SELECT state FROM jobs") == [("running",)]
    receipt["observationIds"] = job.observation_ids
    with store.immediate(conn):
        assert commit.apply_receipt(conn, receipt, jobs_now())
        assert not commit.apply_receipt(conn, receipt, jobs_now())  # idempotent replay
    conn.close()
    assert rows(paths, "SELECT state FROM jobs") == [("done",)]


def test_import_cannot_overwrite_a_section_a_user_turn_produced(home):
    paths, cfg = configure(home)
    admit(paths, "I am a vegetarian", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Diet", "vegetarian\n"))))
    assert w.run_once().state == "committed"
    w.close()
    admit(paths, "Imported notes say: eats fish", "i1", source="document_import", batch=None)

    def overwrite(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), put("profile", "Diet", "pescatarian\n", section=ref)))

    w, port = writer(paths, cfg, overwrite)
    w.force = True
    assert w.run_once().code == "UNAUTHORIZED_IMPORT_OVERWRITE"
    assert "vegetarian" in read(paths, "profile")
    w.close()


def test_expired_lease_reclaim_counts_as_a_recovery(home):
    paths, cfg = configure(home)
    admit(paths, "note", "e1")
    conn = store.open_store(paths)
    now = jobs_now()
    with store.immediate(conn):
        first = jobs.claim(conn, cfg.data["scheduler"], now)
    with store.immediate(conn):
        assert jobs.claim(conn, cfg.data["scheduler"], now + 1000) is None  # live lease: serialised
        again = jobs.claim(conn, cfg.data["scheduler"], now + cfg.data["scheduler"]["leaseMs"] + 1)
    assert again.id == first.id and again.generation == first.generation + 1 and again.retries == 1
    assert again.token != first.token
    with pytest.raises(CmError) as caught:
        with store.immediate(conn):
            jobs.assert_lease(conn, first, now + cfg.data["scheduler"]["leaseMs"] + 2)
    assert caught.value.code == "STALE_LEASE"
    conn.close()
