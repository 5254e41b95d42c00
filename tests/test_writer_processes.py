"""The Writer in real processes: the detached drain, `cm flush`, `cm retry`, and 8 racing drains."""

from __future__ import annotations

import json
import subprocess

from conftest import run_cm
from drain_support import MIXED, TEMPLATES, check_end_state, drain_env, start_drain, transaction_dirs, write_script
from writer_support import admit, configure, rows


def test_drain_commits_every_sealed_batch(home, tmp_path):
    paths, _cfg = configure(home)
    ids = [admit(paths, f"fact {i}", f"e{i}", batch=f"b{i}") for i in range(5)]
    script = write_script(str(tmp_path), TEMPLATES)
    drain = start_drain(home, drain_env(script, str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    check_end_state(paths, receipts=5)
    profile = open(paths.document("profile")).read()
    assert all(profile.count(f"## Fact {i}\n") == 1 for i in ids)
    assert rows(paths, "SELECT COUNT(*) FROM drain_lease") == [(0,)]


def test_flush_processes_in_the_foreground_and_exits_by_the_rules(home, tmp_path):
    paths, _cfg = configure(home)
    for i in range(4):  # the 4th template cites unknown evidence: it cannot succeed
        admit(paths, f"relay {i}", f"r{i}", source="mcp_user_submission", batch=None)
    script = write_script(str(tmp_path), MIXED)
    env = drain_env(script, str(tmp_path / "calls"))
    # relay observations are batched by thresholds; flush makes them ready now
    proc = run_cm(["flush"], env=env, timeout=120)
    out = proc.stdout.decode()
    assert "job " in out and "committed" in out
    assert "memory changed: preferences / Pref 1 added; profile / Fact 1 added" in out  # in the user's terms
    assert proc.returncode == 0, (out, proc.stderr)
    again = run_cm(["flush"], env=env, timeout=120).stdout.decode()
    assert "nothing was kept, because nothing was waiting to be processed" in again
    good = rows(paths, "SELECT COUNT(*) FROM observations WHERE state = 'processed'")[0][0]
    assert good == 4  # one batch of four relay expressions, first template applies


def test_flush_exits_1_while_work_waits_and_retry_revives(home, tmp_path):
    paths, _cfg = configure(home)
    oid = admit(paths, "unlucky", "e1", batch="b1")
    bad = {"decisions": [MIXED["decisions"][3]]}
    env = drain_env(write_script(str(tmp_path), bad), str(tmp_path / "calls"))
    proc = run_cm(["flush"], env=env, timeout=120)
    assert proc.returncode == 1
    assert "INVALID_EVIDENCE_REFERENCE" in proc.stdout.decode()
    assert "incomplete" in proc.stderr.decode()
    assert "nothing was kept, because no job finished" in proc.stdout.decode()
    conn = __import__("sqlite3").connect(paths.db)
    conn.execute("UPDATE jobs SET state = 'dead', issue = 'RECOVERY_BUDGET_EXHAUSTED'")
    conn.execute("UPDATE observations SET state = 'dead'")
    conn.commit()
    conn.close()
    failed = run_cm(["flush"], env=env, timeout=120)
    assert failed.returncode == 1
    assert "nothing was kept: the work left failed (1 item)" in failed.stdout.decode()  # never "nothing was waiting"
    job_id = rows(paths, "SELECT id FROM jobs")[0][0]
    good_env = drain_env(write_script(str(tmp_path), TEMPLATES), str(tmp_path / "calls"))
    revived = run_cm(["retry", job_id], env=good_env)
    assert revived.returncode == 0, revived.stderr
    assert run_cm(["flush"], env=good_env, timeout=120).returncode == 0
    assert rows(paths, "SELECT state FROM observations WHERE id = ?", (oid,)) == [("processed",)]
    assert rows(paths, "SELECT id, state FROM jobs") == [(job_id, "done")]
    unknown = run_cm(["retry", "nope"], env=good_env)
    assert unknown.returncode == 1 and unknown.stderr.decode().startswith("cm: UNKNOWN_JOB: ")


def test_flush_without_a_model_says_so(home):
    paths, _cfg = configure(home)
    admit(paths, "waiting for a model", "e1")
    proc = run_cm(["flush"])
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("cm: UNCONFIGURED: ")


def test_eight_drains_started_together_commit_each_job_once(home, tmp_path):
    paths, _cfg = configure(home)
    for i in range(12):
        admit(paths, f"fact {i}", f"e{i}", batch=f"b{i}")
    script = write_script(str(tmp_path), TEMPLATES)
    calls = str(tmp_path / "calls")
    drains = [start_drain(home, drain_env(script, calls)) for _ in range(8)]
    for drain in drains:
        assert drain.wait(timeout=120) == 0, drain.stderr.read()
    for _ in range(3):  # a drain that lost the lease race leaves work to the next one
        if not rows(paths, "SELECT COUNT(*) FROM observations WHERE state != 'processed'")[0][0]:
            break
        assert start_drain(home, drain_env(script, calls)).wait(timeout=120) == 0
    check_end_state(paths, receipts=12)
    assert transaction_dirs(paths) == []
    job_calls = open(calls).read().split()
    assert len(job_calls) == len(set(job_calls)) == 12, "each job reached the model exactly once"
    profile = open(paths.document("profile")).read()
    assert profile.count("## Fact ") == 12
    assert json.loads(json.dumps(rows(paths, "SELECT COUNT(*) FROM observations WHERE state = 'processed'"))) == [[12]]


def test_status_counts_jobs_after_work(home, tmp_path):
    paths, _cfg = configure(home)
    admit(paths, "fact", "e1", batch="b1")
    drain = start_drain(home, drain_env(write_script(str(tmp_path), TEMPLATES), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0
    report = json.loads(subprocess.run([__import__("conftest").CM, "status", "--json"], capture_output=True,
                                       env=drain_env("", "")).stdout)
    assert report["jobs"] == {"done": 1} and report["observations"] == {"processed": 1}


def test_flush_says_nothing_was_kept_when_the_memory_agent_ignores_it(home, tmp_path):
    paths, _cfg = configure(home)
    admit(paths, "just chatting", "e1", batch="b1")
    ignore = {"decisions": [MIXED["decisions"][1]]}
    proc = run_cm(["flush"], env=drain_env(write_script(str(tmp_path), ignore), str(tmp_path / "calls")), timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "nothing was kept, because the Memory Agent found nothing in it to remember or change" in out
    assert "memory changed" not in out


def test_flush_reports_an_addition_a_change_and_a_removal_in_the_users_terms(home, tmp_path):
    """Issue 36, a removal reported end to end: put, correct, then forget one section, each through
    a real `cm flush` (the scripted Memory Agent of ``history_support``)."""
    from history_support import SAID, SCRIPT

    paths, _cfg = configure(home)
    env = drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls"))
    said = []
    for i, text in enumerate(SAID, start=1):
        admit(paths, text, f"e{i}", batch=f"b{i}")
        proc = run_cm(["flush"], env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        said += [line for line in proc.stdout.decode().splitlines() if line.startswith(("memory changed", "nothing"))]
    assert said == ["memory changed: preferences / Indentation added",
                    "memory changed: preferences / Indentation changed",
                    "memory changed: preferences / Indentation removed"]
    assert "## Indentation" not in open(paths.document("preferences")).read()
