"""Complete uninstall: what goes, what stays (Memory Data by default), and what fails closed."""

from __future__ import annotations

import json
import os
import sys

import pytest
from tui_support import configure_model, drive, temp_hosts, wait_for

from cmrunner.core import config as config_mod, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.manage import setupstate, uninstall
from cmrunner.manage.integrations import manager, manifest
from cmrunner.tui.app import CmApp
from cmrunner.tui.home import COLUMNS

USER_CONFIG = '# mine\nmodel = "gpt"\n'


def installed_home(home: str, tmp_path) -> tuple[object, DataPaths]:
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    codex_home = tmp_path / "codexhome"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(USER_CONFIG)
    hosts = temp_hosts(str(tmp_path))
    manager.apply(home, manager.plan(home, ["pi", "codex"], hosts=hosts()))
    paths = DataPaths(config_mod.load(home).data_root)
    store.open_store(paths).close()
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("profile"), "w") as handle:
        handle.write("# Profile\n\n## Editor\nVim\n")
    return hosts, paths


def open_uninstall(pilot):
    async def steps():
        await wait_for(pilot, "cm · Common Memory")
        menu = pilot.app.screen.query_one("#column-2")
        menu.focus()
        menu.highlighted = [key for key, _label in COLUMNS[2][1]].index("uninstall")
        await pilot.press("enter")
        await wait_for(pilot, "Uninstall cm")
    return steps()


def test_uninstall_removes_what_cm_owns_and_keeps_memory_data_by_default(home, tmp_path):
    hosts, paths = installed_home(home, tmp_path)

    async def steps(pilot):
        await open_uninstall(pilot)
        text = await wait_for(pilot, "Continue")
        assert "integration: Pi" in text and "integration: Codex CLI" in text
        assert os.path.join(home, ".env") in text and "kept by default" in text
        await pilot.press("enter")
        text = await wait_for(pilot, "Uninstall · Memory Data")
        await pilot.press("enter")  # the default: keep
        text = await wait_for(pilot, "Memory Data will be kept")
        assert "Cancel" in text
        await pilot.press("end", "enter")  # keep the program installed (the test venv)
        text = await wait_for(pilot, "Press Enter or Esc to leave")
        assert "removed integrations: Pi, Codex CLI" in text and f"kept Memory Data in {paths.root}" in text
        assert "kept the program" in text
        await pilot.press("enter")

    app = CmApp(home, discover=hosts)
    drive(app, steps)
    assert not app.is_running
    for gone in ("config.json", ".env", "integrations.json", "setup.json", "tui.json"):
        assert not os.path.exists(os.path.join(home, gone)), gone
    assert open(paths.document("profile")).read() == "# Profile\n\n## Editor\nVim\n" and os.path.isfile(paths.db)
    assert open(tmp_path / "codexhome" / "config.toml").read() == USER_CONFIG
    assert sorted(os.listdir(tmp_path / "codexhome")) == ["config.toml"]
    assert not os.path.exists(tmp_path / "piagent" / "extensions")


def test_cancel_and_escape_leave_everything_in_place(home, tmp_path):
    hosts, paths = installed_home(home, tmp_path)
    before = sorted(set(os.listdir(home)) | {"tui.json"})  # opening Uninstall remembers the action

    async def steps(pilot):
        await open_uninstall(pilot)
        await wait_for(pilot, "Continue")
        await pilot.press("enter")
        await wait_for(pilot, "Uninstall · Memory Data")
        await pilot.press("down", "enter")  # delete data …
        await wait_for(pilot, "Memory Data will be DELETED")
        await pilot.press("enter")  # … but Cancel is the default
        await wait_for(pilot, "Uninstall · Memory Data")
        await pilot.press("escape", "escape")
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("escape")

    drive(CmApp(home, discover=hosts), steps)
    assert sorted(os.listdir(home)) == before and os.path.isfile(paths.document("profile"))
    assert sorted(manager.installed(home)) == ["codex", "pi"]


def test_memory_data_goes_only_when_confirmed_and_foreign_files_stay(home, tmp_path):
    hosts, paths = installed_home(home, tmp_path)
    with open(os.path.join(paths.root, "notes.txt"), "w") as handle:
        handle.write("mine")
    planned = uninstall.plan(home, hosts())
    assert not planned.blocked, planned.blockers
    done = uninstall.execute(home, planned, remove_data=True, remove_program=False)
    assert f"removed Memory Data in {paths.root}" in done
    assert f"kept {os.path.join(paths.root, 'notes.txt')} (not cm's)" in done
    assert sorted(os.listdir(paths.root)) == ["notes.txt"]
    assert sorted(os.listdir(home)) == ["data"]


