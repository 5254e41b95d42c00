"""Small faults of the management UI at 140×45, each driven as a person would (textual pilot):
q and ?, an unsent Adjust Memory request, keys typed on the scope list, the provider list, an
unchanged model. (The last setup screen and q in a real terminal: tests/test_tui_terminal.py.)"""

from __future__ import annotations

import os

import pytest
from tui_support import configure_model, drive, first_run, open_action, screen_text, temp_hosts, wait_for

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp

pytestmark = pytest.mark.timeout(120)
SIZE = (140, 45)


def _ready(home: str, url: str = "http://127.0.0.1:9/v1") -> None:
    configure_model(home, url)
    setupstate.finish(home)


def test_q_quits_and_question_mark_shows_the_keys(home, tmp_path):
    _ready(home)
    app = CmApp(home, discover=temp_hosts(str(tmp_path)), cwd=str(tmp_path))  # no project folder: no offer

    async def steps(pilot):
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("?")
        text = await wait_for(pilot, "q quit cm")
        assert "This screen: ↑↓ move · ←→ column · Enter open · Esc quit" in text
        await pilot.press("right", "down", "down", "down", "down", "enter")  # Memory Control · History & Undo
        await wait_for(pilot, "Memory Control · History")
        await pilot.press("q")  # from a screen below Home, too
        await pilot.pause(0.2)

    drive(app, steps, size=SIZE)
    assert not app.is_running


def test_esc_warns_before_discarding_an_unsent_adjust_memory_request(home, tmp_path):
    _ready(home)
    app = CmApp(home, discover=temp_hosts(str(tmp_path)))

    async def steps(pilot):
        await wait_for(pilot, "Notice:")
        await pilot.press(*"forget my shell")
        await pilot.press("escape")
        text = await wait_for(pilot, "Your request is not sent yet: Enter sends it; Esc again leaves without it.")
        assert "Memory Control · Adjust Memory" in text and "forget my shell" in text
        await pilot.press("q")  # warned once already: q now quits
        await pilot.pause(0.2)

    drive(app, open_action("adjust", steps), size=SIZE)
    assert not app.is_running
    assert not os.path.exists(DataPaths(config_mod.load(home).data_root).db), "nothing was submitted"


def test_esc_twice_leaves_without_the_request_and_an_empty_field_leaves_at_once(home, tmp_path):
    _ready(home)

    async def steps(pilot):
        await wait_for(pilot, "Notice:")
        await pilot.press(*"forget my shell", "escape")
        await wait_for(pilot, "Esc again leaves without it")
        await pilot.press("escape")
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("enter")  # Adjust Memory again: nothing typed, so Esc leaves at once
        await wait_for(pilot, "Notice:")
        await pilot.press("escape")
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("adjust", steps), size=SIZE)


def test_keys_typed_while_the_scope_list_has_focus_reach_the_request(home, tmp_path):
    _ready(home)

    async def steps(pilot):
        await wait_for(pilot, "Notice:")
        pilot.app.screen.query_one("#scopes").focus()
        await pilot.press(*"I use zsh")
        request = pilot.app.screen.query_one("#request")
        assert request.value == "I use zsh" and request.has_focus
        await pilot.press("escape", "escape", "escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("adjust", steps), size=SIZE)


def test_the_provider_list_names_each_protocol_once(home, tmp_path):
    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        shown = screen_text(pilot.app)
        assert "Custom (OpenAI-compatible)  (Chat Completions)" in shown
        assert all(line.count("Chat Completions") <= 1 and line.count("Responses") <= 1 for line in shown.splitlines())
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps, size=SIZE)


def _save_model(key: str, expected: str):
    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("enter")  # the configured preset
        await wait_for(pilot, "2/4 Base URL")
        await pilot.press("enter")  # the configured URL
        await wait_for(pilot, "3/4 API key")
        await pilot.press(*key, "enter")  # empty: keep the key
        await wait_for(pilot, "fake-model")
        await pilot.press("enter")  # the same model
        text = await wait_for(pilot, expected)
        assert "cm · Common Memory" in text
        await pilot.press("escape")
    return steps


def test_saving_the_model_unchanged_says_so_and_a_change_says_saved(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        _ready(home, fake.base_url)
        before = open(os.path.join(home, "config.json"), "rb").read()
        drive(CmApp(home, discover=temp_hosts(str(tmp_path))),
              open_action("model", _save_model("", "nothing was saved, and no client needs a restart")), size=SIZE)
        assert open(os.path.join(home, "config.json"), "rb").read() == before
        drive(CmApp(home, discover=temp_hosts(str(tmp_path))),
              open_action("model", _save_model("sk-another-key-0000",
                                             "Model saved. No agent is connected to cm yet, so nothing needs a restart.")), size=SIZE)
        assert open(os.path.join(home, "config.json"), "rb").read() != before


def test_the_first_runs_last_screen_leads_to_home(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        app = CmApp(home, discover=temp_hosts(str(tmp_path), pi=False), user_home=str(tmp_path / "userhome"))

        async def steps(pilot):
            text = await first_run(pilot, fake.base_url)
            assert "Setup is complete" in text and "Run `cm` again" not in text and "then cm's home screen" in text
            await pilot.press("enter")
            text = await wait_for(pilot, "Model & Configuration")
            assert app.is_running
            await pilot.press("escape")

        drive(app, steps, size=SIZE)
