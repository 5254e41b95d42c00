"""Crash test: SIGKILL a real `cm sync` (and the git processes it started) at random points.

Each trial gives both machines an edit of its own section, the other machine pushes first, and
this machine's sync (commit, fetch, merge, publish through the Writer's path, merge commit, push)
is killed after a delay drawn from twice the measured length of a whole such sync
(``support.killwindow``), so about half the kills land mid-sync at any load. Right after every
kill, before anything repairs it, memory/ holds no stray temporary file and the memory file is
byte-equal to this machine's bytes before the sync or to the whole merged result (what the next
sync ends with); then the next `cm sync` must complete, and both machines' edits are on both
machines and in the remote: nothing is lost.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import time

import pytest
from conftest import CM, hook_env, run_cm
from support import killwindow
from sync_support import bare, machine, ok, profile, remote_log

from cmrunner.core import sections

TRIALS = 10
BASE = "# Profile\n\n## Work\nI write Go.\n"


def _add(paths, title: str) -> None:
    with open(paths.document("profile"), "a", encoding="utf-8") as f:
        f.write(f"\n## {title}\nnote {title}\n")


def _raw(paths) -> bytes:
    with open(paths.document("profile"), "rb") as f:
        return f.read()


def _start_sync(home: str) -> subprocess.Popen:
    return subprocess.Popen([CM, "sync", "--home", home], env=hook_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def test_sigkill_during_sync_loses_nothing_and_the_next_sync_completes(tmp_path):
    rng = random.Random(20261207)
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", BASE)
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    rounds = iter(range(100))

    def diverge() -> str:
        n = next(rounds)
        _add(paths_b, f"B{n}")
        ok(home_b, "sync")
        _add(paths_a, f"A{n}")
        return str(n)

    took = []
    for _ in range(3):  # the window is this machine's time for the sync alone, not the set-up around it
        diverge()
        began = time.monotonic()
        assert _start_sync(home_a).wait(timeout=60) == 0
        took.append(time.monotonic() - began)
    window = killwindow.Window(span=statistics.median(took))
    outcomes = {"killed": 0, "completed": 0, "published": 0}
    for _ in range(TRIALS):
        n = diverge()
        local = _raw(paths_a)  # this machine's bytes before the sync
        proc = _start_sync(home_a)
        time.sleep(window.delay(rng))
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # cm sync and every git it started
        except ProcessLookupError:
            pass
        code = proc.wait(timeout=60)
        outcomes["killed" if code == -signal.SIGKILL else "completed"] += 1
        # Right after the kill, before anything repairs it: no stray file in memory/, and the file
        # is either this machine's bytes or (checked below, once known) the whole merged result.
        assert sorted(os.listdir(paths_a.memory)) == ["profile.md"], "no temporary file left in memory/"
        at_kill = _raw(paths_a)
        ok(home_a, "sync")
        merged = _raw(paths_a)
        assert at_kill in (local, merged), f"half-written after SIGKILL:\n{at_kill.decode()}"
        outcomes["published"] += at_kill == merged != local
        text = merged.decode()
        sections.parse("profile", text)  # whole and valid
        assert f"## A{n}\nnote A{n}" in text and f"## B{n}\nnote B{n}" in text, text
        assert sorted(os.listdir(paths_a.memory)) == ["profile.md"], "no temporary file left in memory/"
    killwindow.record("sync_crash", trials=TRIALS, window_s=round(2 * window.span, 3), **outcomes)
    ok(home_b, "sync")
    assert profile(paths_a) == profile(paths_b)
    log = remote_log(remote)
    for n in range(TRIALS + 3):
        assert f"+note A{n}" in log and f"+note B{n}" in log
    assert outcomes["killed"] > 0, outcomes


@pytest.mark.parametrize("point", ["after_stage_copy:1", "after_marker", "after_publish_file:1", "after_publish"])
def test_a_sync_killed_at_each_point_of_its_publish_is_completed_by_the_next(tmp_path, point):
    """The Writer's crash points, hit by a sync publishing a pulled change (``CM_TEST_FAULT``
    SIGKILLs the process there): right after, the file is this machine's bytes or the merged
    ones, memory/ holds nothing else, and the very next sync completes with both edits."""
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", BASE)
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    _add(paths_b, "B")
    ok(home_b, "sync")
    _add(paths_a, "A")
    local = _raw(paths_a)
    proc = run_cm(["sync", "--home", home_a], env=hook_env(CM_TEST_FAULT=point), cm=CM)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert sorted(os.listdir(paths_a.memory)) == ["profile.md"]
    at_kill = _raw(paths_a)
    ok(home_a, "sync")
    merged = _raw(paths_a)
    assert "## A\nnote A" in merged.decode() and "## B\nnote B" in merged.decode()
    assert at_kill == (local if point in ("after_stage_copy:1", "after_marker") else merged)
    ok(home_b, "sync")
    assert profile(paths_b) == profile(paths_a)
    assert "+note A" in remote_log(remote)
