"""Every screen reachable from Home fits 80×24 (textual pilot on a real home with real history, a
trash entry, a hand-written secret and usage rows): ``tui_support.check_fits`` on each — the footer
whole and last, nothing cut, and whatever holds more than it shows scrolls with PgDn without moving
an unrelated highlight. The deeper states are checked too: a History version's diff and why, search
results, an open document, the uninstall steps, Adjust Memory with its result and Processing Status
after it, and every first-run step (provider, URL, a 31-model list, key, agents, ChatGPT's import
server, the result and the import plan)."""

from __future__ import annotations

import os
import sys
import time

import pytest
from history_support import run_commits
from tui_support import EDIT_POLICY, check_fits, configure_model, drive, model_form, open_action, temp_hosts, wait_for

from cmrunner.core import config as config_mod, ledger, store
from cmrunner.core.home import DataPaths
from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp
from cmrunner.tui.home import COLUMNS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from secrets_corpus import SECRETS

pytestmark = pytest.mark.timeout(300)
SIZE = (80, 24)
LONG = ("Vim keybindings in every editor I use: the terminal one, the one in the IDE, and the one on each "
        "server I log in to.")  # a line longer than a search result shows
TOKEN = next(text for fmt, text in SECRETS if fmt == "github").split()[-1]
# What each screen shows once its content has loaded (a worker's text lands before the check).
LOADED = {"agents": "[ ] Codex CLI", "check": "Installation check", "import": "Continue",
          "view": "Authorized documents", "adjust": "Notice:", "status": "Writer:",
          "secrets": "withheld", "history": "put by memory_agent (retain)", "trash": "Indentation",
          "config": "Current Configuration", "model": "1/4 Provider", "network": "Saved: mode direct",
          "test": "Outcome:", "usage": "Tokens per day, last 30 days", "uninstall": "Continue"}


def _lived_in(home: str, tmp_path) -> DataPaths:
    """Three real commits (the last forgets a section: history and the trash), a hand-written
    section holding a token, and two days of usage."""
    paths, _after = run_commits(home, tmp_path, count=3)
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    with open(paths.document("preferences"), "a", encoding="utf-8") as handle:
        handle.write(f"\n## Editor\n{LONG}\n\n## Deploy\nThe CI publishes with {TOKEN} every Friday.\n")
    conn = store.open_store(paths)
    now = int(time.time() * 1000)
    with store.immediate(conn):
        for back, tokens in ((2, 4000), (0, 1000)):
            ledger.append(conn, ledger.Entry(now - back * 86_400_000, "memory_agent", "job", 1, 1, "api.example.com",
                                             "gpt-x", "responses", ("global",), ("user_explicit",), 4096, 1024,
                                             tokens, None, 100, None, "provider", 900, "ok"))
    conn.close()
    return paths


def _app(home: str, tmp_path) -> CmApp:
    hosts = temp_hosts(str(tmp_path / ("a-long-folder-name-" * 2)), chatgpt=True, claude=True, gemini=True)
    return CmApp(home, discover=hosts, user_home=str(tmp_path / "userhome"), cwd=str(tmp_path))


def test_every_screen_reachable_from_home_fits_at_80x24(home, tmp_path):
    _lived_in(home, tmp_path)
    checked: list[str] = []

    async def steps(pilot):
        await wait_for(pilot, "Model & Configuration")
        await check_fits(pilot)
        for _title, items in COLUMNS:
            for action, _label in items:
                await open_action(action, lambda p, a=action: wait_for(p, LOADED[a], timeout=60))(pilot)
                await pilot.pause(0.3)
                await check_fits(pilot)
                checked.append(action)
                await pilot.press("escape")
                await wait_for(pilot, "Model & Configuration")

    drive(_app(home, tmp_path), steps, SIZE)
    assert checked == [k for _t, items in COLUMNS for k, _l in items]


