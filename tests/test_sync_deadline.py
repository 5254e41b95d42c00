"""One automatic sync has an overall deadline (``sync.autoDeadlineSeconds``): a remote that accepts
the connection and never answers cannot hold the sync the drain started. On the deadline git's
process group is killed, the local commit stays, the failure is ``SYNC_TIMEOUT`` with its remedy
in `cm status`, and the next sync completes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from agent_support import configure_remote, policy
from conftest import hook_env, run_cm
from drain_support import start_drain
from sync_support import bare, ok, remote_log, state
from writer_support import admit

from cmrunner.core import syncstate
from cmrunner.synthetic import fakemodel

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE = 3


def _silent_server(tmp_path) -> tuple[subprocess.Popen, int, str]:
    port_file, events = str(tmp_path / "silent.port"), str(tmp_path / "silent.events")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "silent_server.py"), port_file, events, "120"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ends = time.monotonic() + 20
    while not os.path.exists(port_file):
        assert proc.poll() is None and time.monotonic() < ends, "the silent server did not start"
        time.sleep(0.05)
    return proc, int(open(port_file, encoding="ascii").read()), events


def _git(paths, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", syncstate.git_dir(paths), *args], capture_output=True,
                          check=True).stdout.decode()


def _events(path: str) -> list[str]:
    return open(path, encoding="ascii").read().split() if os.path.exists(path) else []


def test_an_automatic_sync_against_a_remote_that_never_answers_ends_at_its_deadline(tmp_path):
    remote = bare(tmp_path)
    home = str(tmp_path / "a")
    with fakemodel.running(str(tmp_path / "fm"), policy("remember_user_turns")) as fm:
        paths, _cfg = configure_remote(home, fm.base_url)
        ok(home, "config", "set", "sync.autoDeadlineSeconds", str(DEADLINE))
        ok(home, "sync", "init", remote)
        before = state(home)["last"]["at"]
        server, port, events = _silent_server(tmp_path)
        try:
            # The user's remote now hangs: it takes the connection and never says a word.
            _git(paths, "remote", "set-url", "origin", f"git://127.0.0.1:{port}/memory.git")
            admit(paths, "I keep my dotfiles in a bare repository.", "e1", batch="b1")
            drain = start_drain(home, hook_env(CM_TEST_DRAIN_LINGER_MS="0"))
            assert drain.wait(timeout=120) == 0, drain.stderr.read()
            drained = time.monotonic()
            # Without the overall deadline only git's per-step limit (60 s) would end it.
            while state(home)["last"]["at"] == before:
                assert time.monotonic() - drained < 40, "the automatic sync did not end by its deadline"
                time.sleep(0.2)
            last = state(home)["last"]
            assert last["outcome"] == "failed" and last["code"] == "SYNC_TIMEOUT", last
            assert f"deadline of {DEADLINE} s" in last["detail"]
            assert "accepted" in _events(events), "git never reached the silent remote"
            ends = time.monotonic() + 10
            while _events(events).count("closed") < _events(events).count("accepted"):
                assert time.monotonic() < ends, "a git process still holds the connection: its group was not killed"
                time.sleep(0.1)
        finally:
            server.kill()
            server.wait(timeout=10)
        text = open(paths.document("profile"), encoding="utf-8").read()
        assert "bare repository" in text
        # The local commit stays: the receipt's commit is HEAD of the sync repository.
        assert "receipt: " in _git(paths, "log", "-1", "--format=%B") and "bare repository" in _git(
            paths, "show", "HEAD:profile.md")
        shown = ok(home, "status")
        assert "FAILED SYNC_TIMEOUT" in shown and "remedy: nothing to do: cm retries at the next commit" in shown
        # Nothing half-written: the repository is whole, and the next sync completes and pushes.
        subprocess.run(["git", "--git-dir", syncstate.git_dir(paths), "fsck", "--no-dangling"], check=True,
                       capture_output=True)
        _git(paths, "remote", "set-url", "origin", remote)
        said = ok(home, "sync")
        assert "pushed" in said and state(home)["last"]["outcome"] == "ok"
        assert "bare repository" in remote_log(remote)


def test_the_deadline_is_validated_config(tmp_path):
    home = str(tmp_path / "a")
    configure_remote(home, "http://127.0.0.1:9/v1")
    for bad in ("0", "3601", "\"soon\""):
        proc = run_cm(["config", "set", "sync.autoDeadlineSeconds", bad, "--home", home])
        assert proc.returncode != 0 and "CONFIG_INVALID" in proc.stderr.decode(), proc.stderr.decode()
    ok(home, "config", "set", "sync.autoDeadlineSeconds", "30")
    from cmrunner.core import config as config_mod

    assert config_mod.load(home).sync_auto_deadline_seconds == 30


def test_the_deadline_also_cuts_a_wait_for_the_memory_folders_lock(tmp_path):
    from filelock import FileLock
    from sync_support import edit, machine

    remote = bare(tmp_path)
    home, paths = machine(tmp_path, "a", "# Profile\n\n## Work\nI write Go.\n")
    ok(home, "config", "set", "sync.autoDeadlineSeconds", str(DEADLINE))
    ok(home, "sync", "init", remote)
    edit(paths, "I write Go.", "I write Go and Zig.")
    held = FileLock(paths.repo_lock)
    with held:  # a commit that holds the memory folder (its own limit is 30 s)
        began = time.monotonic()
        proc = run_cm(["sync", "--auto", "--home", home], timeout=60)
        took = time.monotonic() - began
    assert proc.returncode == 1 and took < 20, took  # not the lock's own 30 s
    last = state(home)["last"]
    assert last["code"] == "SYNC_TIMEOUT" and "waiting for the memory folder's lock" in last["detail"], last
    said = ok(home, "sync")
    assert "pushed" in said and "Go and Zig" in remote_log(remote)
