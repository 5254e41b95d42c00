"""The freshness line every injected memory block ends with: when memory was last published and how
many of this scope's captured turns still wait, seen in the real hook's output (subprocesses)."""

from __future__ import annotations

import json
import os
import time

from conftest import Transcript, db_rows, event, run_hook, settle

from cmrunner.core import projects
from cmrunner.core.home import DataPaths
from cmrunner.reading import reader

WAITING = "SELECT COUNT(*) FROM observations WHERE scope = ? AND state IN ('buffered', 'pending', 'claimed')"


def _block(proc) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def _last_line(block: str) -> str:
    lines = block.rstrip("\n").split("\n")
    assert lines[-2].startswith("<<<end-common-memory-data "), "the state line follows the end marker"
    return lines[-1]


def test_fresh_home_says_nothing_saved_and_nothing_waiting(home, transcript, workdir):
    block = _block(run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m")))
    assert _last_line(block) == "Memory state: no memory saved yet; no turns waiting to be processed."


def test_turns_still_waiting_are_counted_in_the_next_session(home, transcript, workdir):
    paths = DataPaths(os.path.join(home, "data"))
    project = projects.register(paths, workdir, "Work")
    os.makedirs(paths.projects_dir, exist_ok=True)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Editor\nThe user edits in Helix.\n")
    three_min_ago = time.time() - 190
    os.utime(paths.document("profile"), (three_min_ago, three_min_ago))
    assert _block(run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m")))
    for turn, text in (("t1", "We deploy this service with Nomad, not Kubernetes."),
                       ("t2", "The staging database is Postgres 16.")):
        transcript.user_turn(turn, text)
        assert run_hook(home, event("UserPromptSubmit", transcript, workdir, turn_id=turn, prompt=text)).returncode == 0
        transcript.reply(turn, "Noted.")
        assert run_hook(home, event("Stop", transcript, workdir, turn_id=turn)).returncode == 0
    settle(home)  # the real drain consumes the inbox; no model is configured, so the turns wait
    waiting = db_rows(home, WAITING, (project.scope,))[0][0]
    assert waiting == 2, "one observation per user turn, admitted and not processed"

    other = Transcript(transcript.path + ".2", "sess-0002")
    block = _block(run_hook(home, event("SessionStart", other, workdir, source="startup", model="m")))
    assert _last_line(block) == f"Memory state: updated 3 min ago; {waiting} turns still being processed."
    # Another directory (global scope) has none of this project's turns waiting.
    elsewhere = os.path.join(os.path.dirname(workdir), "elsewhere")
    os.mkdir(elsewhere)
    third = Transcript(transcript.path + ".3", "sess-0003")
    block = _block(run_hook(home, event("SessionStart", third, elsewhere, source="startup", model="m")))
    assert _last_line(block) == "Memory state: updated 3 min ago; no turns waiting to be processed."


def test_freshness_wording():
    now = 1_000_000.0
    assert reader.freshness_line(None, None, now) == "Memory state: no memory saved yet."
    assert reader.freshness_line(now - 5, 1, now) == "Memory state: updated just now; 1 turn still being processed."
    assert reader.freshness_line(now - 7300, 0, now) == "Memory state: updated 2 h ago; no turns waiting to be processed."
    assert reader.freshness_line(now - 3 * 86400, 4, now) == ("Memory state: updated 3 days ago; "
                                                             "4 turns still being processed.")
    assert reader.freshness_line(now + 60, 0, now).startswith("Memory state: updated just now")
