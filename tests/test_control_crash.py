"""SIGKILL of a real `cm undo` / `cm restore` at each commit step: the next drain finishes or discards it.

After the kill and one drain, the end-state invariants hold (documents at the last receipt's
after-hash, history equal to the documents, integrity_check ok), and the document holds either
the action's result (killed after the commit marker: recovery publishes it forward and replays its
receipt) or exactly what it held before (killed earlier: the action can simply be run again).
The kills come from the ``CM_TEST_FAULT`` seam at a named step, not after a delay: no time window,
so they land at the same point at any load.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
from conftest import CM, hook_env, run_cm
from drain_support import check_end_state, drain_env, start_drain, transaction_dirs, write_script
from history_support import SCRIPT, run_commits

FAULTS = ["before_stage", "after_stage_copy:1", "after_journal", "after_marker", "after_publish_file:1",
          "after_publish"]
PUBLISHED = {"after_marker", "after_publish_file:1", "after_publish"}


def _action_args(home: str, action: str) -> list[str]:
    if action == "undo":
        newest = json.loads(run_cm(["history", "preferences", "--json", "--home", home]).stdout)[0]
        return ["undo", newest["receipt"]]
    [entry] = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    return ["restore", entry["id"]]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("action", ["undo", "restore"])
def test_sigkill_during_a_user_action(home, tmp_path, action, fault):
    paths, after = run_commits(home, tmp_path, count=2 if action == "undo" else 3)
    expected = after[0] if action == "undo" else after[1]
    args = _action_args(home, action)
    killed = run_cm([*args, "--home", home], env=hook_env(CM_TEST_FAULT=fault), cm=CM)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    drain = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    commits = 2 if action == "undo" else 3
    facts = check_end_state(paths, receipts=commits + (fault in PUBLISHED))
    assert transaction_dirs(paths) == []
    now = open(paths.document("preferences"), "rb").read()
    trashed = json.loads(run_cm(["trash", "--json", "--home", home]).stdout)
    if fault in PUBLISHED:
        assert now == expected and facts["receipts"][-1].startswith("user-")
        assert trashed == []  # a restore left the trash in the same commit; an undo never entered it
    else:
        assert len(trashed) == (1 if action == "restore" else 0)
        assert now == after[-1] and not facts["receipts"][-1].startswith("user-")
        again = run_cm([*args, "--home", home])
        assert again.returncode == 0, again.stderr
        assert open(paths.document("preferences"), "rb").read() == expected
        check_end_state(paths, receipts=commits + 1)


@pytest.mark.parametrize("fault", FAULTS)
def test_sigkill_during_a_purge_then_running_it_again_finishes_it(home, tmp_path, fault):
    paths, _after = run_commits(home, tmp_path, count=2)
    killed = run_cm(["purge", "preferences", "Indentation", "--yes", "--home", home],
                    env=hook_env(CM_TEST_FAULT=fault), cm=CM)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    drain = start_drain(home, drain_env(write_script(str(tmp_path), SCRIPT), str(tmp_path / "calls")))
    assert drain.wait(timeout=60) == 0, drain.stderr.read()
    check_end_state(paths, receipts=2 + (fault in PUBLISHED))  # consistent at once: document, history, trash agree
    again = run_cm(["purge", "preferences", "Indentation", "--yes", "--home", home])
    assert again.returncode == 0, again.stderr
    assert open(paths.document("preferences")).read() == "# Preferences\n\n"
    check_end_state(paths, receipts=3)
    leftovers = []
    for folder, _dirs, files in os.walk(home):
        for name in files:
            data = open(os.path.join(folder, name), "rb").read()
            leftovers += [(name, n) for n in ("Tabs in Go.", "Spaces in Go.", "I use tabs in Go.") if n.encode() in data]
    assert leftovers == []
