"""Which agents this machine has, where their configuration lives, and what cm cannot do for them.

Contract:
- Discovery only looks: ``PATH`` lookups and ``os.path`` checks, no process is started and nothing
  is created. Codex: the ``codex`` binary or an existing ``$CODEX_HOME`` (default ``~/.codex``).
  Pi: the ``pi`` binary or an existing ``$PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``).
  ChatGPT Desktop: only on macOS with the app installed; it shares Codex's configuration root. On
  Linux it is unavailable (POSIX configuration validation does not make the Desktop app exist
  there); inside WSL the Windows app needs the bridge bundle of ``cm work-config --mode
  windows-wsl``, which this installer does not write.
- Every host is always reported, available or not, with its limits, so the UI can show why.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass

HOST_IDS = ("pi", "codex", "chatgpt")
TITLES = {"pi": "Pi", "codex": "Codex CLI", "chatgpt": "ChatGPT Desktop (Work)"}
CHATGPT_APPS = ("/Applications/ChatGPT.app", "~/Applications/ChatGPT.app")


@dataclass(frozen=True)
class Host:
    id: str
    title: str
    available: bool
    root: str
    found: str
    limits: str


def codex_root(env: Mapping[str, str]) -> str:
    return env.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def pi_root(env: Mapping[str, str]) -> str:
    return env.get("PI_CODING_AGENT_DIR") or os.path.join(os.path.expanduser("~"), ".pi", "agent")


def _which(name: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(name, path=env.get("PATH", os.defpath))


def discover(env: Mapping[str, str] | None = None, platform: str | None = None,
             chatgpt_apps: tuple[str, ...] = CHATGPT_APPS) -> dict[str, Host]:
    env = os.environ if env is None else env
    platform = platform or sys.platform
    hosts: dict[str, Host] = {}

    root = codex_root(env)
    binary = _which("codex", env)
    found = ", ".join(x for x in (f"codex at {binary}" if binary else "",
                                  f"config in {root}" if os.path.isdir(root) else "") if x)
    hosts["codex"] = Host("codex", TITLES["codex"], bool(binary) or os.path.isdir(root), root,
                          found or "neither the codex command nor a Codex configuration folder was found",
                          "start it with `codex --profile common-memory`; trust the six hooks in /hooks; cm cannot "
                          "see whether a running Codex has loaded them")

    root = pi_root(env)
    binary = _which("pi", env)
    found = ", ".join(x for x in (f"pi at {binary}" if binary else "",
                                  f"agent folder {root}" if os.path.isdir(root) else "") if x)
    hosts["pi"] = Host("pi", TITLES["pi"], bool(binary) or os.path.isdir(root), root,
                       found or "neither the pi command nor a Pi agent folder was found",
                       "restart Pi to load the extension; no other copy of the Common Memory bridge may be loaded")

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
        elif platform == "darwin":
            why = "ChatGPT.app was not found in /Applications"
        else:
            why = "ChatGPT Desktop runs on macOS and Windows, not on this system"
        hosts["chatgpt"] = Host("chatgpt", TITLES["chatgpt"], False, codex_root(env), "not found", why)
    return {h: hosts[h] for h in HOST_IDS}
