"""What Claude Code and Gemini CLI need: cm's hook groups and read MCP server as entries in their JSON settings.

Contract (hosts-more.md §1.1, §1.8, §3 and §5; the hook commands are implemented by ``cm hook claude``
and ``cm hook gemini``, which read the event from the payload's ``hook_event_name``):
- Claude Code, user settings ``<config dir>/settings.json`` (strict JSON): one group
  ``{"hooks": [{"type": "command", "command": …, "timeout": 3}]}`` (seconds) appended to
  ``hooks.<Event>`` for each of ``CLAUDE_EVENTS``, with no matcher (every SessionStart source). The
  read server goes to user scope, top-level ``mcpServers.common_memory`` of ``.claude.json``:
  ``{"type": "stdio", "command", "args", "env"}``.
- Gemini CLI, ``~/.gemini/settings.json`` (JSON with comments): one group
  ``{"hooks": [{"type": "command", "command": …, "name": "common-memory", "timeout": 3000}]}``
  (milliseconds) per event of ``GEMINI_EVENTS``, and ``mcpServers.common_memory``.
- The server entries are ``cm mcp-config --host <host>``'s (``mcp_config.entry``), so what is
  installed and what is printed for pasting cannot drift apart.
- Commands are pinned as for Codex (``hostconfig.Pins.hook_argv``): ``<abs python> -I -S <abs
  cmrunner folder>/__main__.py hook claude --home <abs home>``, the same entry as the ``cm`` script
  without depending on its shebang, ``PATH``, ``site`` or the project directory's modules. The read server runs ``mcp --client-id <host>
  --capability read --global`` with ``COMMON_MEMORY_HOME`` in its environment.
"""

from __future__ import annotations

import os

from cmrunner.capture import hostevents
from cmrunner.manage import hostconfig, mcp_config
from cmrunner.manage.integrations.tomledit import Entry

HOSTS = ("claude-code", "gemini")
CLAUDE_EVENTS = hostevents.CLAUDE_EVENTS  # what `cm hook claude` handles: one list, no drift
GEMINI_EVENTS = hostevents.GEMINI_EVENTS
CLAUDE_TIMEOUT_S = hostconfig.HOOK_TIMEOUT
GEMINI_TIMEOUT_MS = hostconfig.HOOK_TIMEOUT * 1000
SERVER = "common_memory"
HOOK_NAME = "common-memory"
SETTINGS = "settings.json"


def hook_command(pins: hostconfig.Pins, host: str) -> str:
    return hostconfig.shell_command(pins.hook_argv("hook", "claude" if host == "claude-code" else "gemini",
                                                   "--home", pins.home))


def read_server(pins: hostconfig.Pins, host: str) -> dict:
    """The read MCP server entry in ``host``'s own format (``mcp_config.entry``)."""
    argv = pins.module_argv(*hostconfig.mcp_args(mcp_config.CLIENT_IDS[host], "read"))
    return mcp_config.entry(host, argv[0], argv[1:], {"COMMON_MEMORY_HOME": pins.home})


def hook_group(pins: hostconfig.Pins, host: str) -> dict:
    handler: dict = {"type": "command", "command": hook_command(pins, host)}
    if host == "claude-code":
        handler["timeout"] = CLAUDE_TIMEOUT_S
    else:
        handler["name"] = HOOK_NAME
        handler["timeout"] = GEMINI_TIMEOUT_MS
    return {"hooks": [handler]}


def events(host: str) -> tuple[str, ...]:
    return CLAUDE_EVENTS if host == "claude-code" else GEMINI_EVENTS


def desired(host: str, root: str, mcp_file: str | None, pins: hostconfig.Pins) -> dict[str, list[Entry]]:
    """The entries ``host`` needs, by file."""
    fmt = "json" if host == "claude-code" else "jsonc"
    settings = os.path.join(root, SETTINGS)
    group = hook_group(pins, host)
    hooks = [Entry(("hooks", event), group, item=True, fmt=fmt) for event in events(host)]
    server = Entry(("mcpServers", SERVER), read_server(pins, host), fmt=fmt)
    if host == "claude-code":
        assert mcp_file is not None
        return {settings: hooks, mcp_file: [server]}
    return {settings: [*hooks, server]}
