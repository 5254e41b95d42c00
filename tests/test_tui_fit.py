"""The management UI at 80×24 (textual pilot): every screen's footer says how to go back, how to
quit and where help is, in full; ``q`` asks before quitting from a deep screen; Esc on the first
step asks instead of quitting silently, and backing out of the model form leaves the configuration
as it was; the import screen keeps its total, permission line and choices in view, PgDn scrolls its
plan, and its result is never cut; long screens scroll with PgDn.

"In view" means: in the plain text of the 80×24 screen as a person sees it (``screen_text``),
compared with every run of whitespace made one space, so a wrapped line still counts and a line cut
off at the bottom does not.
"""

from __future__ import annotations

import os

import pytest
from history_support import run_commits
from tui_support import (
    SCROLLBAR,
    SHARED_KEYS,
    configure_model,
    drive,
    flat,
    model_form,
    open_action,
    screen_text,
    temp_hosts,
    wait_for,
)

from cmrunner.core import config as config_mod
from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp
from cmrunner.tui.home import COLUMNS

pytestmark = pytest.mark.timeout(240)
SIZE = (80, 24)
IMPORT_POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support",
                             "import_policy.py") + ":keep_imported_parts"


def in_view(pilot: object, *texts: str) -> str:
    """Assert each of ``texts`` is whole on the visible screen; returns the flat screen text."""
    shown = flat(screen_text(pilot.app))  # type: ignore[attr-defined]
    for text in texts:
        assert flat(text) in shown, (text, screen_text(pilot.app))  # type: ignore[attr-defined]
    return shown


def footer_in_view(pilot: object) -> str:
    """The whole footer is on screen, names Esc, q and ?, and is the last thing on it."""
    footer = pilot.app.screen.footer()  # type: ignore[attr-defined]
    assert "Esc" in footer and footer.endswith(SHARED_KEYS), footer
    shown = in_view(pilot, footer)
    assert shown.rstrip(SCROLLBAR).rstrip().endswith(flat(footer)), screen_text(pilot.app)  # type: ignore[attr-defined]
    return shown


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _agents_memory(tmp: str) -> str:
    """A user home with a memory file for each of Claude Code, Codex CLI (two) and Gemini CLI:
    a plan taller than the box it scrolls in at 80×24."""
    user = os.path.join(tmp, "userhome")
    _write(os.path.join(user, ".claude", "CLAUDE.md"), "# About me\n\nI prefer Go over Java for services.\n")
    _write(os.path.join(tmp, "codexhome", "memories", "memory_summary.md"),
           "# Memory summary\n\n- The user maintains a Rust CLI named ferrous.\n")
    _write(os.path.join(tmp, "codexhome", "memories", "MEMORY.md"), "# Memory\n\n- Prefers small pull requests.\n")
    _write(os.path.join(user, ".gemini", "GEMINI.md"), "# Gemini notes\n\nThe user writes British English.\n")
    return user


def test_every_home_screen_shows_its_whole_footer_at_80x24(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)
        seen: list[str] = []

        async def steps(pilot):
            await wait_for(pilot, "Model & Configuration")
            footer_in_view(pilot)
            for _title, items in COLUMNS:
                for action, _label in items:
                    await open_action(action, lambda p: p.pause(0.3))(pilot)
                    assert pilot.app.screen.TITLE_TEXT != "cm · Common Memory", action
                    await pilot.pause(0.5)  # a worker's text (checks, plans) lands before the footer is read
                    footer_in_view(pilot)
                    seen.append(action)
                    await pilot.press("escape")
                    await wait_for(pilot, "Model & Configuration")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path)), user_home=str(tmp_path / "userhome")), steps, SIZE)
    assert seen == [k for _t, items in COLUMNS for k, _l in items]


