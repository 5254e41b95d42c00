"""Crash test: SIGKILL a real `cm sync repair` (and the git processes it started) while it rebuilds a
damaged sync repository, then run it again.

Each trial damages this machine's git directory after a sync, gives the other machine an edit of
one section (pushed) and this machine a hand edit of another, and kills the repair after a delay
drawn from twice the measured length of a whole such repair (``support.killwindow``): the rebuild
beside the damaged directory, the fetch, the swap of the two directories and the sync after it.
Whatever the kill interrupted, the next `cm sync repair` completes it on the recorded merge base:
both edits on both machines, nothing in the trash, no copy of a git directory left beside the
repository, and the memory file whole.
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
from sync_support import bare, machine, ok, profile, remote_log, trash
from test_sync_repair import _corrupt

from cmrunner.core import sections, syncstate

TRIALS = 8
BASE = "# Profile\n\n## Work\nI write Go.\n"


def _add(paths, title: str) -> None:
    with open(paths.document("profile"), "a", encoding="utf-8") as f:
        f.write(f"\n## {title}\nnote {title}\n")


def _start_repair(home: str) -> subprocess.Popen:
    return subprocess.Popen([CM, "sync", "repair", "--home", home], env=hook_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def test_sigkill_during_repair_loses_nothing_and_the_next_repair_keeps_the_merge_base(tmp_path):
    rng = random.Random(20261208)
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", BASE)
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    git_dir = syncstate.git_dir(paths_a)
    rounds = iter(range(100))

    def damage_and_diverge() -> int:
        n = next(rounds)
        ok(home_a, "sync")  # the merge base: what both machines hold now
        _corrupt(paths_a)
        _add(paths_b, f"B{n}")
        ok(home_b, "sync")
        _add(paths_a, f"A{n}")
        return n

    took = []
    for _ in range(3):
        damage_and_diverge()
        began = time.monotonic()
        assert _start_repair(home_a).wait(timeout=60) == 0
        took.append(time.monotonic() - began)
    window = killwindow.Window(span=statistics.median(took))
    outcomes = {"killed": 0, "before_swap": 0, "completed": 0}
    for _ in range(TRIALS):
        n = damage_and_diverge()
        proc = _start_repair(home_a)
        time.sleep(window.delay(rng))
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the repair and every git it started
        except ProcessLookupError:
            pass
        if proc.wait(timeout=60) == -signal.SIGKILL:
            outcomes["killed"] += 1
            outcomes["before_swap"] += os.path.exists(git_dir + ".new") or not os.path.isdir(git_dir)
        else:
            outcomes["completed"] += 1
        said = ok(home_a, "sync", "repair")
        assert "section(s) changed on both machines" not in said, said
        assert not os.path.exists(git_dir + ".new") and not os.path.exists(git_dir + ".broken")
        text = profile(paths_a)
        sections.parse("profile", text)  # whole and valid
        assert f"## A{n}\nnote A{n}" in text and f"## B{n}\nnote B{n}" in text, text
        assert trash(home_a) == [], "a kill must not cost the merge base"
        assert sorted(os.listdir(paths_a.memory)) == ["profile.md"], "no temporary file left in memory/"
    killwindow.record("sync_repair_crash", trials=TRIALS, window_s=round(2 * window.span, 3), **outcomes)
    ok(home_b, "sync")
    assert profile(paths_a) == profile(paths_b) and trash(home_b) == []
    log = remote_log(remote)
    for n in range(TRIALS + 3):
        assert f"+note A{n}" in log and f"+note B{n}" in log
    assert outcomes["killed"] > 0, outcomes
