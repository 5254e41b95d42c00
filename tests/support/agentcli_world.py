"""A scratch world for the tests that run a real agent CLI (Claude Code, Codex, Gemini CLI) as cm's
Memory Agent, offline against the project's loopback fake model: the environment the CLI runs in
(a scratch HOME with the host's offline settings, the fake model's URL), cm's home configured
with ``cm config init --agent …`` (no key; the World skips its check, which ``test_agentcli_nettest``
and ``test_agentcli_init_check`` run against each real CLI), and what the tests ask of it afterwards — a flush, the
Memory Agent's own model requests, the CLI processes it left behind.

Shared by ``test_e2e_agentcli_{claude,codex,gemini}.py``, ``test_agentcli_nettest.py`` and
``test_eval_agentcli.py``; each test file keeps what is particular to its host (its sessions, its
request format).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import CM

from cmrunner.synthetic import fakemodel
from support import agenthosts, hosts

AGENTS = ("claude-code", "codex", "gemini")
# What identifies a Memory Agent attempt's processes: the private directory the CLI runs in and
# cm's relay, which the CLI starts.
AGENT_MARKS = ("/cm-agent-", "memory-agent-mcp")


def binary(agent: str) -> Path:
    """The cached real CLI of ``agent`` (installed on first use; fails saying what is missing)."""
    return {"claude-code": agenthosts.claude_binary, "codex": hosts.codex_binary,
            "gemini": agenthosts.gemini_binary}[agent]()


def host_env(agent: str, root: Path, home: str, fake: fakemodel.FakeModel, hooks: bool = False) -> dict[str, str]:
    """The environment a user of ``agent`` runs in: a scratch HOME (and, for Codex, a CODEX_HOME)
    whose settings point the CLI at ``fake``, offline. ``hooks`` adds cm's Codex hooks to that
    CODEX_HOME (Claude Code and Gemini CLI get theirs from ``cm agents install``)."""
    scratch = root / "scratchhome"
    if agent == "claude-code":
        agenthosts.write_claude_settings(scratch, None)
        return agenthosts.claude_env(scratch, home, fake.root_url)
    if agent == "gemini":
        agenthosts.write_gemini_settings(scratch, None)
        return agenthosts.gemini_env(scratch, home, fake.root_url)
    codex_home = str(root / "codexhome")
    hooks_table = hosts.codex_hooks(hosts.cm_hook_command(CM, home)) if hooks else None
    hosts.write_codex_home(codex_home, fake.base_url, hooks=hooks_table)
    env = hosts.codex_env(codex_home, str(scratch), {"COMMON_MEMORY_HOME": home, "CM_TEST_DRAIN_LINGER_MS": "0"})
    env.pop("COMMON_MEMORY_HOST_INSTANCE", None)
    return env


def init_args(agent: str, path: str) -> list[str]:
    """``cm config init``'s arguments that make ``agent`` at ``path`` the Memory Agent; Gemini CLI is
    given the model the fake serves (its default would be another)."""
    args = ["--agent", agent, "--agent-path", path]
    return args + (["--model", agenthosts.GEMINI_MODEL] if agent == "gemini" else [])


def configure(home: str, env: dict[str, str], agent: str, path: str, *extra: str) -> None:
    done = subprocess.run([CM, "config", "init", "--home", home, *init_args(agent, path), *extra], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr


def run_cm(home: str, env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``cm ARGS --home HOME`` as a real subprocess, no terminal, text output."""
    return subprocess.run([CM, *args, "--home", home], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def agent_requests(fake: fakemodel.FakeModel) -> list[dict]:
    """The Memory Agent's model requests: those whose conversation holds the memory task."""
    return [r for r in fake.model_requests() if "memory_task_v1" in json.dumps(r["body"])]


def leftover_processes(env: dict[str, str]) -> list[int]:
    """Memory Agent processes (the CLI in its private directory, cm's relay) still running from a
    world whose environment is ``env``: matched by their HOME as well, so a test running beside
    this one on the same machine is not counted."""
    import psutil

    left = []
    for proc in psutil.process_iter(["cmdline"]):
        if not any(mark in part for part in proc.info["cmdline"] or [] for mark in AGENT_MARKS):
            continue
        try:
            same_world = proc.environ().get("HOME") == env["HOME"]
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if same_world:
            left.append(proc.pid)
    return left


class World:
    """A cm home whose Memory Agent is ``agent``, the fake model both the user's own sessions and
    the Memory Agent's run talk to, and the environment both run in."""

    def __init__(self, agent: str, cli: Path, home: str, root: Path, fake: fakemodel.FakeModel, *init: str,
                 hooks: bool = True) -> None:
        self.agent, self.cli, self.home, self.fake = agent, cli, home, fake
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        self.env = host_env(agent, root, home, fake, hooks=hooks)
        # The init check is one more CLI start per world; the tests of that check run it.
        configure(home, self.env, agent, str(cli), "--skip-check", *init)

    def cm(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return run_cm(self.home, self.env, *args, timeout=timeout)

    def flush(self) -> subprocess.CompletedProcess[str]:
        return self.cm("flush")

    def agent_requests(self) -> list[dict]:
        return agent_requests(self.fake)

    def leftover_processes(self) -> list[int]:
        return leftover_processes(self.env)