def test_q_asks_before_quitting_from_a_deep_screen_and_quits_at_once_from_home(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    app = CmApp(home, discover=temp_hosts(str(tmp_path)))

    async def steps(pilot):
        await open_action("config", lambda p: wait_for(p, "Current Configuration"))(pilot)
        await pilot.press("q")
        in_view(pilot, "Quit cm? Press q again to quit; any other key stays here.")
        assert pilot.app.is_running
        await pilot.press("down")  # any other key withdraws the question
        await pilot.pause(0.1)
        assert "Quit cm?" not in flat(screen_text(pilot.app))
        await pilot.press("q")
        await wait_for(pilot, "Press q again")
        await pilot.press("escape")  # Esc goes back one level instead
        await wait_for(pilot, "Model & Configuration")
        assert pilot.app.is_running
        await pilot.press("q")  # Home is the top: q quits at once, as its footer says
        await pilot.pause(0.3)
        assert not pilot.app.is_running

    drive(app, steps, SIZE)
    assert app.return_code in (0, None)

    app = CmApp(home, discover=temp_hosts(str(tmp_path)))

    async def twice(pilot):
        await open_action("config", lambda p: wait_for(p, "Current Configuration"))(pilot)
        await pilot.press("q", "q")
        await pilot.pause(0.3)
        assert not pilot.app.is_running

    drive(app, twice, SIZE)


def test_esc_on_the_first_step_asks_and_nothing_is_written(home, tmp_path):
    app = CmApp(home, discover=temp_hosts(str(tmp_path)))

    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        footer_in_view(pilot)
        await pilot.press("escape")
        in_view(pilot, "Quit cm? Nothing of this form is saved: the model configuration stays as it was. "
                       "Press Esc again to quit; any other key stays here.")
        assert pilot.app.is_running
        await pilot.press("enter")  # another key: the question is withdrawn and Enter does its job
        await wait_for(pilot, "2/4 Base URL")
        footer_in_view(pilot)
        await pilot.press("escape")  # a later step goes back a step
        await wait_for(pilot, "1/4 Provider")
        assert pilot.app.is_running
        await pilot.press("escape", "escape")
        await pilot.pause(0.3)
        assert not pilot.app.is_running

    drive(app, steps, SIZE)
    assert not os.path.exists(home)


def test_backing_out_of_the_model_form_leaves_the_configuration_as_it_was(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["fake-model", "other-model"]}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)
        before = {name: open(os.path.join(home, name), "rb").read() for name in ("config.json", ".env")}
        app = CmApp(home, start="config", discover=temp_hosts(str(tmp_path)))

        async def steps(pilot):
            await wait_for(pilot, "1/4 Provider")
            await pilot.press("enter")
            await wait_for(pilot, "2/4 Base URL")  # the configured URL is filled in
            await pilot.press("enter")
            await wait_for(pilot, "3/4 API key")
            await pilot.press(*"sk-another-key-0000", "enter")  # typed, then abandoned
            await wait_for(pilot, "2 models at")
            footer_in_view(pilot)
            await pilot.press("down")  # other-model highlighted, never chosen
            await pilot.press("escape")
            await wait_for(pilot, "3/4 API key")
            footer_in_view(pilot)
            await pilot.press("escape")
            await wait_for(pilot, "2/4 Base URL")
            await pilot.press("escape")
            await wait_for(pilot, "1/4 Provider")
            await pilot.press("q")
            in_view(pilot, "Nothing of this form is saved")
            await pilot.press("q")
            await pilot.pause(0.3)
            assert not pilot.app.is_running

        drive(app, steps, SIZE)
    after = {name: open(os.path.join(home, name), "rb").read() for name in ("config.json", ".env")}
    assert after == before
    assert config_mod.load(home).remote["model"] == "fake-model"


