"""The agent-CLI runtime when its job's lease is lost mid-attempt (issue 33): the CLI's whole
process group is killed, nothing is committed and the job stays with whoever took it.

A Codex-shaped session through the real `cm hook codex` makes one job; a real drain runs it with
`remote.agentPath` naming a stand-in CLI (a Python script, no model) that puts a child of its own
in its process group, says where it is, and then blocks without ever submitting. The test takes
the lease over exactly as a re-claim does (``jobstore.fence``: a fresh token, the next generation,
a live expiry) while the stand-in blocks. The runtime notices at its next lease poll
(``runtime.LEASE_POLL``) and ends the attempt ``STALE_LEASE``; the Writer records nothing on a
job it no longer holds (writer.py's contract), so the job row is the taker's, untouched.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env, settle

from cmrunner.core import jobstore
from cmrunner.synthetic import codexplay

pytestmark = pytest.mark.timeout(240)

STANDIN = """\
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])
with open(WHERE + '.tmp', 'w') as out:
    json.dump({'group': os.getpgid(0), 'cli': os.getpid(), 'child': child.pid}, out)
os.rename(WHERE + '.tmp', WHERE)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _group_alive(group: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                members.append(int(entry))
    return members


def _wait(check, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _take_over(home: str) -> tuple[str, str, int]:
    """Re-claim the running job the way ``jobs.claim`` does after an expiry: ``jobstore.fence``."""
    conn = sqlite3.connect(os.path.join(home, "data", "runtime.sqlite"), timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        (job_id, retries), = conn.execute("SELECT id, retries FROM jobs WHERE state = 'running'").fetchall()
        now = int(time.time() * 1000)
        token = os.urandom(16).hex()
        jobstore.fence(conn, job_id, token, now + 3_600_000, retries, now)
        conn.execute("COMMIT")
        (generation,), = conn.execute("SELECT generation FROM jobs WHERE id = ?", (job_id,)).fetchall()
    finally:
        conn.close()
    return job_id, token, generation


def test_a_lost_lease_kills_the_cli_group_and_commits_nothing(home, tmp_path):
    where = tmp_path / "standin.json"
    cli = tmp_path / "claude-blocks"
    cli.write_text(f"#!{sys.executable}\nimport json, os, subprocess, sys, time\nWHERE = {json.dumps(str(where))}\n"
                   f"{STANDIN}")
    cli.chmod(0o755)
    env = hook_env()
    done = subprocess.run([CM, "config", "init", "--home", home, "--agent", "claude-code", "--agent-path", str(cli),
                           "--skip-check"],
                          env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Only the lease can end this attempt early: the deadline is far beyond the test's patience.
    subprocess.run([CM, "config", "set", "--home", home, "remote.deadlineMs", "900000"], env=env,
                   capture_output=True, timeout=60, check=True)
    work = tmp_path / "work"
    work.mkdir()
    session = codexplay.Session(str(tmp_path), "s1", home, str(work))
    session.start()
    session.turn(1, "Remember that my editor is zed-5531.")
    session.end()
    flush = subprocess.Popen([CM, "flush", "--home", home], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    standin: dict = {}
    try:
        assert _wait(where.exists, 120), "the drain never started the stand-in CLI"
        standin = json.loads(where.read_text())
        assert standin["group"] == standin["cli"]  # the runtime made the CLI a group leader
        assert _alive(standin["child"]) and _alive(standin["cli"])
        job_id, token, generation = _take_over(home)
        # The runtime polls the lease every LEASE_POLL (2 s) and kills the group with a 2 s grace;
        # 60 s is only how long the test waits for it before calling it a failure.
        gone = _wait(lambda: not _group_alive(standin["group"]), 60)
        assert gone, f"the CLI's process group outlived the lost lease: {_group_alive(standin['group'])}"
        out, err = flush.communicate(timeout=120)
    finally:
        if flush.poll() is None:
            flush.kill()
            flush.wait(10)
        if standin and _group_alive(standin["group"]):
            os.killpg(standin["group"], signal.SIGKILL)  # this test's own stand-in, after a failure
    assert "Traceback" not in out + err
    # Nothing committed, and nothing recorded on a job the drain no longer holds: it is the taker's.
    assert not list((Path(home) / "data" / "memory").glob("*.md"))
    rows = db_rows(home, "SELECT id, state, token, generation, issue, failure FROM jobs")
    assert rows == [(job_id, "running", token, generation, None, None)], rows
    # The attempt's ledger row says why it ended.
    assert db_rows(home, "SELECT api, outcome FROM ledger") == [("agent-cli", "STALE_LEASE")]
    settle(home)
