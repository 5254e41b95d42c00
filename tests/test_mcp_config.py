"""`cm mcp-config --host H`: each MCP host's own JSON shape (hosts-more.md §5), an absolute command
that really starts cm's read server, and the real Claude Code and Gemini CLI accept what is printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib

import anyio
import pytest
from conftest import hook_env, run_cm
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.agenthosts import claude_binary, gemini_binary

pytestmark = pytest.mark.timeout(300)

# host: (top-level key, the keys its stdio entry has, the client id it announces)
FORMATS = {
    "claude-code": ("mcpServers", ["type", "command", "args", "env"], "claude-code"),
    "claude-desktop": ("mcpServers", ["command", "args", "env"], "claude-desktop"),
    "cursor": ("mcpServers", ["command", "args", "env"], "cursor"),
    "vscode": ("servers", ["type", "command", "args", "env"], "vscode"),
    "gemini": ("mcpServers", ["command", "args", "env", "timeout", "trust", "includeTools"], "gemini-cli"),
    "windsurf": ("mcpServers", ["command", "args", "env"], "windsurf"),
    "zed": ("context_servers", ["command", "args", "env"], "zed"),
}
READ_TOOLS = {"memory_read", "memory_status"}


def printed(host: str, *extra: str) -> tuple[dict, str]:
    proc = run_cm(["mcp-config", "--host", host, *extra])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.decode()


def tools_of(server: dict) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update(server["env"])
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env)

    async def listed() -> set[str]:
        with anyio.fail_after(60):
            async with Client(params, mode="legacy") as client:
                return {t.name for t in (await client.list_tools()).tools}

    return anyio.run(listed)


@pytest.mark.parametrize("host", list(FORMATS))
def test_each_host_gets_its_own_shape_with_an_absolute_command_that_serves_the_read_tools(home, host):
    block, where = printed(host)
    top, keys, client = FORMATS[host]
    assert list(block) == [top] and list(block[top]) == ["common_memory"]
    server = block[top]["common_memory"]
    assert list(server) == keys
    if "type" in server:
        assert server["type"] == "stdio"  # VS Code requires it; Claude Code records it
    assert os.path.isabs(server["command"]) and os.access(server["command"], os.X_OK)
    assert isinstance(server["args"], list) and all(isinstance(a, str) for a in server["args"])  # Zed: required
    assert server["args"][-6:] == ["mcp", "--client-id", client, "--capability", "read", "--global"]
    assert server["env"] == {"COMMON_MEMORY_HOME": home}
    if host == "gemini":
        assert server["timeout"] == 30000 and server["trust"] is False
        assert set(server["includeTools"]) == READ_TOOLS
    assert where.startswith("Merge into ") and where.count("\n") == 1
    assert tools_of(server) == READ_TOOLS


def test_codex_stays_the_default_and_unknown_hosts_are_refused(home):
    proc = run_cm(["mcp-config"])
    assert proc.returncode == 0 and proc.stderr == b""
    assert set(tomllib.loads(proc.stdout.decode())["mcp_servers"]) == {"common_memory", "common_memory_init"}
    assert run_cm(["mcp-config", "--host", "codex"]).stdout == proc.stdout
    proc = run_cm(["mcp-config", "--host", "emacs"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: UNKNOWN_HOST: ")


def test_wsl_form_for_a_windows_host(home):
    block, _where = printed("cursor", "--wsl", "--distro", "Ubuntu", "--user", "ada")
    server = block["mcpServers"]["common_memory"]
    assert server["command"] == "wsl.exe" and server["env"] == {}
    assert server["args"][:7] == ["-d", "Ubuntu", "-u", "ada", "-e", "/usr/bin/env", f"COMMON_MEMORY_HOME={home}"]
    assert server["args"][-6:] == ["mcp", "--client-id", "cursor", "--capability", "read", "--global"]


def test_real_claude_code_and_gemini_cli_accept_and_connect_what_is_printed(home, tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    env = hook_env(HOME=str(user), PATH="/usr/bin:/bin", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   GEMINI_CLI_TRUST_WORKSPACE="true")
    for name in ("CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME"):
        env.pop(name, None)
    claude = claude_binary()
    entry = printed("claude-code")[0]["mcpServers"]["common_memory"]
    added = subprocess.run([str(claude), "mcp", "add-json", "-s", "user", "common_memory", json.dumps(entry)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    assert added.returncode == 0, added.stdout + added.stderr
    listed = subprocess.run([str(claude), "mcp", "list"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert re.search(r"^common_memory: .*Connected", listed.stdout, re.M), listed.stdout + listed.stderr

    gemini = gemini_binary()
    (user / ".gemini").mkdir()
    (user / ".gemini" / "settings.json").write_text(json.dumps(printed("gemini")[0], indent=2))
    listed = subprocess.run([str(gemini), "mcp", "list"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert re.search(r"common_memory: .*Connected", listed.stdout + listed.stderr), listed.stdout + listed.stderr
