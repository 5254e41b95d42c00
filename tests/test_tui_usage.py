"""Model & Configuration · Usage & Spend Caps (textual pilot on a real home with a real ledger): the
report and the bar per day, a bad cap refused in place with nothing written, a good one saved to
config.json through the same path as `cm usage caps`."""

from __future__ import annotations

import time

from conftest import hook_env, reap_drains, run_cm
from tui_support import configure_model, drive, open_action, wait_for
from writer_support import configure

from cmrunner.core import config as config_mod, ledger, store
from cmrunner.core.configdefs import DEFAULT_SPEND
from cmrunner.manage import setupstate
from cmrunner.tui.app import CmApp


def _home_with_usage(home: str) -> None:
    paths, _cfg = configure(home)
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    conn = store.open_store(paths)
    now = int(time.time() * 1000)
    with store.immediate(conn):
        for back, tokens in ((2, 4000), (0, 1000)):
            ledger.append(conn, ledger.Entry(now - back * 86_400_000, "memory_agent", "job", 1, 1, "api.example.com",
                                             "gpt-x", "responses", ("global",), ("user_explicit",), 4096, 1024,
                                             tokens, None, 100, None, "provider", 900, "ok"))
    conn.close()


def test_usage_screen_shows_the_days_and_saves_caps(home):
    _home_with_usage(home)
    before = open(f"{home}/config.json", "rb").read()

    async def steps(pilot):
        text = await wait_for(pilot, "Model & Configuration · Usage & Spend Caps")
        assert "Today (UTC): 1 request(s), 1,100 tokens" in text
        assert "Tokens per day, last 30 days (busiest day: 4,100 tokens):" in text and "█" in text
        assert "global · user_explicit: 2 request(s)" in text
        day = pilot.app.screen.query_one("#tokensPerDay")
        assert day.value == str(DEFAULT_SPEND["tokensPerDay"])
        day.value = "a lot"
        await pilot.press("enter")
        await wait_for(pilot, "INVALID_CAP: tokensPerDay takes a whole number")
        assert open(f"{home}/config.json", "rb").read() == before, "nothing was written"
        day.value = "0"
        pilot.app.screen.query_one("#requestsPerHour").value = ""
        await pilot.press("enter")
        text = await wait_for(pilot, "Saved.")
        assert "WAITING: spend.tokensPerDay is 0, which turns the Memory Agent off" in text
        await pilot.press("escape")

    drive(CmApp(home, start="manage"), open_action("usage", steps), size=(110, 60))
    reap_drains(home)
    assert config_mod.load(home).spend == {"requestsPerHour": None, "tokensPerDay": 0,
                                              "tokensPerMonth": DEFAULT_SPEND["tokensPerMonth"]}
    shown = run_cm(["usage", "caps"], env=hook_env(COMMON_MEMORY_HOME=home)).stdout.decode()
    assert "tokensPerDay: 0 (the Memory Agent is off)" in shown and "requestsPerHour: no cap" in shown
