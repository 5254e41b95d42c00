"""`cm agents` through the real CLI, with a temp HOME: Claude Code's and Gemini CLI's own settings
files are edited losslessly, backed up first, refused when malformed, rolled back on a failed
write, and given back byte for byte on removal; the real hosts read what cm wrote.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from conftest import REAL_CM, hook_env, run_cm
from support.agenthosts import claude_binary, gemini_binary

from cmrunner.hooks import claude as claude_hook, gemini as gemini_hook
from cmrunner.manage.integrations import jsonhosts

pytestmark = pytest.mark.timeout(300)

CLAUDE_SETTINGS = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "model": "opus",
  "permissions": {
    "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)"],
    "deny": ["Read(./.env)"]
  },
  "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0"},
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "notify-send 'Claude is done'"}]}
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "~/.claude/guard.sh", "timeout": 5}]
      }
    ]
  },
  "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"}
}
"""
CLAUDE_STATE = json.dumps({"numStartups": 12, "hasCompletedOnboarding": True,
                           "projects": {"/work/app": {"allowedTools": [], "hasTrustDialogAccepted": True}},
                           "mcpServers": {"mine": {"type": "stdio", "command": "my-server", "args": []}}}, indent=2)
GEMINI_SETTINGS = """{
  // Gemini CLI user settings (JSON with comments)
  "ui": {
    "theme": "GitHub" /* dark themes hurt */
  },
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "hooks": {
    "AfterAgent": [
      // my own logger runs first
      {"hooks": [{"type": "command", "command": "~/bin/log-turn", "name": "log", "timeout": 2000}]}
    ]
  },
  "privacy": {"usageStatisticsEnabled": false}
}
"""
CLAUDE_EVENTS = ["SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"]
GEMINI_EVENTS = ["SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd"]


def test_the_events_installed_are_the_events_the_hooks_handle():
    assert jsonhosts.CLAUDE_EVENTS == claude_hook.EVENTS == tuple(CLAUDE_EVENTS)
    assert jsonhosts.GEMINI_EVENTS == gemini_hook.EVENTS == tuple(GEMINI_EVENTS)


@pytest.fixture
def user(tmp_path):
    """A temp HOME with empty Claude Code and Gemini CLI folders, and the env that points cm at it."""
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".gemini").mkdir()
    return home


def env_for(user, path: str = "/usr/bin:/bin", **extra: str) -> dict[str, str]:
    env = hook_env(HOME=str(user), PATH=path, **extra)
    for name in ("CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "CODEX_HOME", "PI_CODING_AGENT_DIR"):
        env.pop(name, None)
    return env


def cm(user, *args: str, **extra: str):
    return run_cm(list(args), env=env_for(user, **extra), timeout=120)


def write(path, text: str) -> bytes:
    path.write_text(text, encoding="utf-8")
    return path.read_bytes()


def snapshot(root) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _dirs, files in os.walk(root) for f in files}


