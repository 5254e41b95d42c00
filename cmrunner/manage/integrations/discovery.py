"""Which agents this machine has, where their configuration lives, and what cm cannot do for them.

Contract:
- Discovery only looks: ``PATH`` lookups and ``os.path`` checks, no process is started and nothing
  is created. Codex: the ``codex`` binary or an existing ``$CODEX_HOME`` (default ``~/.codex``).
  Pi: the ``pi`` binary or an existing ``$PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``).
  ChatGPT Desktop: only on macOS with the app installed; it shares Codex's configuration root. On
  Linux it is unavailable (POSIX configuration validation does not make the Desktop app exist
  there); inside WSL the Windows app needs the bridge bundle of ``cm work-config --mode
  windows-wsl``, which this installer does not write.
  Claude Code: the ``claude`` binary or an existing configuration folder (``$CLAUDE_CONFIG_DIR``,
  default ``~/.claude``); its user MCP servers live in ``.claude.json`` beside that folder
  (``~/.claude.json``), or inside it when ``$CLAUDE_CONFIG_DIR`` is set (checked with Claude Code
  2.1.328). Gemini CLI: the ``gemini`` binary or an existing ``~/.gemini`` (``$GEMINI_CLI_HOME``
  replaces the home folder, as Gemini CLI 0.61 does). ``~`` is the environment's ``HOME``.
- Host ids are the manifest's (``chatgpt`` is ChatGPT Work); ``parse_id`` takes the public ids
  (``codex``, ``claude-code``, ``gemini``, ``pi``, ``chatgpt-work``), ``public_id`` gives them.
- Every host is always reported, available or not, with its limits, so the UI can show why. An
  unavailable one also carries ``unavailable``: the rest of a sentence after its title saying it
  was not found, exactly where cm looked (each folder of ``PATH`` for its command, and the
  configuration folder with the variable that moves it) and what to do, which ``cm agents
  install`` gives as ``HOST_UNAVAILABLE``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from cmrunner.core.errors import CmError

HOST_IDS = ("pi", "codex", "chatgpt", "claude-code", "gemini")
TITLES = {"pi": "Pi", "codex": "Codex CLI", "chatgpt": "ChatGPT Desktop (Work)", "claude-code": "Claude Code",
          "gemini": "Gemini CLI"}
PUBLIC_IDS = {"chatgpt": "chatgpt-work"}
LISTED = ("codex", "claude-code", "gemini", "pi", "chatgpt")  # the order `cm agents` shows
CHATGPT_APPS = ("/Applications/ChatGPT.app", "~/Applications/ChatGPT.app")


@dataclass(frozen=True)
class Host:
    id: str
    title: str
    available: bool
    root: str
    found: str
    limits: str
    binary: str | None = None
    mcp_file: str | None = None  # Claude Code's user MCP servers (``.claude.json``)
    unavailable: str = ""  # not available: "was not found: <where cm looked>; <what to do>" (contract)


def public_id(host: str) -> str:
    return PUBLIC_IDS.get(host, host)


def parse_id(name: str) -> str:
    """The manifest id of a host named by its public id (``UNKNOWN_HOST`` otherwise)."""
    for host in HOST_IDS:
        if public_id(host) == name:
            return host
    raise CmError("UNKNOWN_HOST", f"no agent is called {name!r}; use one of "
                  + ", ".join(public_id(h) for h in LISTED))


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def claude_root(env: Mapping[str, str]) -> str:
    return env.get("CLAUDE_CONFIG_DIR") or os.path.join(_home(env), ".claude")


def claude_mcp_file(env: Mapping[str, str]) -> str:
    if env.get("CLAUDE_CONFIG_DIR"):
        return os.path.join(env["CLAUDE_CONFIG_DIR"], ".claude.json")
    return os.path.join(_home(env), ".claude.json")


def gemini_root(env: Mapping[str, str]) -> str:
    return os.path.join(env.get("GEMINI_CLI_HOME") or _home(env), ".gemini")


def codex_root(env: Mapping[str, str]) -> str:
    return env.get("CODEX_HOME") or os.path.join(_home(env), ".codex")


def pi_root(env: Mapping[str, str]) -> str:
    return env.get("PI_CODING_AGENT_DIR") or os.path.join(_home(env), ".pi", "agent")


def _which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _local(host: str, command: str, root: str, folder: str, env: Mapping[str, str], missing: str, limits: str,
           mcp_file: str | None = None, *, root_var: str, install: str) -> Host:
    """A host found by its command on ``PATH`` or its configuration folder; ``root_var`` is the
    variable that moves that folder, ``install`` what to do when neither is there."""
    binary = _which(command, env)
    found = ", ".join(x for x in (f"{command} at {binary}" if binary else "",
                                  f"{folder} {root}" if os.path.isdir(root) else "") if x)
    available = bool(binary) or os.path.isdir(root)
    unavailable = "" if available else (
        f"was not found: no `{command}` command in the folders of PATH ({_path_folders(env)}) and no configuration "
        f"folder {root} ({root_var} {'is ' + repr(env[root_var]) if env.get(root_var) else 'is not set'}); "
        f"{install}, or add the folder holding `{command}` to PATH, then run `cm agents install {public_id(host)}` "
        "again")
    return Host(host, TITLES[host], available, root, found or missing, limits, binary, mcp_file, unavailable)


def _path_folders(env: Mapping[str, str]) -> str:
    """The folders ``_which`` searched, as the user would write them (``PATH`` unset: the default)."""
    folders = [f for f in env.get("PATH", os.defpath).split(os.pathsep) if f]
    return os.pathsep.join(folders) if folders else "empty"


def discover(env: Mapping[str, str] | None = None, platform: str | None = None,
             chatgpt_apps: tuple[str, ...] = CHATGPT_APPS) -> dict[str, Host]:
    env = os.environ if env is None else env
    platform = platform or sys.platform
    hosts: dict[str, Host] = {}

    hosts["codex"] = _local("codex", "codex", codex_root(env), "config in", env,
                            "neither the codex command nor a Codex configuration folder was found",
                            "start it with `codex --profile common-memory`; trust the six hooks in /hooks; cm cannot "
                            "see whether a running Codex has loaded them",
                            root_var="CODEX_HOME", install="install Codex CLI and start it once")
    hosts["pi"] = _local("pi", "pi", pi_root(env), "agent folder", env,
                         "neither the pi command nor a Pi agent folder was found",
                         "restart Pi to load the extension; no other copy of the Common Memory bridge may be loaded",
                         root_var="PI_CODING_AGENT_DIR", install="install Pi and start it once")

    apps = [os.path.expanduser(p) for p in chatgpt_apps]
    app = next((p for p in apps if os.path.isdir(p)), None)
    if platform == "darwin" and app:
        hosts["chatgpt"] = Host("chatgpt", TITLES["chatgpt"], True, codex_root(env), f"ChatGPT at {app}",
                                "Work sessions only (not web or ordinary Chat); restart the app and trust the hooks; "
                                "shares the Codex configuration folder")
    else:
        if env.get("WSL_DISTRO_NAME"):
            why = ("the Windows app cannot run this WSL runtime directly: generate a reviewable bundle with "
                   "`cm work-config --mode windows-wsl`")
            unavailable = f"is not available here: {why}"
        elif platform == "darwin":
            why = "ChatGPT.app was not found in /Applications"
            unavailable = (f"was not found: no {' and no '.join(apps)}; install the ChatGPT desktop app there, then "
                           "run `cm agents install chatgpt-work` again")
        else:
            why = "ChatGPT Desktop runs on macOS and Windows, not on this system"
            unavailable = f"is not available here: {why}; use `cm work-config` for a bundle to install by hand"
        hosts["chatgpt"] = Host("chatgpt", TITLES["chatgpt"], False, codex_root(env), "not found", why,
                                unavailable=unavailable)

    hosts["claude-code"] = _local("claude-code", "claude", claude_root(env), "config in", env,
                                  "no claude command and no Claude Code configuration folder",
                                  "new sessions load the hooks; `claude --bare` skips them", claude_mcp_file(env),
                                  root_var="CLAUDE_CONFIG_DIR", install="install Claude Code and start it once")
    hosts["gemini"] = _local("gemini", "gemini", gemini_root(env), "settings in", env,
                             "no gemini command and no ~/.gemini folder",
                             "new sessions load the hooks; an exit without SessionEnd is sealed later by cm",
                             root_var="GEMINI_CLI_HOME", install="install Gemini CLI and start it once")
    return {h: hosts[h] for h in HOST_IDS}
