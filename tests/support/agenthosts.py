"""The real Claude Code and Gemini CLI for tests: pinned npm installs in the host cache, run offline.

Contract:
- ``claude_binary()`` / ``gemini_binary()`` install ``@anthropic-ai/claude-code@2.1.328`` (its linux
  binary comes from the npm registry as an optional dependency, ~170 MB, cached) and
  ``@google/gemini-cli@0.61.0`` through ``hosts.install_host`` (same cache, same atomic rename).
- ``write_claude_settings`` / ``write_gemini_settings`` write the scratch ``HOME``'s user settings a
  test needs besides cm (Claude's finished onboarding; Gemini's offline auth and privacy), then
  ``install_hooks`` runs ``cm agents install claude-code|gemini`` there, as a user would.
- ``claude_env`` / ``gemini_env``: a scratch ``HOME``, the fake model as the provider
  (``ANTHROPIC_BASE_URL`` / ``GOOGLE_GEMINI_BASE_URL``), no real keys, no telemetry, no retries
  (hosts-more.md §2.2, §3). ``run`` runs a host to completion, bounded, and stops it by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support import hosts

CLAUDE_PACKAGE, CLAUDE_VERSION = "@anthropic-ai/claude-code", "2.1.328"
GEMINI_PACKAGE, GEMINI_VERSION = "@google/gemini-cli", "0.61.0"
GEMINI_MODEL = "gemini-2.5-flash"


def claude_binary() -> Path:
    """Claude Code 2.1.328 (installed on first use)."""
    return hosts.install_host(CLAUDE_PACKAGE, CLAUDE_VERSION, "claude", CLAUDE_VERSION)


def gemini_binary() -> Path:
    """Gemini CLI 0.61.0 (installed on first use)."""
    return hosts.install_host(GEMINI_PACKAGE, GEMINI_VERSION, "gemini", GEMINI_VERSION)


def install_hooks(cm: str, home: str, host: str, env: dict[str, str]) -> None:
    """``cm agents install <host>`` into the scratch ``HOME`` of ``env`` (what a user runs; ``cm config
    init`` first when the home does not exist yet)."""
    if not os.path.exists(home):
        subprocess.run([cm, "config", "init", "--home", home], env=env, capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL, check=True)
    proc = subprocess.run([cm, "agents", "install", host, "--home", home], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise hosts.HostSetupError(f"cm agents install {host} failed: {proc.stderr[-800:]}")


def _write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")


def write_claude_settings(scratch_home: Path, settings: dict | None) -> None:
    """User settings (hooks, when given) and a finished onboarding in a scratch ``HOME``."""
    _write_json(scratch_home / ".claude" / "settings.json", settings or {})
    _write_json(scratch_home / ".claude.json", {"hasCompletedOnboarding": True})


def write_gemini_settings(scratch_home: Path, settings: dict | None) -> None:
    """User settings: API-key auth against the fake, no usage statistics, hooks when given."""
    value = {"security": {"auth": {"selectedType": "gemini-api-key"}},
             "privacy": {"usageStatisticsEnabled": False}, **(settings or {})}
    _write_json(scratch_home / ".gemini" / "settings.json", value)


def _base_env(scratch_home: Path, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "CLAUDE_", "GEMINI_", "GOOGLE_", "OPENAI_"))}
    env.pop("COMMON_MEMORY_HOST_INSTANCE", None)  # the hook must find the real host process
    env.update({"HOME": str(scratch_home), "COMMON_MEMORY_HOME": home, "CM_TEST_DRAIN_LINGER_MS": "0",
                "NO_COLOR": "1", "TERM": "dumb"})
    scratch_home.mkdir(parents=True, exist_ok=True)
    return env


def claude_env(scratch_home: Path, home: str, root_url: str) -> dict[str, str]:
    env = _base_env(scratch_home, home)
    env.update({"ANTHROPIC_BASE_URL": root_url, "ANTHROPIC_AUTH_TOKEN": "fake-token-not-secret",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
                "DISABLE_AUTOUPDATER": "1"})
    return env


def gemini_env(scratch_home: Path, home: str, root_url: str) -> dict[str, str]:
    env = _base_env(scratch_home, home)
    env.update({"GOOGLE_GEMINI_BASE_URL": root_url, "GEMINI_API_KEY": "fake-key-not-secret",
                "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    return env


def claude_argv(claude: Path, prompt: str) -> list[str]:
    return [str(claude), "-p", prompt]


def gemini_argv(gemini: Path, prompt: str) -> list[str]:
    return [str(gemini), "-p", prompt, "-m", GEMINI_MODEL]


def run(argv: list[str], cwd: str, env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run a host to completion (stdin /dev/null, bounded); the child is stopped by PID on timeout."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        hosts.stop(process)
        raise hosts.HostSetupError(f"{Path(argv[0]).name} did not finish in {timeout:.0f} s") from exc
    finally:
        hosts.stop(process)
    return subprocess.CompletedProcess(argv, process.returncode, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))