def test_list_shows_every_host_found_installed_and_version(user, home, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for binary in (claude_binary(), gemini_binary()):
        os.symlink(binary, bin_dir / binary.name)
    path = f"{bin_dir}:/usr/bin:/bin"
    proc = cm(user, "agents", "--json", path=path)
    assert proc.returncode == 0, proc.stderr
    rows = {r["id"]: r for r in json.loads(proc.stdout)}
    assert list(rows) == ["codex", "claude-code", "gemini", "pi", "chatgpt-work"]
    assert rows["claude-code"]["found"] and rows["claude-code"]["version"] == "2.1.328"
    assert rows["gemini"]["found"] and rows["gemini"]["version"] == "0.61.0"
    assert not rows["codex"]["found"] and rows["codex"]["version"] is None
    assert not any(r["installed"] for r in rows.values())

    assert cm(user, "agents", "install", "claude-code", path=path).returncode == 0
    table = cm(user, "agents", path=path).stdout.decode()
    assert re.search(r"^claude-code +installed +2\.1\.328 ", table, re.M), table
    assert re.search(r"^gemini +found +0\.61\.0 ", table, re.M), table
    assert re.search(r"^chatgpt-work +not found +- ", table, re.M), table


def test_claude_code_install_keeps_every_user_key_and_real_claude_connects_then_remove_restores_bytes(
        user, home, tmp_path):
    settings, state = user / ".claude" / "settings.json", user / ".claude.json"
    before = {settings: write(settings, CLAUDE_SETTINGS), state: write(state, CLAUDE_STATE)}
    proc = cm(user, "agents", "install", "claude-code")
    assert proc.returncode == 0, proc.stderr

    data, original = json.loads(settings.read_text()), json.loads(CLAUDE_SETTINGS)
    assert {k: v for k, v in data.items() if k != "hooks"} == {k: v for k, v in original.items() if k != "hooks"}
    assert data["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == original["hooks"]["Stop"][0] and len(data["hooks"]["Stop"]) == 2
    assert sorted(data["hooks"]) == sorted(CLAUDE_EVENTS + ["PreToolUse"])
    for event in CLAUDE_EVENTS:
        handler = data["hooks"][event][-1]["hooks"][0]
        argv = handler["command"].split()
        assert os.path.isabs(argv[0]) and argv[-4:] == ["hook", "claude", "--home", home], handler
        assert handler["timeout"] == 3 and handler["type"] == "command"
    user_stop = CLAUDE_SETTINGS.index("}]}\n") + 3  # the text up to the user's own Stop group is untouched
    assert settings.read_text().startswith(CLAUDE_SETTINGS[:user_stop] + ",\n")

    servers = json.loads(state.read_text())["mcpServers"]
    assert servers["mine"] == {"type": "stdio", "command": "my-server", "args": []}
    ours = servers["common_memory"]
    assert ours["type"] == "stdio" and os.path.isabs(ours["command"]) and ours["env"] == {"COMMON_MEMORY_HOME": home}
    assert ours["args"][-5:] == ["--client-id", "claude-code", "--capability", "read", "--global"]

    # The user's files as they were are kept aside first.
    backups = os.path.join(home, "backups", "integrations")
    (folder,) = os.listdir(backups)
    index = json.load(open(os.path.join(backups, folder, "index.json")))["files"]
    assert {i["path"]: open(os.path.join(backups, folder, i["copy"]), "rb").read() for i in index} == {
        str(p): b for p, b in before.items()}

    proc = cm(user, "agents", "remove", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert not os.path.exists(os.path.join(home, "integrations.json"))

    # Claude Code itself reads the server from .claude.json and gets an answer from it. It rewrites
    # that file as it runs; removing then takes out cm's server and keeps what Claude Code wrote.
    assert cm(user, "agents", "install", "claude-code").returncode == 0
    listed = subprocess.run([str(claude_binary()), "mcp", "list"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL,
                            env=env_for(user, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1"))
    assert re.search(r"^common_memory: .*Connected", listed.stdout, re.M), listed.stdout + listed.stderr
    assert re.search(r"^mine: ", listed.stdout, re.M)
    written_by_claude = json.loads(state.read_text())
    assert set(written_by_claude) > set(json.loads(CLAUDE_STATE))
    assert cm(user, "agents", "remove", "claude-code").returncode == 0
    written_by_claude["mcpServers"].pop("common_memory")
    assert json.loads(state.read_text()) == written_by_claude
    assert settings.read_bytes() == before[settings]


def test_gemini_keeps_comments_and_real_gemini_connects_then_remove_restores_bytes(user, home, tmp_path):
    settings = user / ".gemini" / "settings.json"
    before = write(settings, GEMINI_SETTINGS)
    proc = cm(user, "agents", "install", "gemini")
    assert proc.returncode == 0, proc.stderr
    text = settings.read_text()
    for comment in ("// Gemini CLI user settings (JSON with comments)", "/* dark themes hurt */",
                    "// my own logger runs first"):
        assert comment in text
    data = json.loads(re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S))
    assert data["hooks"]["AfterAgent"][0]["hooks"][0]["command"] == "~/bin/log-turn"  # the user's stays first
    for event in GEMINI_EVENTS:
        handler = data["hooks"][event][-1]["hooks"][0]
        assert handler["command"].split()[-4:] == ["hook", "gemini", "--home", home]
        assert handler["timeout"] == 3000 and handler["name"] == "common-memory"
    server = data["mcpServers"]["common_memory"]
    assert server["includeTools"] == ["memory_read", "memory_status"] and server["trust"] is False
    assert data["ui"] == {"theme": "GitHub"} and data["privacy"] == {"usageStatisticsEnabled": False}

    listed = subprocess.run([str(gemini_binary()), "mcp", "list"], cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120, stdin=subprocess.DEVNULL,
                                  env=env_for(user, GEMINI_CLI_TRUST_WORKSPACE="true"))
    assert re.search(r"common_memory: .*Connected", listed.stdout + listed.stderr), listed.stdout + listed.stderr

    assert cm(user, "agents", "remove", "gemini").returncode == 0
    assert settings.read_bytes() == before


def test_install_where_no_settings_exist_then_remove_leaves_nothing(user, home):
    assert cm(user, "agents", "install", "claude-code").returncode == 0
    assert cm(user, "agents", "install", "gemini").returncode == 0
    assert (user / ".claude" / "settings.json").is_file() and (user / ".claude.json").is_file()
    assert (user / ".gemini" / "settings.json").is_file()
    assert cm(user, "agents", "remove", "claude-code").returncode == 0
    assert cm(user, "agents", "remove", "gemini").returncode == 0
    assert snapshot(user) == {}
    assert not os.path.exists(os.path.join(home, "integrations.json"))


@pytest.mark.parametrize("host,relative,text", [
    ("claude-code", ".claude/settings.json", '{\n  "model": "opus",\n}\n'),          # trailing comma
    ("claude-code", ".claude/settings.json", '{\n  // a comment\n  "model": "opus"\n}\n'),  # not JSON
    ("claude-code", ".claude.json", '{"numStartups": NaN}'),
    ("gemini", ".gemini/settings.json", '{\n  "ui": {"theme": "GitHub"},\n}\n'),
    ("gemini", ".gemini/settings.json", '[{"ui": {}}]\n'),
    ("gemini", ".gemini/settings.json", '{\n  /* never closed\n  "ui": {}\n}\n'),
])
def test_a_malformed_settings_file_is_refused_by_name_and_nothing_is_written(user, home, host, relative, text):
    target = user / relative
    write(target, text)
    before = snapshot(user)
    proc = cm(user, "agents", "install", host)
    assert proc.returncode == 1
    line = proc.stderr.decode().strip()
    assert line.startswith("cm: HOST_CONFIG_INVALID: ") and str(target) in line and "\n" not in line, line
    assert snapshot(user) == before
    assert not os.path.exists(os.path.join(home, "integrations.json"))
    assert not os.path.exists(os.path.join(home, "backups"))


def test_a_write_failing_mid_install_puts_every_file_back(user, home):
    settings, state = user / ".claude" / "settings.json", user / ".claude.json"
    before = {settings: write(settings, CLAUDE_SETTINGS)}
    # The first write creates .claude.json; the second (settings.json) fails as on a full disk.
    proc = cm(user, "agents", "install", "claude-code", CM_TEST_TXN_WRITE_FAIL="2")
    assert proc.returncode == 1
    line = proc.stderr.decode().strip()
    assert line.startswith("cm: INTEGRATION_WRITE_FAILED: ") and str(settings) in line, line
    assert not state.exists() and {p: p.read_bytes() for p in before} == before
    assert not os.path.exists(os.path.join(home, "integrations.json"))
    assert not os.path.exists(os.path.join(home, "integrations.txn"))
    # Nothing was left half-done; and the installation users run ignores the test-only variable.
    proc = run_cm(["agents", "install", "claude-code"], env=env_for(user, CM_TEST_TXN_WRITE_FAIL="2"), cm=REAL_CM)
    assert proc.returncode == 0, proc.stderr


def test_cm_never_takes_over_or_discards_what_the_user_wrote(user, home):
    state = user / ".claude.json"
    theirs = write(state, json.dumps({"mcpServers": {"common_memory": {"command": "their-cm", "args": []}}}))
    proc = cm(user, "agents", "install", "claude-code")
    assert proc.returncode == 1 and b"UNMANAGED_ENTRY" in proc.stderr and str(state).encode() in proc.stderr
    assert state.read_bytes() == theirs and not (user / ".claude" / "settings.json").exists()
    state.unlink()

    assert cm(user, "agents", "install", "claude-code").returncode == 0
    settings = user / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "say done"}]})  # the user adds one
    settings.write_text(json.dumps(data, indent=2))
    servers = json.loads(state.read_text())
    servers["mcpServers"]["common_memory"]["env"]["EXTRA"] = "1"  # and edits cm's server
    changed = write(state, json.dumps(servers, indent=2))
    proc = cm(user, "agents", "remove", "claude-code")
    assert proc.returncode == 1 and b"HOST_FILE_MODIFIED" in proc.stderr
    assert state.read_bytes() == changed

    servers["mcpServers"]["common_memory"]["env"].pop("EXTRA")
    write(state, json.dumps(servers, indent=2))
    assert cm(user, "agents", "remove", "claude-code").returncode == 0
    assert json.loads(settings.read_text()) == {"hooks": {"Stop": [{"hooks": [{"type": "command",
                                                                               "command": "say done"}]}]}}


def test_unknown_hosts_and_removing_what_is_not_installed(user, home):
    proc = cm(user, "agents", "install", "cursor")
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("cm: UNKNOWN_HOST: ") and b"claude-code" in proc.stderr
    proc = cm(user, "agents", "remove", "gemini")
    assert proc.returncode == 0 and b"was not installed by cm; nothing changed" in proc.stdout
    proc = cm(user, "agents", "install", "pi")
    assert proc.returncode == 1 and proc.stderr.startswith(b"cm: HOST_UNAVAILABLE: ")


@pytest.mark.parametrize(("host", "title", "command", "folder", "variable"), [
    ("claude-code", "Claude Code", "claude", ".claude", "CLAUDE_CONFIG_DIR"),
    ("gemini", "Gemini CLI", "gemini", ".gemini", "GEMINI_CLI_HOME"),
    ("codex", "Codex CLI", "codex", ".codex", "CODEX_HOME"),
    ("pi", "Pi", "pi", os.path.join(".pi", "agent"), "PI_CODING_AGENT_DIR"),
])
def test_a_host_that_is_not_here_says_so_where_cm_looked_and_what_to_do(tmp_path, home, host, title, command,
                                                                         folder, variable):
    bare = tmp_path / "bare"
    bins = [tmp_path / "bin1", tmp_path / "bin2"]
    for path in (bare, *bins):
        path.mkdir()
    search = os.pathsep.join(map(str, bins))
    proc = run_cm(["agents", "install", host], env=env_for(bare, path=search), timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1, err
    assert err == (f"cm: HOST_UNAVAILABLE: {title} was not found: no `{command}` command in the folders of PATH "
                   f"({search}) and no configuration folder {bare / folder} ({variable} is not set); install "
                   f"{title} and start it once, or add the folder holding `{command}` to PATH, then run "
                   f"`cm agents install {host}` again\n")
    assert "not available here" not in err and "--bare" not in err
    assert snapshot(bare) == {}

    moved = tmp_path / "elsewhere"
    env = env_for(bare, path=search)
    env[variable] = str(moved)
    proc = run_cm(["agents", "install", host], env=env, timeout=120)
    assert proc.returncode == 1 and f"({variable} is '{moved}')" in proc.stderr.decode(), proc.stderr

    found = bins[1] / command  # what the message says is searched is what is searched
    found.write_text("#!/bin/sh\nexit 0\n")
    found.chmod(0o755)
    proc = run_cm(["agents", "install", host], env=env_for(bare, path=search), timeout=120)
    assert b"HOST_UNAVAILABLE" not in proc.stderr, proc.stderr


def test_chatgpt_work_off_macos_says_why_and_what_to_do(tmp_path, home):
    bare = tmp_path / "bare"
    bare.mkdir()
    proc = run_cm(["agents", "install", "chatgpt-work"], env=env_for(bare), timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("cm: HOST_UNAVAILABLE: ChatGPT Desktop (Work) is not available "
                                                   "here: ChatGPT Desktop runs on macOS and Windows"), err
    assert "cm work-config" in err and err.count("\n") == 1
