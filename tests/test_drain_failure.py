"""The drain never dies silently: an unexpected failure of the environment (here a disk error: a
failure a job provokes by itself is set aside instead, see test_poison.py) in a real drain (and
in `cm flush`) is recorded for `cm status`, gives the held job back to retry, frees the drain lease, and leaves a
private log with no user text. A later clean drain marks the failure resolved.

The fault is injected only into the test's own subprocess: a ``sitecustomize`` on its PYTHONPATH
replaces one Writer method with one that raises (production code reads no test variable).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import textwrap
import time

from agent_support import configure_remote, policy
from conftest import CM, db_rows, hook_env, run_cm
from drain_support import TEMPLATES, drain_env, write_script
from writer_support import admit, configure

from cmrunner.core import config as config_mod, drainfailures, store
from cmrunner.synthetic import fakemodel
from cmrunner.writer_proc import jobs

TEXT = "I keep my dotfiles in a bare git repo, marker-user-text-5150."
MARKER = "marker-exception-message-5150"


def _crashing_env(tmp_path) -> dict[str, str]:
    site = tmp_path / "crash-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        from cmrunner.writer_proc import writer

        def _snapshot(self, job):
            raise OSError(5, "{MARKER}: " + self._sources(job)[0].text)

        writer.Writer._snapshot = _snapshot
    """))
    return hook_env(PYTHONPATH=str(site), CM_TEST_DRAIN_LINGER_MS="0")


def _job(home: str) -> tuple:
    return db_rows(home, "SELECT id, state, issue, retries FROM jobs")[0]


