"""One bad input never stops the memory (issue 22).

Input cm can classify is refused at admission with a code naming the field; a row that is already
queued and fails to be consumed is set aside with a stable code, and the rest is committed by the
next ``cm flush``. Everything runs as real ``cm`` subprocesses on a real store, against the
loopback synthetic model.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from agent_support import configure_remote, policy
from conftest import db_rows, hook_env, run_cm

from cmrunner.capture import pi_inbox
from cmrunner.core import config as config_mod, identity, store
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel

REPRODUCER = (b'{"version":1,"sessionId":"p1","eventId":"e1","event":"message_end","cwd":"/tmp",'
              b'"payload":{"role":"user","text":"hello there","timestamp":Infinity}}')


@contextmanager
def lease_held(home: str) -> Iterator[None]:
    """A live stand-in holds the drain lease, so what is admitted stays queued until it ends."""
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        conn = store.open_store(DataPaths(config_mod.load(home).data_root))
        holder = identity.of(sleeper.pid)
        with store.immediate(conn):
            conn.execute("INSERT OR REPLACE INTO drain_lease VALUES (1, ?, ?, ?, 'held', 0)",
                         (holder.boot_id, holder.pid, holder.starttime))
        conn.close()
        yield
    finally:
        sleeper.kill()
        sleeper.wait()


def send_pi(home: str, session: str, event_id: str, name: str, payload: dict) -> None:
    event = {"version": 1, "sessionId": session, "eventId": event_id, "event": name, "cwd": "/tmp",
             "hostInstance": "pi:test:1", "payload": payload}
    proc = run_cm(["capture", "--home", home], json.dumps(event).encode())
    assert proc.returncode == 0, proc.stderr


def valid_pi_session(home: str, session: str, text: str) -> None:
    """One delivered, settled user turn and a quit: a sealed batch for the Writer."""
    send_pi(home, session, "in-1", "input", {"text": text, "source": "interactive", "hasImages": False})
    send_pi(home, session, "msg-1", "message_end", {"role": "user", "text": text, "hasImages": False,
                                                   "timestamp": 1795995559356})
    send_pi(home, session, "end-1", "agent_end", {"aborted": False})
    send_pi(home, session, "quit", "session_shutdown", {"reason": "quit"})


def flush(home: str, tmp_path) -> subprocess.CompletedProcess[bytes]:
    """``cm flush`` against the synthetic model (configured for this run only)."""
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        data = config_mod.load(home).data
        data["remote"]["baseUrl"] = fm.base_url
        config_mod.save(home, data)
        return run_cm(["flush"], env=hook_env(), timeout=120)


@pytest.mark.parametrize("stamp", ["Infinity", "-Infinity", "NaN", "1e400", "1e300", "-1", "true", '"soon"'])
def test_a_timestamp_no_date_can_hold_is_refused_at_admission(home, stamp):
    configure_remote(home, "http://127.0.0.1:9/v1")
    raw = REPRODUCER.replace(b"Infinity", stamp.encode())
    proc = run_cm(["capture", "--home", home], raw)
    assert proc.returncode == 1 and proc.stdout == b""
    line = proc.stderr.decode()
    assert line.startswith("cm: INVALID_CAPTURE_INPUT: field 'payload.timestamp' ") and line.count("\n") == 1
    assert "hello there" not in line
    assert db_rows(home, "SELECT COUNT(*) FROM pi_inbox") in ([], [(0,)]), "nothing admitted (no store at all)"


def test_the_issue_reproducer_is_refused_and_a_valid_session_still_commits(home, tmp_path):
    configure_remote(home, "http://127.0.0.1:9/v1")
    refused = run_cm(["capture", "--home", home], REPRODUCER)
    assert refused.returncode == 1 and b"INVALID_CAPTURE_INPUT" in refused.stderr
    with lease_held(home):
        valid_pi_session(home, "p2", "I use helix as my editor")
    done = flush(home, tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert db_rows(home, "SELECT state FROM observations") == [("processed",)]


def _inject_poisoned_row(home: str, session: str) -> None:
    """What main's ``cm capture`` once admitted: a message whose timestamp only breaks the consumer."""
    body = ('{"cwd":"/tmp","event":"message_end","payload":{"hasImages":false,"role":"user",'
            '"text":"hello there","timestamp":Infinity}}')
    conn = store.open_store(DataPaths(config_mod.load(home).data_root))
    try:
        with store.immediate(conn):
            pi_inbox.append(conn, session, "e1", "message_end", "0" * 64, body, "global", int(time.time() * 1000),
                            user_turn=True)
    finally:
        conn.close()


