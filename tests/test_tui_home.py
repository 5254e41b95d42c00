"""The management home and its columns (textual pilot): navigation, memory browsing, configuration,
network settings, the connection test and Agent Integration changes."""

from __future__ import annotations

import json
import os

from tui_support import KEY, configure_model, drive, open_action, screen_text, temp_hosts, wait_for

from cmrunner.core import config as config_mod, envfile, projects
from cmrunner.core.home import DataPaths
from cmrunner.manage import setupstate
from cmrunner.manage.integrations import manager
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp


def ready(home: str, base_url: str = "http://127.0.0.1:9/v1") -> None:
    configure_model(home, base_url)
    setupstate.finish(home)


def write_doc(home: str, target: str, text: str) -> None:
    path = DataPaths(config_mod.load(home).data_root).document(target)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def test_home_has_three_columns_remembers_the_last_action_and_esc_quits(home, tmp_path):
    ready(home)
    hosts = temp_hosts(str(tmp_path))

    async def first(pilot):
        text = await wait_for(pilot, "Agent Integration")
        for column in ("Memory Control", "Model & Configuration", "Search / View Memory", "Uninstall cm",
                       "model fake-model at http://127.0.0.1:9/v1 · key set · agents: none"):
            assert column in text
        await pilot.press("right", "down", "enter")  # Memory Control → Adjust Memory
        await wait_for(pilot, "Memory Control · Adjust Memory")
        await pilot.press("escape")
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("escape")

    app = CmApp(home, discover=hosts)
    drive(app, first)
    assert app.is_running is False and setupstate.last_action(home) == "adjust"

    async def second(pilot):
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("enter")  # the remembered action is highlighted
        await wait_for(pilot, "Memory Control · Adjust Memory")
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=hosts), second)


def test_view_memory_pages_and_searches_authorized_documents_without_sqlite(home, tmp_path):
    ready(home)

    async def empty(pilot):
        text = await wait_for(pilot, "No memory is stored yet")
        assert "Profile (empty)" in text and "Preferences (empty)" in text
        await pilot.press("escape")

    drive(CmApp(home, start="manage", discover=temp_hosts(str(tmp_path))), open_action("view", empty))
    assert not os.path.exists(DataPaths(config_mod.load(home).data_root).db)  # browsing never opens SQLite

    body = "# Profile\n\n" + "".join(f"## Fact {i}\nline number {i}\n\n" for i in range(30))
    write_doc(home, "profile", body)
    write_doc(home, "preferences", "# Preferences\n\n## Editor\nI prefer Vim keybindings.\n")
    project = projects.register(DataPaths(config_mod.load(home).data_root), str(tmp_path), "Secret project")
    write_doc(home, project.scope, "# Project\n\n## Hidden\nnot authorized\n")

    async def browse(pilot):
        text = await wait_for(pilot, "Authorized documents")
        assert "Secret project" not in text  # not in disclosure.allowedScopes
        await pilot.press("enter")
        text = await wait_for(pilot, "page 1/")
        assert "Fact 0" in text and "Fact 29" not in text
        await pilot.press("pagedown", "pagedown", "pagedown", "pagedown", "pagedown", "pagedown")
        text = await wait_for(pilot, "page 6/6")  # clamped at the last page
        assert "line number 29" in text and "Fact 0" not in text
        await pilot.press("pageup")
        await wait_for(pilot, "page 5/6")
        await pilot.press("escape")
        await wait_for(pilot, "Authorized documents")
        await pilot.press("tab")
        await pilot.press(*"vim KEYBINDINGS", "enter")
        text = await wait_for(pilot, "1 matching line:")
        assert "Preferences, line 4: I prefer Vim keybindings." in text
        await pilot.press("enter")
        await wait_for(pilot, "Memory · Preferences")
        await pilot.press("escape")
        await wait_for(pilot, "1 matching line:")
        pilot.app.screen.query_one("#query").value = "hidden"
        pilot.app.screen.query_one("#query").focus()
        await pilot.press("enter")
        await wait_for(pilot, "No matches for “hidden”.")
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("view", browse))