def _assert_private_log_without_user_text(home: str) -> str:
    path = json.loads(run_cm(["status", "--json"]).stdout)["paths"]["log"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    text = open(path, encoding="utf-8").read()
    assert "marker-" not in text, "the log holds no user text and no exception message"
    return text


def test_a_crashing_drain_is_visible_and_strands_nothing(home, tmp_path):
    paths, _cfg = configure_remote(home, "http://127.0.0.1:9/v1")  # never contacted: the crash comes first
    admit(paths, TEXT, "e1")
    env = _crashing_env(tmp_path)

    drain = subprocess.run([CM, "session-drain", "--home", home], env=env, capture_output=True, timeout=60)
    assert drain.returncode == 1
    assert drain.stderr.decode().startswith("cm: DRAIN_CRASHED: ") and drain.stderr.count(b"\n") == 1
    assert b"Traceback" not in drain.stderr and b"marker-" not in drain.stderr

    assert db_rows(home, "SELECT * FROM drain_lease") == [], "the lease is free"
    job_id, state, issue, retries = _job(home)
    assert (state, issue, retries) == ("retry", "DRAIN_CRASHED", 1), "the held job went back to retry"
    assert db_rows(home, "SELECT state FROM observations") == [("claimed",)]

    report = json.loads(run_cm(["status", "--json"]).stdout)
    failure = report["lastDrainFailure"]
    assert (failure["process"], failure["code"], failure["exception"], failure["message"], failure["jobId"],
            failure["resolvedAt"]) == ("drain", "DRAIN_CRASHED", "OSError", None, job_id, None)
    assert failure["frames"][-1].startswith("sitecustomize.py:") and failure["frames"][-1].endswith(":_snapshot")
    assert any(f.startswith("cmrunner/writer_proc/writer.py:") and f.endswith(":_attempt") for f in failure["frames"])
    assert str(tmp_path) not in json.dumps(failure), "frames carry no user paths"
    [job] = report["jobList"]["jobs"]
    assert (job["id"], job["state"], job["issue"]) == (job_id[:12], "retry", "DRAIN_CRASHED")
    text = run_cm(["status"]).stdout.decode()
    assert "last drain failure: " in text and "in drain: DRAIN_CRASHED (OSError) at sitecustomize.py:" in text
    assert f"job {job_id[:12]} went back to retry" in text
    assert "marker-" not in text + json.dumps(report)

    log = _assert_private_log_without_user_text(home)
    assert f"job {job_id[:12]} claimed" in log and "drain failed: DRAIN_CRASHED (OSError)" in log
    assert f"job {job_id[:12]} given back to retry (DRAIN_CRASHED)" in log

    # The same in the foreground: `cm flush` waits through the backoff, crashes on the same job,
    # prints one line, and leaves the same visible, releasable state.
    flush = subprocess.run([CM, "flush"], env=env, capture_output=True, timeout=60)
    assert flush.returncode == 1
    assert flush.stderr.decode().startswith("cm: DRAIN_CRASHED: the flush stopped") and flush.stderr.count(b"\n") == 1
    assert b"Traceback" not in flush.stderr + flush.stdout and b"marker-" not in flush.stderr + flush.stdout
    assert db_rows(home, "SELECT * FROM drain_lease") == []
    assert _job(home)[1:] == ("retry", "DRAIN_CRASHED", 2)
    assert json.loads(run_cm(["status", "--json"]).stdout)["lastDrainFailure"]["process"] == "flush"
    _assert_private_log_without_user_text(home)

    # Without the fault, against the synthetic model, the job commits and the failure is behind us.
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        data = config_mod.load(home).data
        data["remote"]["baseUrl"] = fm.base_url
        config_mod.save(home, data)
        clean = run_cm(["flush"], env=hook_env(CM_TEST_DRAIN_LINGER_MS="0"), timeout=60)
    assert clean.returncode == 0, clean.stderr
    assert _job(home)[1] == "done"
    failure = json.loads(run_cm(["status", "--json"]).stdout)["lastDrainFailure"]
    assert failure["code"] == "DRAIN_CRASHED" and failure["resolvedAt"] is not None
    assert "a later drain finished cleanly" in run_cm(["status"]).stdout.decode()
    assert f"job {job_id[:12]} committed" in _assert_private_log_without_user_text(home)


def test_an_unexpected_error_outside_a_job_is_recorded_too(home, tmp_path):
    """A fault in the inbox consumers (no job held) still leaves a record and a free lease."""
    configure_remote(home, "http://127.0.0.1:9/v1")
    site = tmp_path / "crash-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(f"""
        from cmrunner.capture import pi_inbox

        def runnable(self, conn):
            raise KeyError("{MARKER}")

        pi_inbox.PiInbox.runnable = runnable
        pi_inbox.PiInbox.step = lambda self, conn: runnable(self, conn)
    """))
    env = hook_env(PYTHONPATH=str(site), CM_TEST_DRAIN_LINGER_MS="0")
    drain = subprocess.run([CM, "session-drain", "--home", home], env=env, capture_output=True, timeout=60)
    assert drain.returncode == 1 and b"Traceback" not in drain.stderr and b"marker-" not in drain.stderr
    assert db_rows(home, "SELECT * FROM drain_lease") == []
    failure = json.loads(run_cm(["status", "--json"]).stdout)["lastDrainFailure"]
    assert (failure["code"], failure["exception"], failure["jobId"]) == ("DRAIN_CRASHED", "KeyError", None)
    assert failure["frames"][-1].startswith("sitecustomize.py:")
    _assert_private_log_without_user_text(home)


def test_a_failure_stays_open_while_its_job_still_waits_and_resolves_once_nothing_does(home, tmp_path):
    paths, cfg = configure(home)
    admit(paths, "I use tabs in Go.", "e1")
    conn = store.open_store(paths)
    now = int(time.time() * 1000)
    with store.immediate(conn):  # a crash gave the job back; its backoff ends beyond the drain's wait bound
        job = jobs.claim(conn, cfg.scheduler, now)
        assert job is not None
        assert jobs.fail(conn, job, "UNAVAILABLE", now, retry_after_ms=600_000)[0] == "retry"
        drainfailures.record(conn, "drain", RuntimeError("boom"), job.id)
    conn.close()
    env = drain_env(write_script(str(tmp_path), TEMPLATES), str(tmp_path / "calls"))

    def drain_then_failure() -> dict:
        drain = subprocess.run([CM, "session-drain", "--home", home], env=env, capture_output=True, timeout=60)
        assert drain.returncode == 0, drain.stderr
        return json.loads(run_cm(["status", "--json"]).stdout)["lastDrainFailure"]

    assert drain_then_failure()["resolvedAt"] is None, "work still waits: the failure is not behind us"
    assert _job(home)[1] == "retry"
    ready = sqlite3.connect(paths.db)
    ready.execute("UPDATE jobs SET available = 0")  # the backoff ends, as time would
    ready.commit()
    ready.close()
    assert drain_then_failure()["resolvedAt"] is not None
    assert _job(home)[1] == "done"
