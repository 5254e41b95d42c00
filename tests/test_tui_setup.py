"""First-run setup in the management UI (textual pilot): the model form, agents, resume, Esc paths."""

from __future__ import annotations

import json
import os
import socket
import stat

from conftest import run_cm
from tui_support import KEY, configure_model, drive, model_form, temp_hosts, wait_for

from cmrunner.manage import setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp


def test_first_run_configures_the_model_from_the_model_list_and_installs_codex(home, tmp_path):
    hosts = temp_hosts(str(tmp_path), pi=False)
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        app = CmApp(home, discover=hosts, user_home=str(tmp_path / "userhome"))

        async def steps(pilot):
            await model_form(pilot, fake.base_url + "/")
            text = await wait_for(pilot, "fake-model")
            assert "1 model at" in text
            await pilot.press("enter")
            text = await wait_for(pilot, "Agent Integration")
            assert "[x] Codex CLI" in text and "Pi (unavailable)" in text
            assert "ChatGPT Desktop (Work) (unavailable)" in text
            assert setupstate.stage(home) == "integrations"  # the model is committed, agents pending
            await pilot.press("enter")
            text = await wait_for(pilot, "Installation check:", timeout=30)
            assert "Installed: Codex CLI" in text and "Setup is complete" in text
            assert "ok Codex CLI read MCP" in text and "not proven:" in text
            await pilot.press("enter")

        drive(app, steps)
        listing = [r for r in fake.requests() if r["method"] == "GET"]
    assert [r["path"] for r in listing] == ["/v1/models"] and listing[0]["authorized"]
    config = json.load(open(os.path.join(home, "config.json")))
    remote = config["remote"]
    assert remote["baseUrl"] == fake.base_url and remote["model"] == "fake-model" and remote["preset"] == "openai"
    assert remote["api"] == "responses" and remote["proxy"] == {"mode": "direct"}
    assert remote["apiKeySource"] == "private-env" and remote["apiKeyEnv"].startswith("COMMON_MEMORY_API_KEY_")
    env_file = os.path.join(home, ".env")
    assert f"{remote['apiKeyEnv']}={KEY}" in open(env_file).read()
    assert stat.S_IMODE(os.stat(env_file).st_mode) == 0o600
    assert KEY not in open(os.path.join(home, "config.json")).read()
    assert setupstate.stage(home) is None
    assert os.path.isfile(tmp_path / "codexhome" / "common-memory.config.toml")


def test_an_interrupted_setup_resumes_its_integration_step(home, tmp_path):
    hosts = temp_hosts(str(tmp_path))
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        async def first(pilot):
            await model_form(pilot, fake.base_url)
            await wait_for(pilot, "fake-model")
            await pilot.press("enter")
            await wait_for(pilot, "Agent Integration")
            await pilot.press("space")  # untick Pi
            await pilot.press("ctrl+c")  # interrupted before installing

        drive(CmApp(home, discover=hosts), first)
    assert setupstate.stage(home) == "integrations"
    assert not os.path.exists(os.path.join(home, "integrations.json"))

    async def second(pilot):
        text = await wait_for(pilot, "Agent Integration")
        assert "Provider" not in text  # the model form is not repeated
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts), second)
    setupstate.record_selection(home, ["pi"], False)  # as if the crash came after choosing

    async def third(pilot):
        text = await wait_for(pilot, "Agent Integration")
        assert "[x] Pi" in text and "[ ] Codex CLI" in text
        await pilot.press("enter")
        await wait_for(pilot, "Installed: Pi")
        await wait_for(pilot, "Installation check:", timeout=30)

    drive(CmApp(home, discover=hosts), third)
    assert setupstate.stage(home) is None
    assert os.path.isfile(tmp_path / "piagent" / "extensions" / "common-memory" / "index.ts")


def test_escape_before_the_model_is_chosen_writes_nothing(home, tmp_path):
    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("down", "enter")  # DeepSeek
        text = await wait_for(pilot, "2/4 Base URL")
        assert "https://api.deepseek.com/v1" in text
        await pilot.press("escape")
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("escape")

    app = CmApp(home, discover=temp_hosts(str(tmp_path)))
    drive(app, steps)
    assert app.return_code in (0, None)
    assert not os.path.exists(home)