def test_view_memory_shows_hostile_characters_escaped(home, tmp_path):
    ready(home)
    write_doc(home, "profile", "# Profile\n\n## Prompt\nred \x1b[31mALERT\x07 nul\x00 csi\x9b2J\n"
                               "## Order\nabc\u202edcba one\u2028two\r\n")

    async def view(pilot):
        await wait_for(pilot, "Authorized documents")
        await pilot.press("enter")
        await wait_for(pilot, "page 1/")
        text = screen_text(pilot.app)
        assert "red ^[[31mALERT^G nul^@ csi\\u009b2J" in text
        assert "abc\\u202edcba one\\u2028two" in text, "U+2028 is shown, not obeyed as a line break"
        assert not any(c in text for c in "\x00\x07\x1b\x9b\u202e\u2028\r")
        await pilot.press("escape")
        await wait_for(pilot, "Authorized documents")
        await pilot.press("tab")
        await pilot.press(*"ALERT", "enter")
        text = await wait_for(pilot, "1 matching line:")
        assert "^[[31mALERT^G" in text and "\x1b" not in screen_text(pilot.app)
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("view", view))


def test_current_configuration_shows_paths_and_conceals_secrets(home, tmp_path):
    ready(home)
    envfile.update(home, {"COMMON_MEMORY_PROXY_URL": "http://alice:hunter2-secret@proxy.example:3128"})
    data = config_mod.load(home).data
    data["remote"]["proxy"] = {"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"}
    config_mod.save(home, data)

    async def steps(pilot):
        text = await wait_for(pilot, "Current Configuration")
        await pilot.pause(0.2)
        raw = screen_text(pilot.app)
        for secret in (KEY, "hunter2", "alice"):
            assert secret not in raw
        for shown in (os.path.join(home, "config.json"), "Data size not created yet", "Model fake-model (responses)",
                      "Network mode custom", "Proxy URL set (private)", "proxy http://proxy.example:3128",
                      "COMMON_MEMORY_PROXY_URL: set"):
            assert shown in text, shown
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("config", steps))
    assert not os.path.exists(config_mod.load(home).data_root)


def test_network_settings_validate_in_place_and_save_privately(home, tmp_path):
    ready(home)
    before = open(os.path.join(home, "config.json")).read()
    big = tmp_path / "big.pem"
    big.write_bytes(b"-----BEGIN CERTIFICATE-----\n" + b"A" * (1 << 20))
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")

    async def steps(pilot):
        text = await wait_for(pilot, "Network Settings")
        assert "Saved: mode direct" in text
        await pilot.press("down", "down", "enter")  # custom → focus the proxy URL
        screen = pilot.app.screen
        for field, value, message in (
                ("#proxy", "socks4://proxy:1080", "PROXY_URL_INVALID"),
                ("#proxy", "http://proxy:99999", "PROXY_URL_INVALID"),
                ("#noproxy", "http://bad/url, .ok.example", "NO_PROXY_INVALID"),
                ("#cafile", str(not_pem), "CA_FILE_INVALID"),
                ("#cafile", str(big), "larger than 1 MiB")):
            screen.query_one("#proxy").value = "http://user:pw-secret@proxy.local:8080" if field != "#proxy" else value
            screen.query_one("#noproxy").value = value if field == "#noproxy" else ""
            screen.query_one("#cafile").value = value if field == "#cafile" else ""
            screen.query_one(field).focus()
            await pilot.press("enter")
            text = await wait_for(pilot, message)
            assert "nothing was saved" in text
            assert open(os.path.join(home, "config.json")).read() == before
        screen.query_one("#proxy").value = "http://user:pw-secret@proxy.local:8080"
        screen.query_one("#noproxy").value = ".internal.example, 10.0.0.0/8"
        screen.query_one("#cafile").value = ""
        await pilot.press("enter")
        text = await wait_for(pilot, "Saved. No agent is connected to cm yet, so nothing needs a restart.")
        assert "route: proxy http://proxy.local:8080 (custom proxy)" in text and "pw-secret" not in text
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("network", steps))
    remote = config_mod.load(home).remote
    assert remote["proxy"] == {"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL",
                               "noProxy": ".internal.example, 10.0.0.0/8"}
    assert "pw-secret" not in open(os.path.join(home, "config.json")).read()
    assert envfile.read(home)["COMMON_MEMORY_PROXY_URL"] == "http://user:pw-secret@proxy.local:8080"


