"""Memory Control · History and Trash (textual pilot on a real home after real drains): a version's
diff, undo of a correction, and restore from the trash, checked against the files and `cm history`."""

from __future__ import annotations

import json

from conftest import run_cm
from history_support import run_commits
from tui_support import configure_model, drive, open_action, wait_for

from cmrunner.manage import setupstate
from cmrunner.tui.app import CmApp


def _after_title(title: str, then):
    async def steps(pilot):
        await wait_for(pilot, title)
        await then(pilot)

    return steps


def _ready(home: str, tmp_path, count: int):
    paths, after = run_commits(home, tmp_path, count=count)
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    return paths, after


def test_history_shows_the_diff_and_undoes_a_correction(home, tmp_path):
    paths, after = _ready(home, tmp_path, 2)

    async def steps(pilot):
        text = await wait_for(pilot, "put by memory_agent (retain)")
        assert "2 version(s), newest first:" in text and "replace by memory_agent (retain)" in text
        assert text.index("replace by") < text.index("put by")
        # each row quotes the user's words behind it (the same line as `cm history`, issue 36)
        assert text.index("“Actually, spaces in Go.”") < text.index("“I use tabs in Go.”")
        await pilot.press("down", "up")  # highlight the newest version again: its diff is shown
        text = await wait_for(pilot, "+Spaces in Go.")
        assert "-Tabs in Go." in text
        await pilot.press("w")  # why: the commits and the user's own words
        text = await wait_for(pilot, "“Actually, spaces in Go.”")
        assert "evidence #" in text and "you said, Codex CLI session" in text
        await pilot.press("u")
        await wait_for(pilot, "(preferences / Indentation)? y yes · n no")
        await pilot.press("n")
        await wait_for(pilot, "Nothing was changed.")
        assert open(paths.document("preferences"), "rb").read() == after[1]
        await pilot.press("u", "y")
        await wait_for(pilot, "Undid v")
        await wait_for(pilot, "3 version(s), newest first:")
        await pilot.press("escape", "escape")

    drive(CmApp(home), open_action("history", _after_title("Memory Control · History", steps)))
    assert open(paths.document("preferences"), "rb").read() == after[0]
    newest = json.loads(run_cm(["history", "--json", "--home", home]).stdout)[0]
    assert (newest["kind"], newest["author"]) == ("undo", "user")


def test_a_refused_undo_offers_the_screens_own_way_to_undo_anyway(home, tmp_path):
    paths, after = _ready(home, tmp_path, 2)
    put = json.loads(run_cm(["history", "--json", "--home", home]).stdout)[1]

    async def steps(pilot):
        await wait_for(pilot, "put by memory_agent (retain)")
        await pilot.press("down")  # the older version: its section was replaced since
        await pilot.press("u", "y")
        text = await wait_for(pilot, "Undo anyway, replacing what is there now? y yes · n no")
        assert f"preferences / Indentation changed since {put['id']} wrote it" in text
        assert "--force" not in text and "-Tabs in Go." in text and "+Spaces in Go." in text
        assert open(paths.document("preferences"), "rb").read() == after[1], "nothing changed yet"
        await pilot.press("y")
        await wait_for(pilot, f"Undid {put['id']}")
        await wait_for(pilot, "3 version(s), newest first:")
        await pilot.press("escape", "escape")

    drive(CmApp(home), open_action("history", _after_title("Memory Control · History", steps)), size=(140, 45))
    assert "Indentation" not in open(paths.document("preferences"), encoding="utf-8").read()


def test_trash_restores_a_forgotten_section(home, tmp_path):
    paths, after = _ready(home, tmp_path, 3)

    async def steps(pilot):
        text = await wait_for(pilot, "by a forget decision")
        assert "1 removed section(s):" in text and "preferences / Indentation removed" in text
        await pilot.press("enter")
        await wait_for(pilot, "Restore preferences / Indentation? y yes · n no")
        await pilot.press("y")
        await wait_for(pilot, "Restored preferences / Indentation: agents receive it again.")
        await wait_for(pilot, "The trash is empty.")
        await pilot.press("escape", "escape")

    drive(CmApp(home), open_action("trash", _after_title("Memory Control · Trash", steps)))
    assert open(paths.document("preferences"), "rb").read() == after[1]


def test_trash_purges_for_good(home, tmp_path):
    paths, _after = _ready(home, tmp_path, 3)

    async def steps(pilot):
        await wait_for(pilot, "by a forget decision")
        await pilot.press("x")
        await wait_for(pilot, "for good? It cannot be undone. y yes · n no")
        await pilot.press("y")
        await wait_for(pilot, "nothing of it is left.")
        await wait_for(pilot, "The trash is empty.")
        await pilot.press("escape", "escape")

    drive(CmApp(home), open_action("trash", _after_title("Memory Control · Trash", steps)))
    assert json.loads(run_cm(["trash", "--json", "--home", home]).stdout) == []
    data = open(paths.db, "rb").read()
    assert b"Spaces in Go." not in data and b"Tabs in Go." not in data


def test_why_on_a_removed_version_at_80x24_shows_its_words_not_unknown_section(home, tmp_path):
    _ready(home, tmp_path, 3)  # put, correct, then forget: the newest version removed the section

    async def steps(pilot):
        text = await wait_for(pilot, "remove by memory_agent (forget)")
        await pilot.press("w")  # why, on the removed version at the top
        text = await wait_for(pilot, "not in the document now: removed by v3")
        assert "UNKNOWN_SECTION" not in text
        # The words come first, on screen at 80×24 (forgotten here: the third drain was a forget).
        assert "evidence #1, you said, Codex CLI session, 2026-11-30 00:00 UTC: (words forgotten" in text
        await pilot.press("escape", "escape")

    drive(CmApp(home), open_action("history", _after_title("Memory Control · History", steps)), size=(80, 24))
