"""One lock for every host-configuration transaction (issue 32): two real cm processes never
undo each other's work, and recovery rolls back only a transaction whose owner process is gone.

The first process is a real ``cm agents install claude-code`` run (``agents.install``) paused in
the middle of its transaction, after its first file write, by a patched ``txn._write`` in its own
process; the second is the real ``cm agents`` console script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_agents_cli import CLAUDE_SETTINGS, GEMINI_SETTINGS, env_for, snapshot, user, write

from cmrunner.core.errors import CmError
from cmrunner.manage.integrations import manifest, txn

pytestmark = pytest.mark.timeout(300)
__all__ = ["user"]  # the fixture, shared with test_agents_cli

PAUSED = """
import os, sys, time
from cmrunner.manage.integrations import agents, txn
marker, go = sys.argv[1], sys.argv[2]
original, count = txn._write, []
def paused(path, data, mode):
    original(path, data, mode)
    count.append(path)
    if len(count) == 1:
        open(marker, "w").write(path)
        deadline = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.02)
txn._write = paused
agents.install(os.environ["COMMON_MEMORY_HOME"], "claude-code")
"""


def start_paused(user, tmp_path) -> tuple[subprocess.Popen, str, str]:
    """The first process, once it has written one file of its transaction and waits."""
    marker, go = str(tmp_path / "paused"), str(tmp_path / "go")
    proc = subprocess.Popen([sys.executable, "-c", PAUSED, marker, go], env=env_for(user),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not os.path.exists(marker):
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "the first transaction never reached its first write"
        time.sleep(0.02)
    return proc, open(marker).read(), go


def waits_on_lock(proc: subprocess.Popen, home: str) -> bool:
    """Wait until ``proc`` has the lock file open (it is then waiting for the lock) or has exited."""
    lock = os.path.realpath(os.path.join(home, "integrations.lock"))
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            fds = os.listdir(f"/proc/{proc.pid}/fd")
            if any(os.path.realpath(f"/proc/{proc.pid}/fd/{fd}") == lock for fd in fds):
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def test_two_cm_agents_at_once_wait_for_each_other_and_both_changes_land(user, home, tmp_path):
    settings, gemini = user / ".claude" / "settings.json", user / ".gemini" / "settings.json"
    before = {settings: write(settings, CLAUDE_SETTINGS), gemini: write(gemini, GEMINI_SETTINGS)}
    first, written, go = start_paused(user, tmp_path)
    half = open(written, "rb").read()
    second = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "cm"), "agents", "install", "gemini"],
                              env=env_for(user), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Before: the second process "recovered" the first one's live transaction, rolling it back.
        assert waits_on_lock(second, home), second.communicate()
        assert second.poll() is None and open(written, "rb").read() == half
        assert os.path.isdir(os.path.join(home, txn.JOURNAL_DIR))
    finally:
        open(go, "w").close()
    assert first.wait(120) == 0, first.communicate()[1].decode()[-2000:]
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err.decode()
    assert set(manifest.load(home)["hosts"]) == {"claude-code", "gemini"}
    assert "common_memory" in json.loads((user / ".claude.json").read_text())["mcpServers"]
    assert len(json.loads(settings.read_text())["hooks"]["Stop"]) == 2
    for host in ("claude-code", "gemini"):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "cm"), "agents", "remove", host],
                              env=env_for(user), capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert {p: p.read_bytes() for p in before} == before and not (user / ".claude.json").exists()


def test_recovery_rolls_back_only_a_transaction_whose_owner_is_gone(user, home, tmp_path, monkeypatch):
    settings = user / ".claude" / "settings.json"
    before = {settings: write(settings, CLAUDE_SETTINGS)}
    first, written, _go = start_paused(user, tmp_path)
    half = open(written, "rb").read()
    monkeypatch.setattr(txn, "LOCK_WAIT_S", 0.5, raising=False)
    try:
        with pytest.raises(CmError) as busy:
            txn.recover(home)
        assert busy.value.code == "INTEGRATIONS_BUSY" and "\n" not in busy.value.message
        assert open(written, "rb").read() == half
        # Past the lock (as a process that does not take it, such as an older cm, would be), the
        # journal's owner is checked: it is alive, so its transaction is not rolled back either.
        monkeypatch.setitem(txn._held, os.path.realpath(home), 1)
        with pytest.raises(CmError) as alive:
            txn.recover(home)
        assert alive.value.code == "INTEGRATIONS_BUSY" and open(written, "rb").read() == half
        with open(os.path.join(home, txn.JOURNAL_DIR, "journal.json")) as handle:
            assert json.load(handle)["owner"].split(":")[1] == str(first.pid)
        monkeypatch.delitem(txn._held, os.path.realpath(home))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    # The owner is gone (SIGKILL: no rollback of its own): the next transaction restores first.
    assert txn.recover(home)
    assert {p: p.read_bytes() for p in before} == before and not (user / ".claude.json").exists()
    assert not os.path.exists(manifest.path_of(home)) and snapshot(user) == {
        os.path.relpath(settings, user): before[settings]}
