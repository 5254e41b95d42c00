"""The setup wizard checks the endpoint before it saves (textual pilot at 80x24): the model list for
Custom, a URL without its API path, local presets without a key, a model that cannot call tools."""

from __future__ import annotations

import json
import os

from tui_support import KEY, configure_model, drive, open_action, temp_hosts, wait_for

from cmrunner.manage import providers, setupstate
from cmrunner.synthetic import fakemodel
from cmrunner.tui.app import CmApp

SMALL = (80, 24)


async def _pick_preset(pilot: object, preset_id: str, base_url: str) -> None:
    await wait_for(pilot, "1/4 Provider")
    menu = pilot.app.screen.query_one("#providers")  # type: ignore[attr-defined]
    ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
    menu.highlighted = ids.index(preset_id)  # by id: agent-CLI lines come before the presets
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, "2/4 Base URL")
    pilot.app.screen.query_one("#url").value = base_url  # type: ignore[attr-defined]
    await pilot.press("enter")  # type: ignore[attr-defined]


def test_custom_lists_the_models_and_a_url_without_v1_is_caught_before_saving(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["alpha", "beta"]}) as fake:
        async def steps(pilot):
            await _pick_preset(pilot, "custom", fake.root_url)  # the server's root: no /v1
            await wait_for(pilot, "3/4 API key")
            await pilot.press(*KEY, "enter")
            text = await wait_for(pilot, "2 models at")  # the server lists its models at its root too
            assert "alpha" in text and "beta" in text
            await pilot.press("down", "enter")
            text = await wait_for(pilot, "ENDPOINT_NOT_FOUND")
            assert "missing its API path" in text and "/v1" in text and "beta was not saved" in text
            assert not os.path.exists(os.path.join(home, "config.json"))
            await pilot.press("escape")
            await wait_for(pilot, "3/4 API key")
            await pilot.press("escape")
            await wait_for(pilot, "2/4 Base URL")
            pilot.app.screen.query_one("#url").value = fake.base_url
            await pilot.press("enter")
            await wait_for(pilot, "3/4 API key")
            await pilot.press(*KEY, "enter")
            await wait_for(pilot, "2 models at")
            await pilot.press("down", "enter")
            await wait_for(pilot, "Choose the agents cm should connect to")
            await pilot.press("escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps, size=SMALL)
    remote = json.load(open(os.path.join(home, "config.json")))["remote"]
    assert remote["baseUrl"] == fake.base_url and remote["model"] == "beta" and remote["preset"] == "custom"


def test_a_local_preset_asks_no_key_and_refuses_a_model_that_cannot_call_tools(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["tiny"], "tools": False}) as fake:
        async def steps(pilot):
            await _pick_preset(pilot, "ollama", fake.base_url)
            text = await wait_for(pilot, "1 model at")  # no key step for a local server
            assert "3/4 API key" not in text and "tiny" in text
            await pilot.press("enter")
            text = await wait_for(pilot, "MODEL_CANNOT_CALL_TOOLS")
            assert "cannot call tools" in text and "tiny was not saved" in text
            await pilot.press("escape")
            await wait_for(pilot, "2/4 Base URL")
            await pilot.press("escape")
            await wait_for(pilot, "1/4 Provider")
            await pilot.press("escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps, size=SMALL)
    assert not os.path.exists(os.path.join(home, "config.json")) and not os.path.exists(os.path.join(home, ".env"))


def test_a_local_preset_with_a_tool_calling_model_is_saved_without_a_key(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["qwen3:8b"]}) as fake:
        async def steps(pilot):
            await _pick_preset(pilot, "lmstudio", fake.base_url)
            await wait_for(pilot, "qwen3:8b")
            await pilot.press("enter")
            await wait_for(pilot, "Choose the agents cm should connect to")
            await pilot.press("escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), steps, size=SMALL)
        assert [r.get("cue") for r in fake.requests() if r["method"] == "POST"] == ["probe", "probe"]
    remote = json.load(open(os.path.join(home, "config.json")))["remote"]
    assert remote["preset"] == "lmstudio" and remote["model"] == "qwen3:8b" and remote["api"] == "chat_completions"
    assert f"{remote['apiKeyEnv']}={providers.LOCAL_KEY}" in open(os.path.join(home, ".env")).read()


def test_the_model_form_replaces_an_agent_cli_runtime(home, tmp_path):
    from conftest import run_cm

    assert run_cm(["config", "init", "--home", home, "--agent", "claude-code", "--skip-check"]).returncode == 0
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["qwen3:8b"]}) as fake:
        async def steps(pilot):
            await _pick_preset(pilot, "ollama", fake.base_url)  # was a KeyError: the CLI runtime has no key
            await wait_for(pilot, "qwen3:8b")
            await pilot.press("enter")
            await wait_for(pilot, "Model saved")
            await pilot.press("enter")

        drive(CmApp(home, start="config", discover=temp_hosts(str(tmp_path))), steps, size=SMALL)
    remote = json.load(open(os.path.join(home, "config.json")))["remote"]
    assert remote["provider"] == "openai-compatible" and remote["preset"] == "ollama" and "agent" not in remote


def test_a_typed_model_the_server_does_not_list_is_refused_with_the_listed_ones_and_nothing_is_saved(home, tmp_path):
    """Issue 36's bad input: a model that is not listed is caught in the wizard before saving, with
    its code and the fix (the listed models), and the saved configuration stays byte for byte."""
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["alpha", "beta"]}) as fake:
        configure_model(home, fake.base_url)  # the model configured before: fake-model at this server
        setupstate.finish(home)
        saved = {name: open(os.path.join(home, name), "rb").read() for name in ("config.json", ".env")}

        async def then(pilot):
            await _pick_preset(pilot, "custom", fake.base_url)
            await wait_for(pilot, "3/4 API key")
            await pilot.press(*KEY, "enter")
            await wait_for(pilot, "2 models at")
            menu = pilot.app.screen.query_one("#models")
            ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
            assert ids[-1] == "manual", ids
            menu.highlighted = ids.index("manual")
            await pilot.press("enter")
            await pilot.press(*"gamma", "enter")
            text = await wait_for(pilot, "MODEL_NOT_LISTED", timeout=60)
            assert "does not list 'gamma'; pick a listed one: alpha, beta" in text, text
            assert "gamma was not saved; nothing changed." in text
            await pilot.press("escape", "escape", "escape", "escape")

        drive(CmApp(home, discover=temp_hosts(str(tmp_path))), open_action("model", then), size=SMALL)
        probes = [r for r in fake.requests() if r["method"] == "POST"]
    assert {name: open(os.path.join(home, name), "rb").read() for name in saved} == saved
    assert probes == []  # refused on the list alone: no test request was sent for it
