"""Host settings files as a working developer's machine has them (issue 32): a `~/.claude.json` of
many MB, a user's empty settings file, an entry the user pasted before cm, a byte order mark.

cm adds to and removes from them through the real `cm agents` (and uninstall's plan), and after
every removal or refusal the user's bytes are exactly what they were.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from support.agenthosts import claude_binary
from support.claudestate import state_text
from test_agents_cli import CLAUDE_SETTINGS, CLAUDE_STATE, GEMINI_SETTINGS, cm, env_for, snapshot, user, write
from tui_support import configure_model, temp_hosts

from cmrunner.core.errors import CmError
from cmrunner.manage import uninstall
from cmrunner.manage.integrations import checks, manager, manifest

pytestmark = pytest.mark.timeout(600)
BOM = "\ufeff"
__all__ = ["user"]  # the fixture, shared with test_agents_cli


def entries_of(home: str) -> set[tuple[str, str]]:
    return {(os.path.basename(e["file"]), ".".join(e["key"])) for e in manifest.load(home)["entries"]}


def test_a_byte_order_mark_is_accepted_kept_and_given_back_byte_for_byte(user, home, tmp_path):
    files = {user / ".claude" / "settings.json": BOM + CLAUDE_SETTINGS.replace("\n", "\r\n"),
             user / ".claude.json": BOM + CLAUDE_STATE, user / ".gemini" / "settings.json": BOM + GEMINI_SETTINGS}
    before = {path: write(path, text) for path, text in files.items()}
    for host in ("claude-code", "gemini"):
        proc = cm(user, "agents", "install", host)
        assert proc.returncode == 0, proc.stderr
    for path in files:
        text = path.read_bytes().decode("utf-8")
        assert text.startswith(BOM + "{") and text.count(BOM) == 1, path
        assert "common_memory" in text or "common-memory" in text or "cmrunner" in text
    crlf = (user / ".claude" / "settings.json").read_bytes()
    assert b"\r\n" in crlf and b"\n" not in crlf.replace(b"\r\n", b"")
    for host in ("claude-code", "gemini"):
        assert cm(user, "agents", "remove", host).returncode == 0
    assert {p: p.read_bytes() for p in before} == before

    # Claude Code itself reads its settings with the mark in front: cm's server connects.
    assert cm(user, "agents", "install", "claude-code").returncode == 0
    listed = subprocess.run([str(claude_binary()), "mcp", "list"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL,
                            env=env_for(user, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1"))
    assert re.search(r"^common_memory: .*Connected", listed.stdout, re.M), listed.stdout + listed.stderr


def test_a_users_empty_settings_file_stays_theirs(user, home):
    claude, gemini = user / ".claude" / "settings.json", user / ".gemini" / "settings.json"
    before = {claude: write(claude, ""), gemini: write(gemini, "\n"), user / ".claude.json": write(
        user / ".claude.json", BOM)}
    for host in ("claude-code", "gemini"):
        assert cm(user, "agents", "install", host).returncode == 0
    assert json.loads(claude.read_text())["hooks"] and json.loads(gemini.read_text())["mcpServers"]
    assert all([] not in keys for keys in manifest.load(home).get("created", {}).values())
    for host in ("claude-code", "gemini"):
        assert cm(user, "agents", "remove", host).returncode == 0
    assert snapshot(user) == {os.path.relpath(p, user): b for p, b in before.items()}


def test_an_entry_identical_to_cms_that_the_user_had_is_never_claimed_nor_removed(user, home):
    settings, state = user / ".claude" / "settings.json", user / ".claude.json"
    assert cm(user, "agents", "install", "claude-code").returncode == 0
    server = json.loads(state.read_text())["mcpServers"]["common_memory"]
    group = json.loads(settings.read_text())["hooks"]["Stop"][0]
    assert cm(user, "agents", "remove", "claude-code").returncode == 0 and snapshot(user) == {}

    # The user pastes cm's server and its Stop hook by hand (say, from `cm mcp-config`), then installs.
    write(state, json.dumps({"numStartups": 3, "mcpServers": {"common_memory": server}}, indent=2))
    write(settings, json.dumps({"hooks": {"Stop": [group]}}, indent=2))
    before = snapshot(user)
    proc = cm(user, "agents", "install", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert b"mcpServers.common_memory in " in proc.stdout and b"it stays yours" in proc.stdout
    assert ("settings.json", "hooks.Stop") not in entries_of(home)
    assert (".claude.json", "mcpServers.common_memory") not in entries_of(home)
    assert ("settings.json", "hooks.SessionStart") in entries_of(home)
    assert len(json.loads(settings.read_text())["hooks"]["Stop"]) == 1  # no second copy either
    report = {c.name: c for c in checks.run(home, start_servers=False).checks}
    assert report["Claude Code settings"].state == "ok"
    assert report["Claude Code settings"].detail == ("4 hooks exactly as cm wrote them; not cm's (you had them "
                                                     "before), not checked: hooks.Stop, mcpServers.common_memory")
    assert cm(user, "agents", "remove", "claude-code").returncode == 0
    assert snapshot(user) == before


def test_a_64_mib_claude_json_is_installed_into_and_removed_from(user, home):
    state = user / ".claude.json"
    before = write(state, state_text(64 << 20))
    assert len(before) >= 64 << 20
    proc = cm(user, "agents", "install", "claude-code")
    assert proc.returncode == 0, proc.stderr
    after = json.loads(state.read_bytes())
    assert after["mcpServers"].pop("common_memory")["args"][-1] == "--global"
    assert after == json.loads(before)
    proc = cm(user, "agents", "remove", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert state.read_bytes() == before


def test_a_size_limit_never_blocks_a_removal_and_a_refused_addition_writes_nothing(home, tmp_path, monkeypatch):
    configure_model(home, "http://127.0.0.1:9/v1")
    hosts = temp_hosts(str(tmp_path), pi=False, codex=False, claude=True, gemini=True)
    state = tmp_path / "userhome" / ".claude.json"
    manager.apply(home, manager.plan(home, ["claude-code"], hosts=hosts()))
    # Claude Code keeps using the file: it grows past the 4 MiB cm used to read at most.
    data = json.loads(state.read_text())
    data["projects"] = json.loads(state_text(5 << 20))["projects"]
    state.write_text(json.dumps(data, indent=2))
    planned = uninstall.plan(home, hosts())
    assert not planned.blockers and planned.integrations is not None and planned.integrations.remove == ["claude-code"]
    monkeypatch.setattr(manager, "ADD_LIMIT", 1 << 20)  # even over the limit for additions
    grown = state.read_bytes()
    manager.apply(home, manager.plan(home, ["claude-code", "gemini"], hosts=hosts()))  # a change elsewhere
    assert state.read_bytes() == grown and set(manifest.load(home)["hosts"]) == {"claude-code", "gemini"}
    manager.apply(home, manager.plan(home, [], hosts=hosts()))
    assert list(data.pop("mcpServers")) == ["common_memory"]  # cm created the object: it goes with it
    assert json.loads(state.read_text()) == data and not os.path.exists(manifest.path_of(home))

    before = snapshot(tmp_path / "userhome")
    with pytest.raises(CmError) as refused:
        manager.plan(home, ["claude-code"], hosts=hosts())
    assert refused.value.code == "HOST_FILE_TOO_LARGE" and str(state) in refused.value.message
    assert "\n" not in refused.value.message and "by hand" in refused.value.message
    assert snapshot(tmp_path / "userhome") == before and not os.path.exists(manifest.path_of(home))


def test_a_version_1_manifest_is_upgraded_without_deleting_a_file_cm_cannot_prove_it_made(user, home):
    settings = user / ".claude" / "settings.json"
    write(settings, "")  # the user's own, empty
    assert cm(user, "agents", "install", "claude-code").returncode == 0
    # What the previous version recorded for this: every file a file "cm created", no entry texts.
    recorded = manifest.load(home)
    recorded["version"] = 1
    recorded["created"] = {path: [[], *keys] for path, keys in recorded.get("created", {}).items()}
    recorded["created"][str(settings)] = [[], ["hooks"], *[["hooks", e] for e in json.loads(
        settings.read_text())["hooks"]]]
    recorded.pop("blank", None)
    for entry in recorded["entries"]:
        entry.pop("text", None)
    with open(manifest.path_of(home), "wb") as handle:
        handle.write(manifest.render(recorded))
    assert cm(user, "agents", "remove", "claude-code").returncode == 0
    # cm's entries went; the files stay, emptied to {} (a leftover, never a loss).
    assert json.loads(settings.read_text()) == {} and json.loads((user / ".claude.json").read_text()) == {}
    assert not os.path.exists(manifest.path_of(home))