def test_bad_input_gets_a_message_in_place_and_loses_nothing(home, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()

    async def steps(pilot):
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("enter")
        await wait_for(pilot, "2/4 Base URL")
        pilot.app.screen.query_one("#url").value = "ftp://nowhere"
        await pilot.press("enter")
        await wait_for(pilot, "must start with http:// or https://")
        pilot.app.screen.query_one("#url").value = f"http://127.0.0.1:{port}/v1"
        await pilot.press("enter")
        await wait_for(pilot, "3/4 API key")
        await pilot.press("enter")
        await wait_for(pilot, "enter the API key")  # an empty key is refused in place
        await pilot.press(*"sk-unused")
        await pilot.press("enter")
        text = await wait_for(pilot, "could not be loaded")
        assert "MODEL_UNREACHABLE" in text and f"127.0.0.1:{port}/v1/models" in text and "Retry" in text
        assert "Back: change the base URL" in text and "Type the model name" not in text  # a dead server is no list
        assert not os.path.exists(os.path.join(home, "config.json"))  # nothing committed
        await pilot.press("down", "enter")
        await wait_for(pilot, "2/4 Base URL")
        await pilot.press("escape")
        await wait_for(pilot, "1/4 Provider")
        await pilot.press("escape")

    drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
    assert not os.path.exists(os.path.join(home, "config.json")) and not os.path.exists(os.path.join(home, ".env"))


def test_custom_preset_lists_the_models_and_change_model_keeps_the_key(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["fake-model", "other-model"]}) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)
        config = json.load(open(os.path.join(home, "config.json")))
        config["remote"]["reasoningEffort"] = "high"
        json.dump(config, open(os.path.join(home, "config.json"), "w"))
        key_env = config["remote"]["apiKeyEnv"]

        async def steps(pilot):
            await wait_for(pilot, "Model & Configuration")
            await pilot.press("right", "right", "down", "enter")  # Change Model / Provider
            await wait_for(pilot, "1/4 Provider")
            await pilot.press("end", "enter")  # Custom
            text = await wait_for(pilot, "2/4 Base URL")
            assert "Custom" in text
            pilot.app.screen.query_one("#url").value = fake.base_url
            await pilot.press("enter")
            text = await wait_for(pilot, "3/4 API key")
            assert "leave empty to keep the current key" in text
            await pilot.press("enter")
            text = await wait_for(pilot, "2 models at")  # Custom lists the server's models too
            assert "other-model" in text
            await pilot.press("down", "enter")
            text = await wait_for(pilot, "Model saved")
            assert "cm · Common Memory" in text and "other-model" in text
            await pilot.press("escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps)
        assert [r["path"] for r in fake.requests() if r["method"] == "GET"] == ["/v1/models"]
        assert [r.get("cue") for r in fake.requests() if r["method"] == "POST"] == ["probe", "probe"]
    remote = json.load(open(os.path.join(home, "config.json")))["remote"]
    assert remote["model"] == "other-model" and remote["preset"] == "custom" and remote["api"] == "chat_completions"
    assert remote["apiKeyEnv"] == key_env and "reasoningEffort" not in remote


def test_outside_a_terminal_cm_prints_guidance_and_the_wizards_refuse(home):
    plain = run_cm([])
    assert plain.returncode == 0
    assert b"needs" not in plain.stderr and b"cm status" in plain.stdout and b"TTY" in plain.stdout
    for args in (["config"], ["config", "--network"], ["uninstall"]):
        proc = run_cm(args)
        assert proc.returncode == 1 and proc.stderr.startswith(b"cm: TTY_REQUIRED:"), args
    assert run_cm(["config", "show"]).returncode == 0  # the scriptable subcommands are unchanged
    assert not os.path.exists(home)


def test_the_ui_is_never_imported_outside_the_interactive_commands(home):
    import subprocess
    import sys

    from conftest import CM, hook_env

    for args, payload in ((["status"], b""), (["hook", "codex", "--home", home], b"{bad")):
        proc = subprocess.run([sys.executable, "-X", "importtime", CM, *args], input=payload, capture_output=True,
                              env=hook_env(), timeout=30)
        modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.decode().splitlines()
                   if line.startswith("import time:")}
        assert "cmrunner.entry" in modules
        assert not [m for m in modules if m.split(".")[0] in ("textual", "rich") or m.startswith("cmrunner.tui")], args


def test_the_config_shortcut_reopens_the_model_form_and_leaves(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        configure_model(home, fake.base_url)
        setupstate.finish(home)

        async def steps(pilot):
            await wait_for(pilot, "1/4 Provider")
            await pilot.press("enter")
            text = await wait_for(pilot, "2/4 Base URL")
            assert fake.base_url in text  # the configured URL of the same preset, not the prefill
            await pilot.press("enter", "enter")
            await wait_for(pilot, "fake-model")
            await pilot.press("enter")
            await wait_for(pilot, "Model unchanged")  # the same choices: nothing to save or restart
            await pilot.press("enter")

        app = CmApp(home, start="config", discover=temp_hosts(str(tmp_path)))
        drive(app, steps)
    assert not app.is_running and setupstate.stage(home) is None  # no agent step in the shortcut


def test_model_list_failures_have_stable_codes_without_provider_text():
    import pytest

    from cmrunner.agentrt import errors_map
    from cmrunner.core.errors import CmError
    from cmrunner.manage import providers

    assert providers.parse_model_list(b'{"data": [{"id": "b"}, {"id": "a"}, {"id": "a"}]}') == ["a", "b"]
    for body, code in ((b"<html>", "MODEL_LIST_INVALID"), (b'{"data": []}', "MODEL_LIST_EMPTY")):
        with pytest.raises(CmError) as failed:
            providers.parse_model_list(body)
        assert failed.value.code == code
    wrong_key = providers._agent_failure(errors_map.from_http(401, b'{"error": {"message": "sk-leak"}}', False))
    assert wrong_key.code == "AUTHENTICATION" and "401" in wrong_key.message and "sk-leak" not in wrong_key.message
    proxy = providers._agent_failure(errors_map.from_http(407, b"", True))
    assert proxy.code == "PROXY_AUTHENTICATION"
