"""``cm codex-config`` and ``cm work-config``: reviewable host configuration for Codex and ChatGPT Work.

Contract:
- The Codex configuration is a profile file (hosts.md §1.10): saved as
  ``$CODEX_HOME/common-memory.config.toml`` it layers on the base config with
  ``codex --profile common-memory``. It holds the six hooks (``timeout = 3``) and the read-only MCP
  server ``common_memory`` (client ``codex-cli``, ``--capability read --global`` plus the
  workspaces, ``enabled_tools`` = read + status, approval ``auto``). When the base ``config.toml``
  defines the ChatGPT init server, the profile disables it (a profile cannot disable a server the
  base lacks: Codex refuses a server table without a command).
- ChatGPT Work (client ``chatgpt-work``) gets the same hooks through ``cm hook work``, its own read
  server, and the separate init server ``common_memory_init`` (client ``chatgpt-desktop``,
  ``--capability init --global``, approval ``approve``).
- Bundles (``--output``) hold the configuration file, the ``memory-refresh`` skill (explicit only:
  ``allow_implicit_invocation: false``) and a README; ``windows-wsl`` adds the PowerShell bridge and
  routes hooks and refresh through it and MCP through ``wsl.exe``, pinning distribution, user,
  interpreter and home. Nothing existing is overwritten, no trust store is touched and no trust
  bypass is generated: the user reviews and trusts the hooks through ``/hooks``.
"""

from __future__ import annotations

import os
import re
from typing import TypedDict

import tomlkit
from tomlkit.items import Table

from cmrunner.core import config as config_mod, workspace
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.manage import hostconfig, winbridge
from cmrunner.manage.hostconfig import Pins

PROFILE = "common-memory"
CONFIG_FILE = f"{PROFILE}.config.toml"
BRIDGE_FILE = "common-memory-bridge.ps1"
POWERSHELL = r"C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe"
MODES = ("posix", "windows-wsl")
_BRIDGE_PATH_RE = re.compile(r"^([A-Za-z]:\\|\\\\[A-Za-z0-9._-]+\\)[A-Za-z0-9 _.()\\-]*\.ps1$")

class HostSpec(TypedDict):
    hook: str
    refresh: str
    read_client: str
    init_client: str | None
    title: str


