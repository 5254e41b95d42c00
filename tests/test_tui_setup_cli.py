"""The setup wizard offers an agent CLI the user already has (issue 33), at 80×24 (textual pilot).

The CLI is a stand-in ``claude`` script on the discovered ``PATH`` (the test's own folder): it
answers ``--version`` like Claude Code, records the command line it was run with, and answers a
headless run with Claude Code's JSON result (or, for the failing case, a login error). The check
the wizard runs is the real one (`cm network-test`'s agent-CLI probe: the confined command line,
private folder, relay socket, ledger row); only the CLI is a stand-in.
"""

from __future__ import annotations

import json
import os

from conftest import db_rows
from tui_support import drive, temp_hosts, wait_for

from cmrunner.manage import setupstate
from cmrunner.tui.app import CmApp

SIZE = (80, 24)
ANSWER = '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"OK",' \
         '"usage":{"input_tokens":12,"output_tokens":2}}'
LOGIN = '{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login"}'


def _fake_claude(folder, runs, answer: str = ANSWER, status: int = 0) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "claude")
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n"
                 'if [ "$1" = "--version" ]; then echo "2.1.328 (Claude Code)"; exit 0; fi\n'
                 f'printf "%s\\n" "$@" > {runs}/argv.$$\n'
                 f"cat > /dev/null\necho '{answer}'\nexit {status}\n")
    os.chmod(path, 0o755)
    return path


def _unframed(text: str) -> str:
    """The flat screen text with the menu's frame at each wrapped line taken out."""
    return text.replace(" ▎ ▊ ", " ")


def _argvs(runs) -> list[list[str]]:
    return [open(os.path.join(runs, name)).read().splitlines() for name in sorted(os.listdir(runs))
            if name.startswith("argv.")]


def _config(home: str) -> dict:
    with open(os.path.join(home, "config.json")) as fh:
        return json.load(fh)


def test_a_found_claude_is_offered_and_choosing_it_saves_the_agent_cli_without_a_key(home, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    claude = _fake_claude(str(tmp_path / "bin"), runs)
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, path=f"{tmp_path / 'bin'}:/usr/bin:/bin")

    async def steps(pilot):
        text = await wait_for(pilot, "1/4 Provider")
        assert "Use Claude Code" in text and "you already have (no API key)" in text
        assert "Use Codex" not in text and "Use Gemini" not in text
        assert ("Not found on PATH: Codex CLI (npm install -g @openai/codex), Gemini CLI (npm install -g "
                "@google/gemini-cli)") in _unframed(text)
        await wait_for(pilot, "Use Claude Code 2.1.328 you already have")  # asked in the background
        await pilot.press("enter")  # the offer is listed first
        text = await wait_for(pilot, "Choose the agents cm should connect to", timeout=60)  # the next step
        assert "API key" not in text
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts, user_home=str(tmp_path / "userhome")), steps, size=SIZE)
    remote = _config(home)["remote"]
    assert remote == {"provider": "agent-cli", "agent": "claude-code", "agentPath": claude}
    assert not os.path.exists(os.path.join(home, ".env")) or "API_KEY" not in open(os.path.join(home, ".env")).read()
    assert setupstate.stage(home) == "integrations"
    # The check ran the runtime's confined command line once, before the save; it went into the ledger.
    (argv,) = _argvs(runs)
    assert argv[0] == "-p" and "--strict-mcp-config" in argv and argv[argv.index("--tools") + 1] == ""
    assert db_rows(home, "SELECT process, api, outcome FROM ledger") == [("network_test", "agent-cli", "ok")]


def test_no_agent_cli_on_path_is_not_offered(home, tmp_path):
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, claude=True, path="/usr/bin:/bin")

    async def steps(pilot):
        text = await wait_for(pilot, "1/4 Provider")
        assert "you already have" not in text
        # Claude Code's configuration folder alone runs nothing: it is named with how to install it.
        assert "Not found on PATH: Claude Code (npm install -g @anthropic-ai/claude-code), Codex CLI" in _unframed(text)
        await pilot.press("enter")  # the first choice is the first API-key preset
        await wait_for(pilot, "2/4 Base URL")
        await pilot.press("escape")
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts), steps, size=SIZE)
    assert not os.path.exists(os.path.join(home, "config.json"))


def test_a_failing_check_keeps_the_wizard_on_the_step_with_its_code(home, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    _fake_claude(str(tmp_path / "bin"), runs, LOGIN, 1)
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, path=f"{tmp_path / 'bin'}:/usr/bin:/bin")

    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("enter")
        text = await wait_for(pilot, "Claude Code was not saved", timeout=60)
        assert "Model setup · Agent CLI" in text and "AGENT_CLI_AUTH" in text and "log in" in text
        assert "Invalid API key" not in text  # the CLI's own output is matched, never shown
        assert "Retry the check" in text
        await pilot.press("enter")  # Retry: the same verdict, still on the step
        await wait_for(pilot, lambda t: len(_argvs(runs)) == 2 and "AGENT_CLI_AUTH" in t, timeout=60)
        await pilot.press("down", "enter")  # Back
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts), steps, size=SIZE)
    assert not os.path.exists(os.path.join(home, "config.json"))
    assert len(_argvs(runs)) == 2


def test_the_configured_cli_is_highlighted_and_choosing_it_again_changes_nothing(home, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    claude = _fake_claude(str(tmp_path / "bin"), runs)
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, path=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    drive(CmApp(home, discover=hosts), _choose_claude, size=SIZE)  # the first run saves it
    saved = open(os.path.join(home, "config.json")).read()
    assert len(_argvs(runs)) == 1

    async def again(pilot):
        await wait_for(pilot, "1/4 Provider")
        menu = pilot.app.screen.query_one("#providers")
        assert menu.get_option_at_index(menu.highlighted).id == "cli:claude-code"
        await pilot.press("enter")
        text = await wait_for(pilot, "Model unchanged")
        assert "nothing was saved" in text

    drive(CmApp(home, start="config", discover=hosts), again, size=SIZE)
    assert open(os.path.join(home, "config.json")).read() == saved
    assert len(_argvs(runs)) == 1  # no second check run for an unchanged choice
    assert _config(home)["remote"]["agentPath"] == claude


async def _choose_claude(pilot) -> None:
    await wait_for(pilot, "Use Claude Code")
    await pilot.press("enter")
    await wait_for(pilot, "Choose the agents cm should connect to", timeout=60)
