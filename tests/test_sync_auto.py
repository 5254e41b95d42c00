"""Sync is automatic and never in the way: the drain commits what it published to git and syncs in
the background; `cm flush` with the remote unreachable still commits locally and `cm status` says so;
a pulled change is an edit like a hand edit for the Writer's CAS."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import run_cm
from drain_support import drain_env, start_drain, write_script
from history_support import SAID, SCRIPT
from sync_support import bare, edit, machine, ok, profile, remote_log, state
from writer_support import admit

from cmrunner.core import sections, syncstate
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import commit


def _git_log(paths) -> str:
    return subprocess.run(["git", "--git-dir", syncstate.git_dir(paths), "log", "--format=%an%n%B"],
                          capture_output=True, check=True).stdout.decode()


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the background sync did not finish"
        time.sleep(0.2)


def test_the_drain_commits_what_it_published_and_syncs_in_the_background(tmp_path):
    remote = bare(tmp_path)
    home, paths = machine(tmp_path, "a")
    ok(home, "sync", "init", remote)
    first = state(home)["last"]["at"]
    script = write_script(str(tmp_path), SCRIPT)
    admit(paths, SAID[0], "e1", batch="b1")
    drain = start_drain(home, drain_env(script, str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    _wait_for(lambda: state(home)["last"]["at"] != first)
    assert state(home)["last"]["outcome"] == "ok"
    log = _git_log(paths)
    receipts = [line.split(": ", 1)[1] for line in log.splitlines() if line.startswith("receipt: ")]
    assert len(receipts) == 1 and f"device: {syncstate.device_name(home)}" in log and "source: " in log
    assert "+## Indentation\n+Tabs in Go." in remote_log(remote)


def test_flush_with_the_remote_unreachable_commits_locally_and_status_says_so(tmp_path):
    remote = bare(tmp_path)
    home, paths = machine(tmp_path, "a")
    ok(home, "sync", "init", remote)
    os.rename(remote, remote + ".away")
    script = write_script(str(tmp_path), SCRIPT)
    admit(paths, SAID[0], "e1", batch="b1")
    proc = run_cm(["flush", "--home", home], env=drain_env(script, str(tmp_path / "calls")), timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "sync: not synced (SYNC_REMOTE_UNREACHABLE); the memory is committed to git locally" in proc.stderr.decode()
    assert "Tabs in Go." in open(paths.document("preferences")).read()
    assert "receipt: " in _git_log(paths)
    shown = ok(home, "status")
    assert "sync:" in shown and "FAILED SYNC_REMOTE_UNREACHABLE" in shown and "committed locally" in shown
    # what to do, not only what failed
    assert "remedy: nothing to do: cm retries at the next commit, or at the first drain 5 minutes or more" in shown
    os.rename(remote + ".away", remote)
    ok(home, "sync")
    assert "Tabs in Go." in remote_log(remote) and state(home)["last"]["outcome"] == "ok"


@pytest.mark.parametrize("kind", ["pull"])
def test_a_running_jobs_commit_sees_a_pulled_change_and_publishes_nothing(tmp_path, kind):
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", "# Profile\n\n## Work\nI write Go.\n")
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    # A job on machine b read the document (its snapshot), then a sync pulled a's edit into it.
    snapshot = {"profile": commit.read_document(paths_b, "profile")}
    edit(paths_a, "I write Go.", "I write Go and Zig.")
    ok(home_a, "sync")
    ok(home_b, "sync")
    pulled = profile(paths_b)
    assert "Go and Zig" in pulled
    changed = {"profile": sections.put_section(snapshot["profile"], None, "Pets", "A cat.\n")}
    from cmrunner.core import store

    conn = store.open_store(paths_b)
    try:
        with pytest.raises(CmError) as caught:
            commit.commit(paths_b, conn, "job-1", lambda: None, snapshot, changed,
                          {"version": 1, "id": "job-1", "jobId": "job-1", "observationIds": [], "decisions": [],
                           "documents": [], "linkTargets": [], "links": [], "forgetSourceIds": [],
                           "purgeSourceIds": [], "watermarks": []}, lambda: 0)
    finally:
        conn.close()
    assert caught.value.code == "STALE_REVISION"
    assert profile(paths_b) == pulled