def test_the_deeper_screens_fit_at_80x24(home, tmp_path):
    _lived_in(home, tmp_path)

    async def history(pilot):
        await wait_for(pilot, "put by memory_agent (retain)")
        await pilot.press("down")
        await wait_for(pilot, "-Tabs in Go.")  # a version's diff
        await check_fits(pilot)
        await pilot.press("w")
        await wait_for(pilot, "evidence of the commits that wrote its text")
        await check_fits(pilot)
        await pilot.press("escape")

    async def view(pilot):
        await wait_for(pilot, "Authorized documents")
        await pilot.press("enter")
        await wait_for(pilot, "page 1/")
        await check_fits(pilot)
        await pilot.press("escape", "tab", *"Vim", "enter")
        await wait_for(pilot, "matching line")
        shown = await check_fits(pilot)
        hit = str(pilot.app.screen.query_one("#results").get_option_at_index(0).prompt)
        assert hit.endswith("…") and LONG[:40] in hit and LONG[:40] in shown  # cut on purpose, and says so
        await pilot.press("escape")

    async def uninstall(pilot):
        await wait_for(pilot, "Continue")
        await pilot.press("enter")
        await wait_for(pilot, "Uninstall · Memory Data")
        await check_fits(pilot)
        await pilot.press("enter")
        await wait_for(pilot, "Memory Data will be kept")
        await check_fits(pilot)
        await pilot.press("escape", "escape")

    async def steps(pilot):
        for action, then in (("history", history), ("view", view), ("uninstall", uninstall)):
            await open_action(action, then)(pilot)
            await wait_for(pilot, "Model & Configuration")

    drive(_app(home, tmp_path), steps, SIZE)


def test_the_first_run_steps_fit_at_80x24(home, tmp_path, monkeypatch):
    codex = tmp_path / "a-long-folder-name-a-long-folder-name-" / "codexhome" / "memories"
    codex.mkdir(parents=True)
    monkeypatch.setenv("CODEX_HOME", str(codex.parent))  # the import step reads Codex's memory from here
    (codex / "MEMORY.md").write_text("# Memory\n\n- Prefers small pull requests.\n", encoding="utf-8")
    models = {"models": ["fake-model", *(f"fake-model-{i}" for i in range(30))]}
    with fakemodel.running(str(tmp_path / "fake"), models) as fake:
        async def steps(pilot):
            await wait_for(pilot, "1/4 Provider")
            await check_fits(pilot)  # the presets: longer than 24 rows
            await pilot.press("enter")
            await wait_for(pilot, "2/4 Base URL")
            await check_fits(pilot)
            await pilot.press("escape")
            await model_form(pilot, fake.base_url)
            await wait_for(pilot, "31 models at")
            await check_fits(pilot)
            await pilot.press("escape")
            await wait_for(pilot, "3/4 API key")
            await check_fits(pilot)
            await pilot.press("enter")
            await wait_for(pilot, "31 models at")
            await pilot.press("enter")  # fake-model, the first
            await wait_for(pilot, "Agent Integration")
            await check_fits(pilot)
            await pilot.press("enter")
            await wait_for(pilot, "AI Understanding Import")  # ChatGPT's optional import server
            await check_fits(pilot)
            await pilot.press("enter")  # do not install it
            await wait_for(pilot, "Installation check:", timeout=60)
            await check_fits(pilot)
            await pilot.press("enter")
            await wait_for(pilot, "Skip: import nothing", timeout=60)
            await check_fits(pilot)

        drive(_app(home, tmp_path), steps, SIZE)
    assert config_mod.load(home).remote["model"] == "fake-model"


def test_adjust_memory_with_its_result_fits_at_80x24(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": EDIT_POLICY}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def then(pilot):
            await wait_for(pilot, "Notice:")
            await check_fits(pilot)
            await pilot.press(*"Please remember that I prefer tabs over spaces in every project", "enter")
            await wait_for(pilot, "Status: processed", timeout=90)
            await check_fits(pilot)
            await pilot.press("escape")
            await open_action("status", lambda p: wait_for(p, "Adjust Memory requests"))(pilot)
            await check_fits(pilot)

        drive(_app(home, tmp_path), open_action("adjust", then), SIZE)
