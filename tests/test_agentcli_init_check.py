"""`cm config init --agent` checks the CLI before it saves (issue 36), as the setup wizard does: one
confined run of the CLI on the network test's synthetic task. A CLI that answers is saved; a
refused login (`AGENT_CLI_AUTH`) or a CLI that is not there (`AGENT_CLI_NOT_FOUND`) prints the code
and the fix and writes nothing; `--skip-check` saves without the run.

The real Claude Code (cached like the other agent-CLI tests), offline, pointed at the project's
loopback fake model; a path where no CLI exists. Each test has its own temporary home.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CM, hook_env
from support import agentcli_world

from cmrunner.synthetic import fakemodel

pytestmark = pytest.mark.timeout(300)


def _init(home: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CM, "config", "init", "--home", home, *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_a_cli_that_answers_is_checked_then_saved(home, tmp_path):
    cli = agentcli_world.binary("claude-code")
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"text": "OK"}}) as fake:
        env = agentcli_world.host_env("claude-code", tmp_path, home, fake)
        done = _init(home, env, "--agent", "claude-code", "--agent-path", str(cli))
        requests = fake.model_requests()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {home}/config.json\n"
    remote = json.loads((Path(home) / "config.json").read_text())["remote"]
    assert remote == {"provider": "agent-cli", "agent": "claude-code", "agentPath": str(cli)}
    # The CLI really ran once, on the probe's synthetic task (no configuration existed yet, so no
    # ledger was opened: the data root is still untouched).
    assert any("Reply with the word OK." in json.dumps(r["body"]) for r in requests), len(requests)
    assert not (Path(home) / "data").exists()


def test_a_refused_login_writes_nothing_and_says_the_code_and_the_fix(home, tmp_path):
    cli = agentcli_world.binary("claude-code")
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"error": {"status": 401}}}) as fake:
        env = agentcli_world.host_env("claude-code", tmp_path, home, fake)
        done = _init(home, env, "--agent", "claude-code", "--agent-path", str(cli))
        asked = len(fake.model_requests())
    assert done.returncode == 1, done.stdout + done.stderr
    assert asked > 0  # refused by the model's login, not before the CLI ran
    [line] = done.stderr.splitlines()
    assert line.startswith(f"cm: AGENT_CLI_AUTH: Claude Code at {cli} did not pass the check: "), line
    assert "log in" in line and line.endswith("(nothing was written; --skip-check saves without checking)"), line
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not os.path.exists(home)  # not even the home folder
    # The same command with --skip-check saves it (offline setup), as the HTTP check allows.
    skipped = _init(home, env, "--agent", "claude-code", "--agent-path", str(cli), "--skip-check")
    assert skipped.returncode == 0, skipped.stderr
    assert json.loads((Path(home) / "config.json").read_text())["remote"]["agent"] == "claude-code"


def test_a_missing_cli_is_agent_cli_not_found_and_writes_nothing(home, tmp_path):
    missing = str(tmp_path / "no-such-claude")
    done = _init(home, hook_env(), "--agent", "claude-code", "--agent-path", missing)
    assert done.returncode == 1
    assert done.stderr == (f"cm: AGENT_CLI_NOT_FOUND: Claude Code was not found at {missing}; install Claude Code "
                           "(npm install -g @anthropic-ai/claude-code) and log in once, or pass --agent-path "
                           "(nothing was written)\n")
    assert not os.path.exists(home)  # not even the home folder
    on_path = _init(home, hook_env(PATH=str(tmp_path)), "--agent", "codex")
    assert on_path.returncode == 1 and "AGENT_CLI_NOT_FOUND: Codex CLI was not found on PATH;" in on_path.stderr
    assert not os.path.exists(home)  # not even the home folder