def test_a_poisoned_inbox_row_is_isolated_with_its_code_and_the_rest_is_committed(home, tmp_path):
    configure_remote(home, "http://127.0.0.1:9/v1")
    with lease_held(home):
        _inject_poisoned_row(home, "pi:poisoned")
        valid_pi_session(home, "p2", "I use helix as my editor")
    done = flush(home, tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert b"Traceback" not in done.stderr + done.stdout
    assert db_rows(home, "SELECT state FROM observations") == [("processed",)]

    [(session, issue, detail)] = db_rows(home, "SELECT session_id, issue, detail FROM codex_failures")
    assert (session, issue) == ("pi:poisoned", "UNEXPECTED_FAILURE")
    assert detail.startswith("OverflowError at cmrunner/capture/pi_inbox.py:") and detail.endswith(":_iso")
    assert db_rows(home, "SELECT COUNT(*) FROM pi_inbox") == [(1,)], "set aside, not dropped"

    report = json.loads(run_cm(["status", "--json"]).stdout)
    [group] = report["problems"]["isolated"]
    assert (group["issue"], group["count"], group["detail"]) == ("UNEXPECTED_FAILURE", 1, detail)
    assert report["lastDrainFailure"] is None, "no drain stopped"
    text = run_cm(["status"]).stdout.decode()
    assert f"isolated:    1 session(s) × UNEXPECTED_FAILURE ({detail}): " in text
    assert "hello there" not in text + json.dumps(report)

    # Asking for another try reads the row once more and sets it aside again: never a loop.
    again = run_cm(["session-drain", "--home", home, "--recover-code", "all"], timeout=60)
    assert again.returncode == 0, again.stderr
    assert db_rows(home, "SELECT issue FROM codex_failures WHERE retry_requested = 0") == [("UNEXPECTED_FAILURE",)]
    nothing = run_cm(["session-drain", "--home", home, "--recover-code", "CODEX_CURSOR_CONFLICT"], timeout=60)
    assert nothing.returncode == 1 and nothing.stderr.startswith(b"cm: CODEX_RECOVERY_UNAVAILABLE: ")


def test_many_isolated_sessions_are_one_line_per_code_with_one_command(home):
    configure_remote(home, "http://127.0.0.1:9/v1")
    with lease_held(home):
        for n in range(5):
            _inject_poisoned_row(home, f"pi:poisoned-{n}")
    drained = run_cm(["session-drain", "--home", home], timeout=60)
    assert drained.returncode == 0, drained.stderr
    text = run_cm(["status"]).stdout.decode()
    isolated = [line for line in text.splitlines() if line.startswith("isolated:")]
    assert len(isolated) == 1 and isolated[0].startswith("isolated:    5 session(s) × UNEXPECTED_FAILURE")
    assert "remedy: report it and upgrade cm, then `cm session-drain --recover-code UNEXPECTED_FAILURE` (all 5)" in text


def _failing_writer_env(tmp_path, marker: str, exception: str) -> dict[str, str]:
    """A ``sitecustomize`` for the test's own subprocesses: one Writer step raises for the job
    whose evidence holds ``marker`` (production code reads no test variable)."""
    site = tmp_path / "fail-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        from cmrunner.writer_proc import writer

        _original = writer.Writer._snapshot

        def _snapshot(self, job):
            if any("{marker}" in (s.text or "") for s in self._sources(job)):
                raise {exception}("{marker}")
            return _original(self, job)

        writer.Writer._snapshot = _snapshot
    """))
    return hook_env(PYTHONPATH=str(site))


def test_a_job_that_provokes_an_unexpected_error_is_set_aside_and_the_next_commits(home, tmp_path):
    configure_remote(home, "http://127.0.0.1:9/v1")
    with lease_held(home):
        valid_pi_session(home, "p1", "marker-poison-job-9191 is what I say")
        valid_pi_session(home, "p2", "I use helix as my editor")
    env = _failing_writer_env(tmp_path, "marker-poison-job-9191", "KeyError")
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        data = config_mod.load(home).data
        data["remote"]["baseUrl"] = fm.base_url
        config_mod.save(home, data)
        done = run_cm(["flush"], env=env, timeout=120)
    # The flush is honest (a dead job is left), but it ran to the end: no DRAIN_CRASHED.
    assert done.returncode == 1 and b"DRAIN_CRASHED" not in done.stderr and b"Traceback" not in done.stderr
    assert b"marker-" not in done.stderr + done.stdout
    jobs = sorted(db_rows(home, "SELECT state, issue, diagnostic FROM jobs"), key=lambda row: row[0])
    assert [(state, issue) for state, issue, _ in jobs] == [("dead", "UNEXPECTED_FAILURE"), ("done", None)]
    diagnostic = json.loads(jobs[0][2])
    # where it surfaced in cm's own code (the injected frame is outside the package)
    assert diagnostic["unexpected"].startswith("KeyError at cmrunner/writer_proc/writer.py:")
    assert diagnostic["unexpected"].endswith(":_attempt")
    report = json.loads(run_cm(["status", "--json"]).stdout)
    assert report["lastDrainFailure"] is None
    [dead] = report["problems"]["dead"]
    assert dead["code"] == "UNEXPECTED_FAILURE" and "cm retry" in dead["remedy"]


def test_an_internal_error_at_the_hook_boundary_is_recorded_for_cm_status(home, tmp_path):
    """A real bug that still reaches INTERNAL_ERROR leaves a record, as a drain failure does."""
    configure_remote(home, "http://127.0.0.1:9/v1")
    site = tmp_path / "bug-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent("""
        from cmrunner.hooks import pi

        def validate(event):
            raise KeyError("marker-bug-7272")

        pi.validate = validate
    """))
    event = {"version": 1, "sessionId": "p1", "eventId": "e1", "event": "input", "cwd": "/tmp",
             "hostInstance": "pi:test:1", "payload": {"text": "marker-user-7272"}}
    proc = run_cm(["capture", "--home", home], json.dumps(event).encode(), env=hook_env(PYTHONPATH=str(site)))
    assert proc.returncode == 1
    assert proc.stderr.decode() == ("cm: INTERNAL_ERROR: unexpected KeyError; please report it "
                                    "(`cm status` shows where)\n")
    failure = json.loads(run_cm(["status", "--json"]).stdout)["lastDrainFailure"]
    assert (failure["process"], failure["code"], failure["exception"], failure["message"]) == \
        ("capture", "INTERNAL_ERROR", "KeyError", None)
    assert any(f.startswith("cmrunner/hooks/pi.py:") for f in failure["frames"])
    assert "marker-" not in json.dumps(failure)


def test_a_status_of_an_old_store_reads_isolations_without_their_detail(home):
    """`cm status` never migrates: a store from before m011 still shows its isolated sessions."""
    configure_remote(home, "http://127.0.0.1:9/v1")
    with lease_held(home):
        _inject_poisoned_row(home, "pi:poisoned")
    assert run_cm(["session-drain", "--home", home], timeout=60).returncode == 0
    db = DataPaths(config_mod.load(home).data_root).db
    conn = sqlite3.connect(db)
    try:  # back to the shape m010 left (SQLite ≥ 3.35 drops a column)
        conn.execute("ALTER TABLE codex_failures DROP COLUMN detail")
    finally:
        conn.close()
    from cmrunner.views import status

    conn = sqlite3.connect(db)
    try:
        [group] = status.problems(conn)["isolated"]
    finally:
        conn.close()
    assert (group["issue"], group["count"], group["detail"]) == ("UNEXPECTED_FAILURE", 1, None)
