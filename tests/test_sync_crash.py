"""Crash test: SIGKILL a real `cm sync` (and the git processes it started) at random points.

Each trial gives both machines an edit of its own section, the other machine pushes first, and
this machine's sync (commit, fetch, merge, publish through the Writer's path, merge commit, push)
is killed after a delay drawn from twice the measured length of a whole such sync
(``support.killwindow``), so about half the kills land mid-sync at any load. After every trial the
next `cm sync` must complete, no memory file is half-written or holds a stray temporary file, and
both machines' edits are on both machines and in the remote: nothing is lost.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import time

from conftest import CM, hook_env
from support import killwindow
from sync_support import bare, machine, ok, profile, remote_log

from cmrunner.core import sections

TRIALS = 10
BASE = "# Profile\n\n## Work\nI write Go.\n"


def _add(paths, title: str) -> None:
    with open(paths.document("profile"), "a", encoding="utf-8") as f:
        f.write(f"\n## {title}\nnote {title}\n")


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
    outcomes = {"killed": 0, "completed": 0}
    for _ in range(TRIALS):
        n = diverge()
        proc = _start_sync(home_a)
        time.sleep(window.delay(rng))
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # cm sync and every git it started
        except ProcessLookupError:
            pass
        code = proc.wait(timeout=60)
        outcomes["killed" if code == -signal.SIGKILL else "completed"] += 1
        ok(home_a, "sync")
        text = profile(paths_a)
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
