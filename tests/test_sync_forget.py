"""A forget the Memory Agent commits reaches the remote's tip through the automatic sync: two homes,
a bare repository on disk, real drains against the loopback fake model (its careful policy turns
"Forget that …" into a removal). The text leaves the tip and the other machine's files; the
removing machine's own trash and history keep it, and git history keeps the past (README says so)."""

from __future__ import annotations

import subprocess
import time

from agent_support import configure_remote, policy
from conftest import hook_env, run_cm
from drain_support import start_drain
from sync_support import bare, history, machine, ok, remote_log, state, trash
from writer_support import admit

from cmrunner.synthetic import fakemodel

FACT = "neovim"


def _tip(remote: str) -> str:
    """Every memory file at the remote branch's tip, concatenated."""
    names = subprocess.run(["git", "-C", remote, "ls-tree", "-r", "--name-only", "main"], capture_output=True,
                           check=True).stdout.decode().split()
    return "".join(subprocess.run(["git", "-C", remote, "show", f"main:{n}"], capture_output=True,
                                  check=True).stdout.decode() for n in names if n.endswith(".md"))


def _memory(paths) -> str:
    found = []
    for target in ("profile", "preferences"):
        try:
            found.append(open(paths.document(target), encoding="utf-8").read())
        except FileNotFoundError:
            pass
    return "".join(found)


def test_a_forget_the_memory_agent_commits_is_pushed_by_the_automatic_sync(tmp_path):
    remote = bare(tmp_path)
    home_b, paths_b = machine(tmp_path, "b")
    with fakemodel.running(str(tmp_path / "fm"), policy("careful")) as fm:
        home_a = str(tmp_path / "a")
        paths_a, _cfg = configure_remote(home_a, fm.base_url)
        ok(home_a, "sync", "init", remote)
        ok(home_b, "sync", "init", remote)
        admit(paths_a, f"I use {FACT} as my editor.", "e1", batch="b1")
        flushed = run_cm(["flush", "--home", home_a], timeout=120)
        assert flushed.returncode == 0 and "sync: pushed" in flushed.stderr.decode() + flushed.stdout.decode(), \
            flushed.stderr.decode()
        assert FACT in _memory(paths_a) and FACT in _tip(remote)
        ok(home_b, "sync")
        assert FACT in _memory(paths_b)
        before = state(home_a)["last"]["at"]
        # The user asks to forget it; a detached drain commits the removal and starts the sync itself.
        admit(paths_a, f"Forget that I use {FACT}.", "e2", batch="b2")
        drain = start_drain(home_a, hook_env(CM_TEST_DRAIN_LINGER_MS="0"))
        assert drain.wait(timeout=120) == 0, drain.stderr.read()
    assert FACT not in _memory(paths_a), "the Memory Agent did not forget it"
    ends = time.monotonic() + 60
    while state(home_a)["last"]["at"] == before:
        assert time.monotonic() < ends, "no automatic sync after the forget"
        time.sleep(0.2)
    assert state(home_a)["last"]["outcome"] == "ok", state(home_a)["last"]
    assert FACT not in _tip(remote), "the forgotten text is still at the remote's tip"
    assert FACT in remote_log(remote)  # what git history keeps until `cm sync purge-history`
    ok(home_b, "sync")
    assert FACT not in _memory(paths_b)
    # Trash and history are each machine's own: a keeps the forgotten section, restorable.
    [kept] = [t for t in trash(home_a) if t["section"] == "Editor"]
    assert kept["decision"] == "forget" and kept["reason"] is None, kept
    [removal] = [v for v in history(home_a) if v["id"] == kept["version"]]
    assert FACT in removal["diff"], removal
    assert "restored preferences / Editor" in ok(home_a, "restore", kept["id"])
    assert FACT in _memory(paths_a)