def test_a_live_writer_fails_closed(home, tmp_path, quiet_drain):
    hosts, paths = installed_home(home, tmp_path)
    planned = uninstall.plan(home, hosts())
    assert any("a Writer is running" in b for b in planned.blockers)
    with pytest.raises(CmError) as refused:
        uninstall.execute(home, planned, remove_data=True, remove_program=False)
    assert refused.value.code == "UNINSTALL_BLOCKED"
    assert os.path.isfile(os.path.join(home, "config.json")) and os.path.isfile(paths.document("profile"))

    async def steps(pilot):
        await open_uninstall(pilot)
        text = await wait_for(pilot, "Uninstall cannot run")
        assert "a Writer is running" in text and "Nothing was removed." in text and "Continue" not in text
        await pilot.press("escape", "escape")

    drive(CmApp(home, discover=hosts), steps)


def test_unmanaged_references_unsafe_paths_and_changed_files_fail_closed(home, tmp_path, monkeypatch):
    hosts, paths = installed_home(home, tmp_path)
    hand_made = tmp_path / "codexhome" / "memory-reader.config.toml"
    hand_made.write_text('[mcp_servers.common_memory_init]\nenabled = false\n')
    assert any(str(hand_made) in b for b in uninstall.plan(home, hosts()).blockers)
    hand_made.unlink()

    profile = tmp_path / "codexhome" / "common-memory.config.toml"
    profile.write_text(profile.read_text() + "# my note\n")
    assert any("HOST_FILE_MODIFIED" in b for b in uninstall.plan(home, hosts()).blockers)

    monkeypatch.setenv("HOME", paths.root)
    blockers = uninstall.plan(home, hosts()).blockers
    assert any("is not a folder cm may delete" in b for b in blockers)
    assert os.path.isfile(os.path.join(home, "config.json")) and manifest.load(home)["hosts"]


def test_the_program_is_removed_only_as_an_installed_package(monkeypatch):
    argv, note = uninstall.program_removal()
    assert argv == [sys.executable, "-m", "pip", "uninstall", "-y", "common-memory-cm"], note

    class Editable:
        def read_text(self, name: str) -> str | None:
            return json.dumps({"url": "file:///src/cm", "dir_info": {"editable": True}})

    monkeypatch.setattr(uninstall.importlib.metadata, "distribution", lambda name: Editable())
    argv, note = uninstall.program_removal()
    assert argv is None and "source checkout" in note


def test_claude_code_and_gemini_entries_go_the_users_settings_stay_and_a_foreign_reference_blocks(home, tmp_path):
    configure_model(home, "http://127.0.0.1:9/v1")
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, claude=True, gemini=True)
    user = tmp_path / "userhome"
    claude_settings = user / ".claude" / "settings.json"
    gemini_settings = user / ".gemini" / "settings.json"
    claude_settings.write_text('{\n  "model": "opus"\n}\n')
    gemini_settings.write_text('{\n  // mine\n  "ui": {"theme": "GitHub"}\n}\n')
    before = {p: p.read_bytes() for p in (claude_settings, gemini_settings)}
    manager.apply(home, manager.plan(home, ["claude-code", "gemini"], hosts=hosts()))
    assert (user / ".claude.json").is_file()

    (user / ".claude.json").write_text(json.dumps({"mcpServers": {
        "common_memory": json.loads((user / ".claude.json").read_text())["mcpServers"]["common_memory"],
        "old-cm": {"command": "/opt/cmrunner/bin/cm", "args": ["mcp"]}}}))  # set up by hand, long ago
    planned = uninstall.plan(home, hosts())
    assert planned.blockers == [f"{user / '.claude.json'} refers to cm but cm did not write it; remove that "
                                "reference by hand first"]

    (user / ".claude.json").write_text(json.dumps({"mcpServers": {
        "common_memory": json.loads((user / ".claude.json").read_text())["mcpServers"]["common_memory"]}}))
    planned = uninstall.plan(home, hosts())
    assert not planned.blocked, planned.blockers
    done = uninstall.execute(home, planned, remove_data=False, remove_program=False)
    assert "removed integrations: Claude Code, Gemini CLI" in done
    assert f"kept {os.path.join(home, 'backups')} (your agents' settings files as they were before cm changed them)" \
        in done
    assert {p: p.read_bytes() for p in before} == before
    assert not (user / ".claude.json").exists()  # cm created it and nothing but cm's server was left in it
