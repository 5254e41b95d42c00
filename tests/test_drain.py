"""The drain: a real detached single-instance process per data root."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time

from conftest import CM, Transcript, db_rows, drain_pids, event, hook_env, run_hook, wait_no_drain

from cmrunner.core import drainlease, identity, store
from cmrunner.core.home import DataPaths


def _paths(home: str) -> DataPaths:
    return DataPaths(os.path.join(home, "data"))


def _lease(home: str) -> list[tuple]:
    try:
        return db_rows(home, "SELECT pid, state FROM drain_lease")
    except sqlite3.OperationalError:  # the drain is still creating the schema
        return [("schema not ready", None)]


def _set_lease(home: str, who: identity.Identity) -> None:
    conn = store.open_store(_paths(home))
    with store.immediate(conn):
        conn.execute(
            "INSERT OR REPLACE INTO drain_lease VALUES (1, ?, ?, ?, 'held', 0)", (who.boot_id, who.pid, who.starttime)
        )
    conn.close()


def _drain(home: str, linger_ms: int = 0) -> subprocess.Popen:
    env = hook_env(CM_TEST_DRAIN_LINGER_MS=str(linger_ms))
    return subprocess.Popen([CM, "session-drain", "--home", home], env=env)


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_second_drain_exits_while_a_live_one_holds_the_lease(home):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        _set_lease(home, identity.of(sleeper.pid))
        drain = _drain(home, linger_ms=5000)
        assert drain.wait(timeout=10) == 0
        assert _lease(home) == [(sleeper.pid, "held")]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_dead_holder_is_taken_over_at_once(home):
    sleeper = subprocess.Popen(["true"])
    sleeper.wait()
    dead = identity.Identity(identity.boot_id(), sleeper.pid, 1)
    _set_lease(home, dead)
    started = time.monotonic()
    drain = _drain(home, linger_ms=3000)
    try:
        _wait_for(lambda: _lease(home) == [(drain.pid, "held")])
        assert time.monotonic() - started < 3.0
    finally:
        drain.send_signal(signal.SIGTERM)
        assert drain.wait(timeout=10) == 0
    assert _lease(home) == []


def test_pid_reused_with_another_start_time_is_not_the_holder(home):
    me = identity.current()
    _set_lease(home, identity.Identity(me.boot_id, me.pid, me.starttime + 1))
    drain = _drain(home, linger_ms=0)
    assert drain.wait(timeout=10) == 0
    assert _lease(home) == []  # taken over, then released when idle


def test_drain_exits_and_releases_when_idle(home):
    drain = _drain(home, linger_ms=0)
    assert drain.wait(timeout=10) == 0
    assert _lease(home) == []


def test_sigterm_stops_the_drain_and_frees_the_lease(home):
    drain = _drain(home, linger_ms=30000)
    _wait_for(lambda: _lease(home) == [(drain.pid, "held")])
    drain.send_signal(signal.SIGTERM)
    assert drain.wait(timeout=10) == 0
    assert _lease(home) == []


def test_release_is_refused_while_work_remains(home):
    conn = store.open_store(_paths(home))
    me = identity.current()
    with store.immediate(conn):
        assert drainlease.acquire(conn, me)
        assert not drainlease.release_if_idle(conn, me, lambda _c: True)
    assert _lease(home) == [(me.pid, "held")]
    with store.immediate(conn):
        assert drainlease.release_if_idle(conn, me, lambda _c: False)
    conn.close()
    assert _lease(home) == []


def test_hook_spawns_a_detached_drain_that_inherits_nothing(home, tmp_path, workdir):
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # like a host's pipe leaking into the hook as fd >= 3
    try:
        started = time.monotonic()
        proc = subprocess.run(
            [CM, "hook", "codex", "--home", home],
            input=__import__("json").dumps(event("SessionStart", transcript, workdir, source="startup")).encode(),
            capture_output=True, env=hook_env(CM_TEST_DRAIN_LINGER_MS="4000"), timeout=30,
            close_fds=False,
        )
        elapsed = time.monotonic() - started
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 3.0, "the hook must not wait for its drain (stdout reaches EOF at once)"
    _wait_for(lambda: len(drain_pids(home)) == 1)
    pid = drain_pids(home)[0]
    assert os.getsid(pid) == pid, "the drain leads its own session"
    fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert fds[0] == fds[1] == fds[2] == "/dev/null"
    inherited_pipes = [t for fd, t in fds.items() if t.startswith("pipe:")]
    assert inherited_pipes == [], "no host pipe may leak into the drain"
    os.set_blocking(read_end, False)
    try:
        assert os.read(read_end, 1) == b""  # every writer closed: no one holds the leaked pipe
    finally:
        os.close(read_end)
    assert _lease(home)[0][0] == pid


def test_concurrent_hooks_keep_exactly_one_drain_alive(home, tmp_path, workdir):
    env = hook_env(CM_TEST_DRAIN_LINGER_MS="1500")
    transcripts = [Transcript(str(tmp_path / f"t{i}.jsonl"), f"s-{i}") for i in range(6)]
    seen: set[int] = set()
    most = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            pids = drain_pids(home)
            most[0] = max(most[0], len(pids))
            seen.update(pids)
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        procs = [
            subprocess.Popen([CM, "hook", "codex", "--home", home], stdin=subprocess.PIPE, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for _ in transcripts
        ]
        for proc, t in zip(procs, transcripts):
            proc.stdin.write(__import__("json").dumps(event("SessionStart", t, workdir, source="startup")).encode())
            proc.stdin.close()
        for proc in procs:
            assert proc.wait(timeout=30) == 0, proc.stderr.read()
        wait_no_drain(home)
    finally:
        stop.set()
        watcher.join()
    assert most[0] == 1
    assert len(seen) == 1, "one burst of events spawns one drain"
    assert len(db_rows(home, "SELECT session_id FROM codex_progress")) == 6  # all six consumed by that drain


def test_ephemeral_and_ignored_events_spawn_no_drain(home, workdir):
    assert run_hook(home, event("PreToolUse", None, workdir, tool_name="Bash")).returncode == 0
    assert run_hook(home, event("SessionStart", None, workdir, source="startup")).returncode == 0
    assert drain_pids(home) == []
    assert _lease(home) == []


def test_drain_refuses_bad_arguments(home):
    proc = subprocess.run([CM, "session-drain", "--bogus"], capture_output=True, env=hook_env(), timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("cm: INVALID_ARGUMENTS: ")


def test_lease_table_accepts_one_row_only(home):
    conn = store.open_store(_paths(home))
    try:
        conn.execute("INSERT INTO drain_lease VALUES (1, 'b', 1, 1, 'held', 0)")
        try:
            conn.execute("INSERT INTO drain_lease VALUES (2, 'b', 2, 2, 'held', 0)")
        except sqlite3.IntegrityError:
            pass
        else:
            raise AssertionError("a second lease row was accepted")
    finally:
        conn.close()