def test_network_shortcut_env_mode_refuses_a_bad_no_proxy(home, tmp_path, monkeypatch):
    ready(home)
    monkeypatch.setenv("NO_PROXY", "example.com, http://bad/path")

    async def steps(pilot):
        await wait_for(pilot, "Network Settings")
        await pilot.press("down")  # env
        pilot.app.screen.query_one("#cafile").focus()
        await pilot.press("enter")
        text = await wait_for(pilot, "NO_PROXY_INVALID")
        assert "NO_PROXY entry 2" in text
        monkeypatch.setenv("NO_PROXY", "example.com")
        await pilot.press("enter")
        await wait_for(pilot, "Saved. No agent is connected to cm yet")
        await pilot.press("escape")

    app = CmApp(home, start="network", discover=temp_hosts(str(tmp_path)))
    drive(app, steps)
    assert config_mod.load(home).remote["proxy"] == {"mode": "env"}


def test_model_connection_test_reports_route_and_outcome(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"replies": [{"text": "OK"}, {"error": {"status": 401}}]}) as fake:
        ready(home, fake.base_url)

        async def steps(pilot):
            text = await wait_for(pilot, "Outcome:")
            assert "Route: direct (mode direct: direct mode ignores proxy variables)" in text
            assert "Outcome: OK in" in text and "not that the Writer can commit" in text
            await pilot.press("r")
            text = await wait_for(pilot, "Outcome: AUTHENTICATION")
            assert "httpStatus 401" in text and KEY not in text
            await pilot.press("escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("test", steps))
        assert len(fake.model_requests()) == 2


def test_agent_integration_keeps_removes_and_installs_and_esc_cancels(home, tmp_path):
    ready(home)
    hosts = temp_hosts(str(tmp_path), chatgpt=True)
    manager.apply(home, manager.plan(home, ["pi", "codex"], hosts=hosts()))
    pi_files = sorted(os.listdir(tmp_path / "piagent" / "extensions" / "common-memory"))

    async def steps(pilot):
        text = await wait_for(pilot, "Agent Integration")
        await pilot.press("enter")
        text = await wait_for(pilot, "[x] Pi")
        assert "[x] Codex CLI" in text and "[ ] ChatGPT Desktop (Work)" in text
        await pilot.press("down", "space", "escape")  # untick Codex, then cancel
        await wait_for(pilot, "cm · Common Memory")
        assert sorted(manager.installed(home)) == ["codex", "pi"]
        await pilot.press("enter")
        await wait_for(pilot, "[x] Codex CLI")
        await pilot.press("down", "space", "down", "space", "enter")  # Pi + Codex → Pi + ChatGPT
        text = await wait_for(pilot, "AI Understanding Import")
        await pilot.press("enter")  # the default: no import server
        text = await wait_for(pilot, "Installation check:", timeout=30)
        assert "Installed: ChatGPT Desktop (Work)" in text and "Removed: Codex CLI" in text and "Kept: Pi" in text
        await pilot.press("enter")
        text = await wait_for(pilot, "agents: Pi, ChatGPT Desktop (Work)")
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts), steps)
    assert sorted(manager.installed(home)) == ["chatgpt", "pi"]
    assert not manager.installed(home)["chatgpt"]["init"]
    assert sorted(os.listdir(tmp_path / "piagent" / "extensions" / "common-memory")) == pi_files
    assert not os.path.exists(tmp_path / "codexhome" / "common-memory.config.toml")
    assert "agent_observation" not in config_mod.load(home).data["disclosure"]["allowedProvenance"]


def test_import_server_needs_a_separate_disclosure_confirmation(home, tmp_path):
    ready(home)
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, chatgpt=True)

    async def steps(pilot):
        await wait_for(pilot, "Agent Integration")
        await pilot.press("enter")
        await wait_for(pilot, "[ ] ChatGPT Desktop (Work)")
        await pilot.press("end", "space", "enter")
        await wait_for(pilot, "AI Understanding Import")
        await pilot.press("down", "enter")
        text = await wait_for(pilot, "Disclosure confirmation")
        assert "agent_observation" in text
        await pilot.press("down", "enter")
        text = await wait_for(pilot, "Installation check:", timeout=30)
        assert "agent_observation is now allowed" in text
        await pilot.press("enter", "escape")

    drive(CmApp(home, discover=hosts), steps)
    assert manager.installed(home)["chatgpt"]["init"] is True
    assert "agent_observation" in config_mod.load(home).data["disclosure"]["allowedProvenance"]
    base = open(tmp_path / "codexhome" / "config.toml").read()
    assert "[mcp_servers.common_memory_init]" in base and json.dumps("chatgpt-desktop") in base