HOSTS: dict[str, HostSpec] = {
    "codex": {"hook": "codex", "refresh": "codex", "read_client": "codex-cli", "init_client": None,
              "title": "Codex CLI"},
    "work": {"hook": "work", "refresh": "chatgpt-work", "read_client": "chatgpt-work",
             "init_client": "chatgpt-desktop", "title": "ChatGPT Work"},
}


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def base_has_init_server(config_toml: str) -> bool:
    """Whether a Codex base ``config.toml`` defines ``mcp_servers.common_memory_init``."""
    import tomllib

    try:
        with open(config_toml, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return isinstance(data.get("mcp_servers", {}).get("common_memory_init"), dict)


def checked_workspaces(home: str, paths: list[str]) -> list[str]:
    """Workspaces as registered, authorized project paths (the MCP process re-checks at launch)."""
    if not paths:
        return []
    cfg = config_mod.load(home)
    data_paths = DataPaths(cfg.data_root)
    checked = []
    for path in paths:
        project = workspace.resolve(data_paths, path)
        if project.scope not in cfg.allowed_scopes:
            raise CmError("UNAUTHORIZED_SCOPE", f"{project.scope} is not in disclosure.allowedScopes; add it first, "
                                                "or its workspace would give the host nothing to read")
        checked.append(workspace.check_path(path))
    return checked


class Target:
    """Where the generated commands run: directly (posix) or through WSL from Windows."""

    def __init__(self, pins: Pins, mode: str, distro: str | None = None, user: str | None = None,
                 bridge_path: str | None = None) -> None:
        if mode not in MODES:
            raise CmError("INVALID_MODE", "--mode must be posix or windows-wsl")
        self.pins = pins
        self.mode = mode
        self.distro = distro
        self.user = user
        self.bridge_path = bridge_path

    def hook_command(self, host: str) -> str:
        if self.mode == "posix":
            return hostconfig.shell_command(self.pins.hook_argv("hook", HOSTS[host]["hook"], "--home", self.pins.home))
        return f'{POWERSHELL} -NoLogo -NoProfile -NonInteractive -File "{self.bridge_path}" hook {host}'

    def refresh_command(self, host: str) -> str:
        if self.mode == "posix":
            return hostconfig.shell_command(self.pins.hook_argv(
                "session-refresh", "--home", self.pins.home, "--client", HOSTS[host]["refresh"]))
        return f'{POWERSHELL} -NoLogo -NoProfile -NonInteractive -File "{self.bridge_path}" refresh {host}'

    def mcp_server(self, client_id: str, capability: str, workspaces: list[str], tools: list[str],
                   approval: str) -> Table:
        args = hostconfig.mcp_args(client_id, capability, workspaces)
        if self.mode == "posix":
            argv = self.pins.module_argv(*args)
            return hostconfig.mcp_server_table(argv[0], argv[1:], {"COMMON_MEMORY_HOME": self.pins.home}, tools,
                                               approval)
        assert self.distro and self.user
        return hostconfig.mcp_server_table(hostconfig.WSL_EXE, hostconfig.wsl_argv(self.distro, self.user, self.pins,
                                                                                   *args), None, tools, approval)

    def header_extra(self) -> list[str]:
        if self.mode == "posix":
            return []
        return [f"  WSL:          {hostconfig.WSL_EXE} -d {self.distro} -u {self.user}",
                f"  bridge:       {self.bridge_path}"]


def config_toml(target: Target, host: str, workspaces: list[str], disable_init: bool, printed: bool = False) -> str:
    spec = HOSTS[host]
    servers = tomlkit.table(is_super_table=True)
    servers.add("common_memory", target.mcp_server(spec["read_client"], "read", workspaces, hostconfig.READ_TOOLS,
                                                   "auto"))
    if spec["init_client"]:
        servers.add("common_memory_init", target.mcp_server(spec["init_client"], "init", [], hostconfig.INIT_TOOLS,
                                                            "approve"))
    elif disable_init:
        off = tomlkit.table()
        off.add("enabled", False)
        servers.add("common_memory_init", off)
    where = (f"Save as $CODEX_HOME/{CONFIG_FILE} and start `codex --profile {PROFILE}`." if host == "codex"
             else "Merge into the Work agent's configuration (see README.md).")
    notes = [where, "Then review and trust the six hooks with /hooks; no trust bypass is generated."]
    if host == "codex":
        notes += [f"mcp_optional_startup_grace_ms: a first turn waits up to {hostconfig.MCP_STARTUP_GRACE_MS} ms for MCP",
                  "servers to start (Codex's own grace, about 1 s, is shorter than cm's start-up)."]
    if printed:
        notes.append("The /memory-refresh skill comes with the bundle: `cm codex-config --mode posix --output <dir>`.")
    header = target.pins.header(f"Common Memory (cm) for {spec['title']}, generated by cm {target.pins.version}.",
                                target.header_extra() + notes)
    settings = {"mcp_optional_startup_grace_ms": hostconfig.MCP_STARTUP_GRACE_MS} if host == "codex" else {}
    return hostconfig.render(header, [("hooks", hostconfig.hooks_table(target.hook_command(host))),
                                      ("mcp_servers", servers)], settings)


def skill_files(refresh_command: str) -> dict[str, str]:
    skill = f"""---
name: memory-refresh
description: Replace this session's frozen Common Memory snapshot with the user's current memory. Use only when the user explicitly invokes memory-refresh.
---

# Refresh Common Memory

Run this command once, exactly as written, with the shell tool:

```sh
{refresh_command}
```

Then tell the user that the refreshed memory arrives with the next tool result or prompt.
Do not edit the command, do not run it for any other purpose and do not read memory files
directly. If it fails, report its `cm:` error line to the user; nothing is lost, the previous
snapshot stays in place.
"""
    policy = "policy:\n  allow_implicit_invocation: false\n"
    return {"skills/memory-refresh/SKILL.md": skill, "skills/memory-refresh/agents/openai.yaml": policy}


def _readme(target: Target, host: str) -> str:
    spec = HOSTS[host]
    pins = target.pins
    lines = [f"# Common Memory for {spec['title']} ({target.mode})", "",
             f"Generated by cm {pins.version}. Nothing here was installed; review every file first.", "",
             "Pinned (regenerate after moving the installation or changing Python or COMMON_MEMORY_HOME):", "",
             f"- interpreter: `{pins.python}`", f"- cm entry: `{pins.cm or '(none next to the interpreter)'}`",
             f"- config home: `{pins.home}`", f"- data root: `{pins.data_root}`"]
    if target.mode == "windows-wsl":
        lines += [f"- WSL: `{hostconfig.WSL_EXE}` distribution `{target.distro}`, user `{target.user}`",
                  f"- bridge: `{target.bridge_path}` (this folder's `{BRIDGE_FILE}`; keep it at that Windows path)"]
    lines += ["", "## Install", ""]
    if host == "codex":
        lines += [f"1. Copy `{CONFIG_FILE}` to `$CODEX_HOME/{CONFIG_FILE}` (default `~/.codex`); merge by hand if a "
                  "file with that name exists.",
                  "2. Copy `skills/memory-refresh` to `$CODEX_HOME/skills/memory-refresh`.",
                  f"3. Start `codex --profile {PROFILE}` and trust the six hooks with `/hooks`.",
                  "4. If the base config.toml also holds the ChatGPT init server, add "
                  "`[mcp_servers.common_memory_init]` with `enabled = false` to the profile file."]
    else:
        lines += [f"1. Merge `{CONFIG_FILE}` into the Work agent's `config.toml` (keep Work and Codex profiles "
                  "separate when they share a config home).",
                  "2. Install `skills/memory-refresh` in that agent's skills folder.",
                  "3. Restart the agent and trust the six hooks with `/hooks`.",
                  "4. `memory_init` needs `agent_observation` in disclosure.allowedProvenance; the host asks before "
                  "each call (approval mode `approve`)."]
    if target.mode == "windows-wsl":
        lines += ["", "The bridge converts only the event's cwd and transcript_path into WSL paths and passes the "
                      "host process identity. It does not change the PowerShell execution policy; a script on a UNC "
                      "path may need signing under the machine's policy."]
    return "\n".join(lines) + "\n"


def print_codex(home: str, workspaces: list[str]) -> str:
    """The no-argument form: the Codex profile file for this machine, on stdout."""
    pins = Pins.current(home)
    checked = checked_workspaces(home, workspaces)
    disable_init = base_has_init_server(os.path.join(codex_home(), "config.toml"))
    return config_toml(Target(pins, "posix"), "codex", checked, disable_init, printed=True)


def bridge_path_for(output: str, bridge_path: str | None) -> str:
    if bridge_path is None:
        folder = hostconfig.windows_path_of(output)
        if folder is None:
            raise CmError("BRIDGE_PATH_REQUIRED", "--output is not under /mnt/<drive>/; pass --bridge-path with the "
                                                  "Windows path where the bridge will live")
        bridge_path = folder.rstrip("\\") + "\\" + BRIDGE_FILE
    if not _BRIDGE_PATH_RE.match(bridge_path):
        raise CmError("INVALID_BRIDGE_PATH", "--bridge-path must be an absolute Windows path of a .ps1 file made of "
                                             "letters, digits, spaces and ._-() (no quotes or $)")
    return bridge_path


def write(home: str, host: str, mode: str, output: str, workspaces: list[str], distro: str | None = None,
          user: str | None = None, bridge_path: str | None = None) -> list[str]:
    """Generate the bundle for ``host`` into the new folder ``output``; returns the files written."""
    if host not in HOSTS:
        raise CmError("INVALID_HOST", "the host must be codex or work")
    output = hostconfig.check_output(output)
    pins = Pins.current(home)
    checked = checked_workspaces(home, workspaces)
    if mode == "windows-wsl":
        distro, user = hostconfig.wsl_identity(distro, user)
        bridge_path = bridge_path_for(output, bridge_path)
    elif mode == "posix":
        distro = user = bridge_path = None
    target = Target(pins, mode, distro, user, bridge_path)
    disable_init = host == "codex" and base_has_init_server(os.path.join(codex_home(), "config.toml"))
    files: dict[str, bytes] = {CONFIG_FILE: config_toml(target, host, checked, disable_init).encode("utf-8")}
    for relative, text in skill_files(target.refresh_command(host)).items():
        files[relative] = text.encode("utf-8")
    files["README.md"] = _readme(target, host).encode("utf-8")
    if mode == "windows-wsl":
        assert distro and user
        files[BRIDGE_FILE] = winbridge.render(pins, distro, user)
    return hostconfig.write_bundle(output, files)