def test_first_run_at_80x24_the_result_agrees_with_its_footer_and_the_import_fits(home, tmp_path, monkeypatch):
    user = _agents_memory(str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codexhome"))
    hosts = temp_hosts(str(tmp_path), pi=False, claude=True, gemini=True)
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [], "policy": IMPORT_POLICY}) as fake:
        app = CmApp(home, discover=hosts, user_home=user)
        seen: dict[str, object] = {}

        async def steps(pilot):
            await model_form(pilot, fake.base_url)
            await wait_for(pilot, "1 model at")
            await pilot.press("enter")
            await wait_for(pilot, "Agent Integration")
            await pilot.press("escape")  # the agents step is a first screen now: it asks, naming what is kept
            in_view(pilot, "Quit setup? The model is saved; no agent is connected yet")
            await pilot.press("enter")
            await wait_for(pilot, "Installation check:", timeout=60)
            shown = footer_in_view(pilot)
            assert "Enter next: bring in what your agents know, then Home" in shown
            screen = pilot.app.screen
            before = screen.scroll_y
            await pilot.press("pagedown")  # the result is longer than 24 rows: PgDn scrolls it
            await pilot.pause(0.2)
            assert screen.scroll_y > before
            body = flat(" ".join(str(text.render()) for text in screen.query("Text")))
            assert "Enter: bring in what your agents already know" in body  # body and footer agree
            await pilot.press("enter")
            await wait_for(pilot, "Skip: import nothing", timeout=60)
            footer_in_view(pilot)
            in_view(pilot, "Permission: document imports are off (disclosure.allowedProvenance lacks document_import). "
                           "Choosing Import grants it, saved in config.json; Skip leaves it off.",
                    "Import 4 files and allow document imports", "Skip: import nothing")
            assert "To import: 4 files, ~" in flat(screen_text(pilot.app))
            box = pilot.app.screen.query_one("#plan-box")
            choice = pilot.app.screen.query_one("#choice")
            assert box.max_scroll_y > 0  # the plan is taller than its box at this size
            await pilot.press("pagedown")
            await pilot.pause(0.2)
            assert box.scroll_y > 0 and choice.highlighted == 0  # PgDn scrolled; Import stays highlighted
            await pilot.press("enter")
            await wait_for(pilot, lambda t: "Result:" in t and "Enter continue" in t, timeout=150)
            footer_in_view(pilot)
            result = str(pilot.app.screen.query_one("#plan").render())
            seen["result"] = result
            lines = [line for line in result.splitlines()[1:] if " → " in line]
            visible = flat(screen_text(pilot.app))
            for _page in range(10):  # every result line can be read whole by scrolling the box
                await pilot.press("pagedown")
                await pilot.pause(0.1)
                visible += " " + flat(screen_text(pilot.app))
            for line in lines:
                assert flat(line) in visible, (line, visible)
            seen["lines"] = lines
            await pilot.press("enter")
            await wait_for(pilot, "Model & Configuration")
            footer_in_view(pilot)

        drive(app, steps, SIZE)
    assert len(seen["lines"]) == 4, seen["result"]  # type: ignore[arg-type]


def test_network_settings_keep_the_saved_state_and_an_error_in_view_at_80x24(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)

    async def then(pilot):
        await wait_for(pilot, "Saved: mode direct")
        footer_in_view(pilot)
        await pilot.press("down", "down", "enter")  # custom: the proxy field
        await pilot.press(*"ftp://proxy:1080", "enter")
        await wait_for(pilot, "PROXY_URL_INVALID")
        footer_in_view(pilot)
        in_view(pilot, "Saved: mode direct", "custom — an explicit HTTP(S) proxy with its own bypass list",
                "Extra CA certificate file (absolute path to PEM, ≤ 1 MiB; empty for none):")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("network", then), SIZE)
    assert config_mod.load(home).remote["proxy"] == {"mode": "direct"}  # the refused URL saved nothing


def test_agents_keep_the_list_and_the_highlighted_limits_in_view_and_pgdn_scrolls_the_details(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    hosts = temp_hosts(str(tmp_path / ("a-long-folder-name-" * 3)), chatgpt=True, claude=True, gemini=True)

    async def then(pilot):
        await wait_for(pilot, "[ ] Codex CLI")
        footer_in_view(pilot)
        in_view(pilot, "[ ] Pi", "[ ] Gemini CLI", "Pi, limits:")
        box = pilot.app.screen.query_one("#details-box")
        checklist = pilot.app.screen.query_one("#agents")
        highlighted = checklist.highlighted
        assert box.max_scroll_y > 0  # five agents' long paths do not fit 80×24 whole
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert box.scroll_y > 0 and checklist.highlighted == highlighted  # the details scrolled, not the list
        await pilot.press("down")
        await pilot.pause(0.1)
        in_view(pilot, "Codex CLI, limits:")  # the limits follow the highlight and stay in view

    drive(CmApp(home, discover=hosts), open_action("agents", then), SIZE)


def test_history_pgdn_reads_a_long_why_while_the_versions_stay_put_at_80x24(home, tmp_path):
    run_commits(home, tmp_path, count=3)
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)

    async def then(pilot):
        await wait_for(pilot, "put by memory_agent (retain)")
        await pilot.press("w")  # why: longer than what is left of 24 rows below three versions
        await wait_for(pilot, "evidence of the commits that wrote its text")
        footer_in_view(pilot)
        in_view(pilot, "v3 preferences / Indentation remove by memory_agent (forget)")
        box = pilot.app.screen.query_one("#detail-box")
        versions = pilot.app.screen.query_one(".versions")
        highlighted = versions.highlighted
        assert box.max_scroll_y > 0
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert box.scroll_y > 0 and versions.highlighted == highlighted  # the why scrolled, not the list
        in_view(pilot, "receipt")  # its last lines, the commit's receipt, are now readable

    drive(CmApp(home), open_action("history", then), SIZE)
