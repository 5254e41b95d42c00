"""Adjust Memory and Processing Status (textual pilot) with a real detached Writer.

The drain is the real ``cm session-drain`` spawned by the admission transaction; its Memory Agent
talks to the loopback fake model, whose policy (``support/edit_policy.py``) turns the request into
a Profile section with ``edit_result: modified``.
"""

from __future__ import annotations

import os

import pytest
from conftest import db_rows, wait_no_drain
from tui_support import EDIT_POLICY, configure_model, drive, temp_hosts, wait_for

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp

pytestmark = pytest.mark.timeout(120)
REQUEST = "Please remember that I prefer tabs over spaces in every project"


def open_adjust():
    async def steps(pilot):
        await wait_for(pilot, "cm · Common Memory")
        menu = pilot.app.screen.query_one("#column-1")
        menu.focus()
        menu.highlighted = 1
        await pilot.press("enter")
        await wait_for(pilot, "Memory Control · Adjust Memory")
    return steps


def test_adjust_memory_reaches_the_writer_and_the_result_is_in_view_memory(home, tmp_path):
    script = {"replies": [], "policy": EDIT_POLICY}
    with fakemodel.running(str(tmp_path / "fake"), script) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def steps(pilot):
            await open_adjust()(pilot)
            text = await wait_for(pilot, "Notice:")
            assert f"fake-model at {fake.base_url}" in text and "Personal memory (Profile and Preferences)" in text
            await pilot.press(*REQUEST, "enter")
            text = await wait_for(pilot, "Your request was submitted for global.")
            assert "Request 3" not in text  # the store's task number is not this user's request count
            text = await wait_for(pilot, "Status: processed", timeout=60)
            # The outcome in the user's terms: the section the request added, not a hedge.
            assert "Status: processed. Changed: profile / Requested change added." in text
            assert "may also have decided to change nothing" not in text
            await pilot.press("escape")
            menu = pilot.app.screen.query_one("#column-1")
            menu.highlighted = 0
            await pilot.press("enter")
            await wait_for(pilot, "Authorized documents")
            await pilot.press("enter")
            text = await wait_for(pilot, "Memory · Profile")
            assert "Requested change" in text and "I prefer tabs over spaces" in text
            await pilot.press("escape", "escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
        assert fake.model_requests()
    wait_no_drain(home)
    rows = db_rows(home, "SELECT o.source, o.task_kind, o.scope, o.state, j.state, j.edit_result FROM observations o "
                         "JOIN jobs j ON j.id = o.job_id")
    assert rows == [("interactive", "edit", "global", "processed", "done", "modified")]


def test_a_forget_request_says_what_it_removed_at_80x24(home, tmp_path):
    """Issue 36: Adjust Memory answered "the Writer may also have decided to change nothing" after it
    removed a whole section. Through the real drain and the fake model (``support/edit_policy.py``:
    a request starting "Forget" removes the section the first request added): the result says
    which section was removed."""
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": EDIT_POLICY}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def steps(pilot):
            await open_adjust()(pilot)
            await pilot.press(*REQUEST, "enter")
            await wait_for(pilot, "Status: processed. Changed: profile / Requested change added.", timeout=60)
            await pilot.press(*"Forget that request", "enter")
            text = await wait_for(pilot, "Changed: profile / Requested change removed.", timeout=60)
            assert "Status: processed." in text and "decided to change nothing" not in text and "added." not in text
            await pilot.press("escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps, size=(80, 24))
        assert fake.model_requests()
    wait_no_drain(home)
    paths = DataPaths(config_mod.load(home).data_root)
    assert "Requested change" not in open(paths.document("profile"), encoding="utf-8").read()


def test_a_sensitive_request_is_refused_before_anything_is_stored(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)

    async def steps(pilot):
        await open_adjust()(pilot)
        await pilot.press(*"forget my password: Tr0ub4dor-and-3", "enter")
        text = await wait_for(pilot, "SENSITIVE_CONTENT_REJECTED")
        assert "nothing was submitted" in text and "Tr0ub4dor" not in text.replace(pilot.app.screen.query_one(
            "#request").value, "")
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
    assert not os.path.exists(DataPaths(config_mod.load(home).data_root).db)


def test_a_failed_request_is_shown_as_failed_and_retried_from_processing_status(home, tmp_path):
    script = {"replies": [{"error": {"status": 401}}], "policy": EDIT_POLICY}
    with fakemodel.running(str(tmp_path / "fake"), script) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def steps(pilot):
            await open_adjust()(pilot)
            await pilot.press(*REQUEST, "enter")
            text = await wait_for(pilot, "Status: dead", timeout=60)
            assert "issue AUTHENTICATION" in text and "not applied" in text and "processed" not in text
            await pilot.press("escape")  # leaving does not withdraw the request
            menu = pilot.app.screen.query_one("#column-1")
            menu.highlighted = 2
            await pilot.press("enter")
            text = await wait_for(pilot, "failed (Enter to retry)")
            assert "AUTHENTICATION" in text
            # The same grouped reason and remedy as `cm status`.
            assert "Failed 1 job(s) × AUTHENTICATION: the provider rejected the API key." in text
            assert "Remedy: " in text and "put the right key in the private .env" in text and "then `cm retry" in text
            await pilot.press("enter")
            await wait_for(pilot, "queued for another attempt")
            text = await wait_for(pilot, "No unfinished job.", timeout=60)
            assert "Status: processed" in text
            await pilot.press("c")
            await wait_for(pilot, "Processing continues in the background")
            await pilot.press("escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
    wait_no_drain(home)
    assert db_rows(home, "SELECT state, attempts FROM jobs") == [("done", 2)]


def test_a_removal_is_reported_as_removed_and_nothing_kept_says_so():
    from cmrunner.tui.memory import describe_request

    removed = describe_request({"state": "processed", "changes": [
        {"target": "preferences", "section": "Indentation", "kind": "remove"},
        {"target": "profile", "section": "Editor", "kind": "replace"}]})
    assert removed == "Status: processed. Changed: preferences / Indentation removed; profile / Editor changed."
    assert describe_request({"state": "processed", "changes": []}) == \
        "Status: processed. Nothing was changed: the Writer kept nothing from this request."
