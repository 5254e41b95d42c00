"""A failed sync is retried later, and "later" is exact: the next drain that publishes a commit,
or any drain that exits ``SYNC_RETRY_MS`` (5 minutes) or more after the failure, even with nothing
to commit, starts a background `cm sync`; `cm sync` retries at once. There is no timer."""

from __future__ import annotations

import json
import os
import subprocess
import time

from drain_support import drain_env, start_drain, write_script
from history_support import SCRIPT
from sync_support import bare, cm, edit, machine, ok, state
from test_sync import A

from cmrunner.core import syncstate
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import drain


def _fail_a_sync(tmp_path) -> tuple[str, str, DataPaths]:
    remote = bare(tmp_path)
    home, paths = machine(tmp_path, "a", A)
    ok(home, "sync", "init", remote)
    os.rename(remote, remote + ".away")
    edit(paths, "vim", "neovim")
    proc = cm(home, "sync")
    assert proc.returncode == 1 and "cm: SYNC_REMOTE_UNREACHABLE: " in proc.stderr.decode()
    os.rename(remote + ".away", remote)  # reachable again; nothing has retried yet
    assert state(home)["last"]["code"] == "SYNC_REMOTE_UNREACHABLE"
    return remote, home, paths


def _age_failure(paths: DataPaths, by_ms: int) -> None:
    """Date the recorded failure ``by_ms`` back, as if that much time had passed since."""
    path = syncstate.state_path(paths)
    with open(path, encoding="utf-8") as f:
        found = json.load(f)
    found["last"]["at"] -= by_ms
    with open(path, "w", encoding="utf-8") as f:
        json.dump(found, f)


def _tip(remote: str) -> str:
    return subprocess.run(["git", "-C", remote, "show", "main:profile.md"], capture_output=True,
                          check=True).stdout.decode()


def test_a_drain_after_the_retry_interval_retries_a_failed_sync_with_nothing_to_commit(tmp_path):
    remote, home, paths = _fail_a_sync(tmp_path)
    _age_failure(paths, drain.SYNC_RETRY_MS + 1_000)
    failed_at = state(home)["last"]["at"]
    proc = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert not os.path.exists(tmp_path / "calls")  # nothing was queued: no model call, no commit
    deadline = time.monotonic() + 60
    while state(home)["last"]["at"] == failed_at:
        assert time.monotonic() < deadline, "no background sync after the drain"
        time.sleep(0.2)
    last = state(home)["last"]
    assert last["outcome"] == "ok" and last["code"] is None, last
    assert "neovim" in _tip(remote) and state(home)["ahead"] == 0


def test_a_drain_sooner_than_the_retry_interval_starts_no_sync(tmp_path):
    _remote, home, paths = _fail_a_sync(tmp_path)
    # Nothing published, the failure younger than SYNC_RETRY_MS: not due (the decision itself,
    # which would otherwise start a real background sync).
    assert drain.start_sync(paths, home, []) is False
    _age_failure(paths, drain.SYNC_RETRY_MS - 60_000)
    assert drain.start_sync(paths, home, []) is False
    assert state(home)["last"]["code"] == "SYNC_REMOTE_UNREACHABLE"


def test_cm_sync_retries_at_once(tmp_path):
    remote, home, _paths = _fail_a_sync(tmp_path)
    ok(home, "sync")
    assert state(home)["last"]["outcome"] == "ok" and "neovim" in _tip(remote)