def test_a_changed_host_file_is_reported_in_place_and_nothing_changes(home, tmp_path):
    ready(home)
    hosts = temp_hosts(str(tmp_path), pi=False)
    manager.apply(home, manager.plan(home, ["codex"], hosts=hosts()))
    profile = tmp_path / "codexhome" / "common-memory.config.toml"
    profile.write_text(profile.read_text() + "# my own tweak\n")

    async def steps(pilot):
        await wait_for(pilot, "Agent Integration")
        await pilot.press("enter")
        await wait_for(pilot, "[x] Codex CLI")
        await pilot.resize_terminal(80, 30)  # a resize mid-change keeps the selection
        await pilot.press("down", "space", "enter")
        text = await wait_for(pilot, "HOST_FILE_MODIFIED")
        assert "nothing was changed" in text and "[ ] Codex CLI" in text
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=hosts), steps)
    assert profile.read_text().endswith("# my own tweak\n") and list(manager.installed(home)) == ["codex"]


def test_agent_integration_lists_claude_code_and_gemini_and_installs_them(home, tmp_path):
    ready(home)
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, claude=True, gemini=True)
    settings = tmp_path / "userhome" / ".gemini" / "settings.json"
    settings.write_text('{\n  // mine\n  "ui": {"theme": "GitHub"}\n}\n')

    async def steps(pilot):
        await wait_for(pilot, "Agent Integration")
        await pilot.press("enter")
        text = await wait_for(pilot, "[ ] Claude Code")
        assert "[ ] Gemini CLI" in text and "Claude Code (unavailable)" not in text
        assert "Claude Code, limits: new sessions load the hooks" in text  # the highlighted one's
        await pilot.press("space", "down", "space", "enter")
        text = await wait_for(pilot, "Installation check:", timeout=30)
        assert "Installed: Claude Code, Gemini CLI" in text
        text = await wait_for(pilot, "Gemini CLI read MCP", timeout=60)
        assert "fail" not in text.split("Installation check:")[1].split("not proven")[0]
        await pilot.press("enter", "escape")

    drive(CmApp(home, discover=hosts), steps)
    assert sorted(manager.installed(home)) == ["claude-code", "gemini"]
    assert "// mine" in settings.read_text() and "hook gemini --home" in settings.read_text()
    assert "hook claude --home" in (tmp_path / "userhome" / ".claude" / "settings.json").read_text()


def test_home_names_every_managed_agent_and_restarts_only_the_installed_ones(home, tmp_path):
    ready(home)
    # The ownership manifest as `cm agents install` leaves it for Claude Code and Codex.
    with open(os.path.join(home, "integrations.json"), "w") as handle:
        json.dump({"version": 2, "hosts": {"codex": {"root": str(tmp_path)}, "claude-code": {"root": str(tmp_path)}},
                   "files": {}, "entries": []}, handle)

    async def steps(pilot):
        await wait_for(pilot, "Enter save · Esc back")
        pilot.app.screen.query_one("#cafile").focus()
        await pilot.press("enter")
        text = await wait_for(pilot, "Saved. Restart Codex CLI and Claude Code if running, so they use the new route.")
        assert "Pi" not in text.split("Saved.")[1].split(".")[0]
        await pilot.press("escape")

    async def home_screen(pilot):
        await wait_for(pilot, "cm · Common Memory")
        label = pilot.app.screen.query_one("#column-0").get_option_at_index(0).prompt
        assert str(label) == "Choose agents (Codex, Claude Code, Gemini, Pi, ChatGPT)"
        await pilot.press("escape")

    drive(CmApp(home, start="network", discover=temp_hosts(str(tmp_path))), steps)
    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), home_screen, size=(80, 24))
