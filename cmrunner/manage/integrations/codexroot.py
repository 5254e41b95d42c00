"""What one Codex configuration root (``$CODEX_HOME``) needs for its owners: Codex CLI and ChatGPT.

Contract (the layout decision, where the specification leaves placement open):
- Codex CLI alone uses the profile-file layout (hosts.md §1.10): ``common-memory.config.toml``
  holds the six hooks and the read MCP server ``common_memory``; the user starts
  ``codex --profile common-memory``. It is the same file ``cm codex-config`` prints. The profile
  lets the first turn wait for the read server to start (``hostconfig.MCP_STARTUP_GRACE_MS``).
- ChatGPT Desktop cannot pick a profile, so when it is an owner the shared hooks and the read MCP
  server live in the base ``config.toml`` instead (entries cm adds and removes one by one), and
  the Codex profile file, if Codex is an owner too, holds no second copy: Codex and ChatGPT share
  one physical hook set and one read server, kept while either owner needs them.
- The ``memory-refresh`` skill (``skills/memory-refresh``) is shared by both owners.
- The separate init server ``common_memory_init`` (client ``chatgpt-desktop``, approval
  ``approve``) exists only when ChatGPT's AI Understanding Import is chosen; the Codex profile
  then disables it for Codex CLI.
- Hooks and refresh use the internal client ``codex`` (the host protocol, not a product identity);
  the read server's client id is ``codex-cli``. Commands are pinned (``hostconfig.Pins``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cmrunner.manage import bundles, hostconfig
from cmrunner.manage.integrations.tomledit import Entry

PROFILE_FILE = bundles.CONFIG_FILE
BASE_FILE = "config.toml"
SKILL_DIR = os.path.join("skills", "memory-refresh")


@dataclass
class Desired:
    files: dict[str, bytes] = field(default_factory=dict)
    entries: dict[str, list[Entry]] = field(default_factory=dict)  # file -> entries
    prune: dict[str, list[str]] = field(default_factory=dict)       # file -> cm's own folders


def _server(pins: hostconfig.Pins, client: str, capability: str, tools: list[str], approval: str) -> dict:
    argv = pins.module_argv(*hostconfig.mcp_args(client, capability))
    return {"command": argv[0], "args": argv[1:], "env": {"COMMON_MEMORY_HOME": pins.home},
            "enabled_tools": list(tools), "default_tools_approval_mode": approval}


def hook_groups(command: str) -> dict[str, dict]:
    """One ``[[hooks.<Event>]]`` group per event, as plain data."""
    groups = {}
    for event in hostconfig.HOOK_EVENTS:
        handler: dict = {"type": "command", "command": command, "timeout": hostconfig.HOOK_TIMEOUT}
        if event in hostconfig.CONTEXT_EVENTS:
            handler["additionalContextLimit"] = 0
        group: dict = {"matcher": hostconfig.SESSION_START_MATCHER} if event == "SessionStart" else {}
        group["hooks"] = [handler]
        groups[event] = group
    return groups


def base_entries(pins: hostconfig.Pins, init: bool) -> list[Entry]:
    target = bundles.Target(pins, "posix")
    entries = [Entry(("hooks", event), group, item=True)
               for event, group in hook_groups(target.hook_command("codex")).items()]
    entries.append(Entry(("mcp_servers", "common_memory"),
                         _server(pins, "codex-cli", "read", hostconfig.READ_TOOLS, "auto")))
    if init:
        entries.append(Entry(("mcp_servers", "common_memory_init"),
                             _server(pins, "chatgpt-desktop", "init", hostconfig.INIT_TOOLS, "approve")))
    return entries


def _profile(pins: hostconfig.Pins, shared_in_base: bool, disable_init: bool) -> bytes:
    target = bundles.Target(pins, "posix")
    if not shared_in_base:
        return bundles.config_toml(target, "codex", [], disable_init).encode("utf-8")
    header = pins.header(f"Common Memory (cm) for Codex CLI, managed by cm {pins.version}.",
                         ["Start `codex --profile common-memory`. ChatGPT shares this Codex home, so the hooks and",
                          "the read MCP server live in config.toml (one copy for both); cm manages both files."])
    body = hostconfig.comment_block(header) + f"\nmcp_optional_startup_grace_ms = {hostconfig.MCP_STARTUP_GRACE_MS}\n"
    if disable_init:
        body += "\n[mcp_servers.common_memory_init]\nenabled = false\n"
    return body.encode("utf-8")


def desired(root: str, pins: hostconfig.Pins, owners: set[str], init: bool, base_has_init: bool) -> Desired:
    """The files and base entries ``owners`` (subset of {codex, chatgpt}) need in ``root``."""
    want = Desired()
    if not owners:
        return want
    skill_root = os.path.join(root, SKILL_DIR)
    for relative, text in bundles.skill_files(bundles.Target(pins, "posix").refresh_command("codex")).items():
        path = os.path.join(root, relative)
        want.files[path] = text.encode("utf-8")
        want.prune[path] = [skill_root, os.path.join(skill_root, "agents")]
    chatgpt = "chatgpt" in owners
    if chatgpt:
        want.entries[os.path.join(root, BASE_FILE)] = base_entries(pins, init)
    if "codex" in owners:
        path = os.path.join(root, PROFILE_FILE)
        want.files[path] = _profile(pins, chatgpt, (chatgpt and init) or base_has_init)
    return want
