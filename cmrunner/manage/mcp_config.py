"""``cm mcp-config [--host H]``: cm's MCP server configuration, ready to paste, for each MCP host.

Contract:
- ``--host codex`` (the default) prints two ``[mcp_servers.*]`` TOML blocks: ``common_memory_init``
  (``--client-id chatgpt-desktop --capability init --global``, ``memory_init`` + ``memory_status``,
  approval ``approve``) and ``common_memory`` (``--client-id codex-cli --capability read --global``
  plus every ``--workspace``, ``memory_read`` + ``memory_status``, approval ``auto``), under a header
  that records the distribution, Linux user, config home, data root, interpreter and cm entry in effect.
- Every other host (``JSON_HOSTS``) gets the read server only, as one JSON object in that host's own
  shape (hosts-more.md §5): the top-level key (``mcpServers``; ``servers`` for VS Code;
  ``context_servers`` for Zed) holding ``common_memory`` = ``command`` (absolute), ``args`` (always
  present: Zed requires it), ``env``, plus ``"type": "stdio"`` where the host requires or records it
  (Claude Code, VS Code) and Gemini CLI's ``timeout``, ``trust: false`` and ``includeTools``. The
  client id names the host. stdout carries the JSON alone (it can be redirected into a new file);
  where to put it goes to stderr (``where``).
- The direct form starts ``<abs python> -I -m cmrunner`` with ``COMMON_MEMORY_HOME`` in ``env``;
  ``--wsl`` starts ``wsl.exe -d <distro> -u <user> -e /usr/bin/env COMMON_MEMORY_HOME=<home> <abs
  python> …`` (no login shell, so every path is absolute) for a host running on Windows.
  Workspaces must be registered projects whose scope ``disclosure.allowedScopes`` allows; a Windows
  path is refused, never mapped. Nothing is written.
"""

from __future__ import annotations

import json

import tomlkit

from cmrunner.core.errors import CmError
from cmrunner.manage import bundles, hostconfig
from cmrunner.manage.hostconfig import Pins

SERVER = "common_memory"
HOSTS = ("codex", "claude-code", "claude-desktop", "cursor", "vscode", "gemini", "windsurf", "zed")
JSON_HOSTS = HOSTS[1:]
TOP_KEY = {"vscode": "servers", "zed": "context_servers"}  # every other JSON host: mcpServers
CLIENT_IDS = {"claude-code": "claude-code", "claude-desktop": "claude-desktop", "cursor": "cursor",
              "vscode": "vscode", "gemini": "gemini-cli", "windsurf": "windsurf", "zed": "zed"}
GEMINI_TIMEOUT_MS = 30000
WHERE = {
    "claude-code": "top-level mcpServers of ~/.claude.json (user scope), or run `claude mcp add-json -s user "
                   "common_memory '<the common_memory object>'`; `cm agents install claude-code` does it for you",
    "claude-desktop": "claude_desktop_config.json (macOS ~/Library/Application Support/Claude/, Windows "
                      "%APPDATA%\\Claude\\), then restart Claude Desktop",
    "cursor": "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
    "vscode": "the user profile's mcp.json or .vscode/mcp.json (under \"servers\")",
    "gemini": "~/.gemini/settings.json (mcpServers); `cm agents install gemini` does it for you",
    "windsurf": "~/.codeium/windsurf/mcp_config.json",
    "zed": "~/.config/zed/settings.json (under \"context_servers\")",
}


def entry(host: str, command: str, args: list[str], env: dict[str, str] | None) -> dict:
    """One stdio server entry in ``host``'s shape (see module contract)."""
    server: dict = {"type": "stdio"} if host in ("claude-code", "vscode") else {}
    server.update({"command": command, "args": list(args), "env": dict(env or {})})
    if host == "gemini":
        server.update({"timeout": GEMINI_TIMEOUT_MS, "trust": False, "includeTools": list(hostconfig.READ_TOOLS)})
    return server


def where(host: str) -> str:
    return "Paste into the Codex config.toml of this environment (~/.codex/config.toml)" if host == "codex" \
        else f"Merge into {WHERE[host]}"


def _argv(pins: Pins, args: list[str], wsl: bool, distro: str | None, user: str | None
          ) -> tuple[str, list[str], dict[str, str] | None]:
    if wsl:
        assert distro and user
        return "wsl.exe", hostconfig.wsl_argv(distro, user, pins, *args), None
    argv = pins.module_argv(*args)
    return argv[0], argv[1:], {"COMMON_MEMORY_HOME": pins.home}


def render(home: str, workspaces: list[str], wsl: bool = False, distro: str | None = None,
           user: str | None = None, host: str = "codex") -> str:
    if host not in HOSTS:
        raise CmError("UNKNOWN_HOST", f"--host must be one of {', '.join(HOSTS)}")
    pins = Pins.current(home)
    checked = bundles.checked_workspaces(home, workspaces)
    if wsl:
        distro, user = hostconfig.wsl_identity(distro, user)
    if host != "codex":
        command, args, env = _argv(pins, hostconfig.mcp_args(CLIENT_IDS[host], "read", checked), wsl, distro, user)
        block = {TOP_KEY.get(host, "mcpServers"): {SERVER: entry(host, command, args, env)}}
        return json.dumps(block, indent=2, ensure_ascii=False) + "\n"
    extra: list[str] = []
    if wsl:
        extra = [f"  distribution: {distro} (WSL_DISTRO_NAME)", f"  Linux user:   {user}",
                 "Paste into the Windows %USERPROFILE%\\.codex\\config.toml (ChatGPT desktop / Codex host)."]
    else:
        extra = ["Paste into the config.toml of a host in this same environment (Codex CLI: ~/.codex/config.toml)."]
    extra.append("Keep the init server out of Codex CLI with mcp_servers.common_memory_init.enabled = false in its "
                 "profile.")
    servers = tomlkit.table(is_super_table=True)
    for name, client, capability, spaces, tools, approval in (
        ("common_memory_init", "chatgpt-desktop", "init", [], hostconfig.INIT_TOOLS, "approve"),
        ("common_memory", "codex-cli", "read", checked, hostconfig.READ_TOOLS, "auto"),
    ):
        command, args, env = _argv(pins, hostconfig.mcp_args(client, capability, spaces), wsl, distro, user)
        servers.add(name, hostconfig.mcp_server_table(command, args, env, tools, approval))
    header = pins.header(f"Common Memory (cm) MCP servers, generated by `cm mcp-config{' --wsl' if wsl else ''}`.",
                         extra)
    return hostconfig.render(header, [("mcp_servers", servers)])
