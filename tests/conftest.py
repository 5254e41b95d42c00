"""Shared fixtures: an isolated home per test, real subprocess runners, and reaping of drains.

Every test gets its own ``COMMON_MEMORY_HOME`` under ``tmp_path`` (autouse), so no test can touch
a real home. Hooks, captures and drains run as real subprocesses through the installed ``cm``
console script, exactly as a host would start them, on the session's overlay interpreter
(``support/overlay.py``): it adds only the test seams of ``support/seams.py``, which act when a
test sets one of their ``CM_TEST_*`` variables (the autouse fixture sets the drain's linger to 0).
``REAL_CM`` is the installation without any seam. Detached drains outlive their hook by design,
so every test reaps the drains of its own home afterwards (found through ``/proc``).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import overlay, seams
from support.procs import drain_pids, wait_no_drain

BIN = os.path.dirname(sys.executable)
REAL_CM = os.path.join(BIN, "cm")  # the installation exactly as a user has it: no seam can act
OVERLAY = overlay.build(os.path.join(tempfile.mkdtemp(prefix="cm-overlay-"), "venv"))
CM = OVERLAY.cm
HOST = "test:host:1"


def pytest_report_header() -> list[str]:
    return [f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}, cm at {REAL_CM} (seamed: {CM})"]


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.path.dirname(OVERLAY.root), ignore_errors=True)


def reap_drains(home: str, timeout: float = 5.0) -> None:
    """SIGKILL every drain of ``home`` by PID until none is left. A SIGKILL takes effect whatever
    the load; ``timeout`` only bounds chasing drains that hooks keep respawning."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = drain_pids(home)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def settle(home: str) -> None:
    """Let the drains the hooks spawned finish, then run one more drain in the foreground, so every
    admitted row is consumed before a test looks at the store (a loaded machine delays drains)."""
    wait_no_drain(home, timeout=30)
    proc = subprocess.run([CM, "session-drain", "--home", home], env=hook_env(), capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    wait_no_drain(home, timeout=30)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An isolated configuration home (not created yet); drains of it are reaped afterwards."""
    path = str(tmp_path / "cmhome")
    monkeypatch.setenv("COMMON_MEMORY_HOME", path)
    monkeypatch.setenv(seams.LINGER_ENV, "0")
    for name in (seams.SCRIPT_ENV, seams.CALLS_ENV, seams.FAULT_ENV, seams.TXN_FAIL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("COMMON_MEMORY_HOST_INSTANCE", raising=False)
    yield path
    reap_drains(path)


@pytest.fixture
def workdir(tmp_path: Path) -> str:
    path = tmp_path / "work"
    path.mkdir()
    return str(path)


def hook_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("COMMON_MEMORY_HOST_INSTANCE", HOST)
    env.update(extra)
    return env


def run_cm(args: list[str], stdin: bytes = b"", env: dict[str, str] | None = None,
           timeout: float = 30, cm: str = CM) -> subprocess.CompletedProcess[bytes]:
    """Run the installed ``cm`` console script as a real subprocess (``cm=REAL_CM``: without seams)."""
    return subprocess.run([cm, *args], input=stdin, capture_output=True, env=env or hook_env(), timeout=timeout)


def read_terminal(leader: int) -> str:
    """Everything a pseudo-terminal's leader still holds once its process has ended."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the follower side is closed and all was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def on_terminal(args: list[str], env: dict[str, str] | None = None, stream: str = "stdout",
                timeout: float = 30) -> tuple[subprocess.CompletedProcess[bytes], str]:
    """Run ``cm`` with ``stream`` (stdout or stderr) on a real pseudo-terminal and the other piped;
    the process, and what reached the terminal (which turns each LF into CRLF)."""
    leader, follower = pty.openpty()
    try:
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: follower}
        proc = subprocess.run([CM, *args], **streams, env=env or hook_env(), timeout=timeout)
        os.close(follower)
        follower = -1
        return proc, read_terminal(leader)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def run_cm_terminal(args: list[str], env: dict[str, str] | None = None) -> str:
    """What ``cm`` writes to a real pseudo-terminal (the terminal turns each LF into CRLF)."""
    proc, shown = on_terminal(args, env)
    assert proc.returncode == 0, proc.stderr
    return shown


def run_hook(home: str, event: dict | bytes, client: str = "codex",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    payload = event if isinstance(event, bytes) else json.dumps(event).encode()
    return run_cm(["hook", client, "--home", home], payload, env)


class Transcript:
    """A Codex-shaped rollout file that a test appends records to."""

    def __init__(self, path: str, session: str) -> None:
        self.path = path
        self.session = session
        self.append({"type": "session_meta", "payload": {"id": session, "cli_version": "0.169.0"}})

    def append(self, *records: dict, raw: bytes | None = None) -> None:
        with open(self.path, "ab") as handle:
            for record in records:
                record = {"timestamp": "2026-11-30T00:00:00.000Z", **record}
                handle.write(json.dumps(record).encode() + b"\n")
            if raw is not None:
                handle.write(raw)

    def user_turn(self, turn: str, text: str) -> None:
        """A turn starts and its user message is written (as Codex 0.169 does by Stop time)."""
        self.append(
            {"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}},
            {"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
                "type": "UserMessage", "id": f"u-{turn}", "content": [{"type": "text", "text": text}]}}},
        )

    def reply(self, turn: str, text: str, complete: bool = True) -> None:
        self.append({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn, "item": {
            "type": "AgentMessage", "id": f"a-{turn}", "content": [{"type": "Text", "text": text}]}}})
        if complete:
            self.complete(turn)

    def complete(self, turn: str) -> None:
        self.append({"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn}})


@pytest.fixture
def transcript(tmp_path: Path) -> Transcript:
    return Transcript(str(tmp_path / "rollout.jsonl"), "sess-0001")


def event(name: str, transcript: Transcript | None, cwd: str, **fields: object) -> dict:
    body: dict = {
        "session_id": transcript.session if transcript else "sess-0001",
        "transcript_path": transcript.path if transcript else None,
        "cwd": cwd,
        "hook_event_name": name,
    }
    body.update(fields)
    return body


def db_rows(home: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Query the home's runtime store read-only ([] when it does not exist yet)."""
    path = os.path.join(home, "data", "runtime.sqlite")
    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def table_counts(home: str) -> dict[str, int]:
    tables = ("codex_inbox", "codex_candidates", "codex_cursors", "host_activations", "host_snapshots",
              "admitted_events", "pi_inbox", "sessions")
    return {t: (db_rows(home, f"SELECT COUNT(*) FROM {t}") or [(0,)])[0][0] for t in tables}


@pytest.fixture
def quiet_drain(home: str) -> Iterator[Callable[[], None]]:
    """A live stand-in process holds the drain lease, so hooks admit without a drain consuming
    their rows: tests can then inspect exactly what a hook admitted. Uses the real lease rule.
    Yields ``release``: the stand-in exits, so the next drain (or ``cm flush``) takes the lease of
    a dead holder at once."""
    from cmrunner.core import config as config_mod, identity, store
    from cmrunner.core.home import DataPaths

    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        paths = DataPaths(config_mod.load(home).data_root)
        conn = store.open_store(paths)
        holder = identity.of(sleeper.pid)
        with store.immediate(conn):
            conn.execute("INSERT OR REPLACE INTO drain_lease VALUES (1, ?, ?, ?, 'held', 0)",
                         (holder.boot_id, holder.pid, holder.starttime))
        conn.close()

        def release() -> None:
            sleeper.kill()
            sleeper.wait()

        yield release
    finally:
        sleeper.kill()
        sleeper.wait()
