"""`cm network-test` and `cm doctor --probe-model` on an agent-CLI runtime (issue 33): one confined,
headless run of the configured CLI with a fixed synthetic task, reported as the CLI's path and
version and an outcome code, never the CLI's own output.

Each real CLI (Claude Code 2.1.328, Codex 0.169.0, Gemini CLI 0.61.0), offline, pointed at the
project's loopback fake model; a CLI that does not exist. Never skipped: without node/npm these tests fail saying what to install.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import db_rows, hook_env
from support import agentcli_world

from cmrunner.synthetic import fakemodel
from cmrunner.tui.settings import describe_test

pytestmark = pytest.mark.timeout(300)
# What each CLI still offers the model when cm's server lists no tool: Codex its read-only browser
# of MCP resources (cm's server has none); never a shell, file or web tool, never a memory tool.
PROBE_TOOLS = {"claude-code": set(), "gemini": set(),
               "codex": {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}}


@pytest.fixture(scope="module", params=agentcli_world.AGENTS)
def agent(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """Each real CLI in turn: Claude Code, Codex, Gemini CLI."""
    return request.param, agentcli_world.binary(request.param)


def _offered(name: str, request: dict) -> set[str]:
    """The tools a request let the model call, in each host's format (Claude Code's never-callable
    ``defer_loading`` placeholder left out)."""
    tools = request["body"].get("tools") or []
    if name == "gemini":
        return {d.get("name") for t in tools for d in t.get("functionDeclarations") or []}
    return {t.get("name") for t in tools if not t.get("defer_loading")}


def test_network_test_runs_the_cli_once_and_reports_its_version(agent, home, tmp_path):
    name, cli = agent
    answer = "OK-SECRET-REPLY-7319"
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"text": answer}}) as fake:
        env = agentcli_world.host_env(name, tmp_path, home, fake)
        agentcli_world.configure(home, env, name, str(cli))
        probed = agentcli_world.run_cm(home, env, "network-test", "--json")
        requests = fake.model_requests()
        doctor = agentcli_world.run_cm(home, env, "doctor", "--probe-model")
    assert probed.returncode == 0, probed.stdout + probed.stderr
    report = json.loads(probed.stdout)
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert report["runtime"] == "agent-cli" and report["agent"] == name
    assert report["binary"] == str(cli) and report["version"] and report["version"] in version
    assert report["outcome"]["ok"] is True and report["outcome"]["usage"]["input_tokens"] > 0, report
    # The CLI really ran, confined: only cm's (empty) server, no built-in tool, the probe's prompt.
    assert requests and all(_offered(name, r) <= PROBE_TOOLS[name] for r in requests), \
        [sorted(_offered(name, r)) for r in requests]
    assert any("Reply with the word OK." in json.dumps(r["body"]) for r in requests)
    # The CLI's own reply is never shown.
    assert answer not in probed.stdout + probed.stderr + doctor.stdout + doctor.stderr
    assert db_rows(home, "SELECT process, api, outcome FROM ledger") == [
        ("network_test", "agent-cli", "ok"), ("network_test", "agent-cli", "ok")]
    assert "answered one small task" in doctor.stdout, doctor.stdout


def test_a_refused_login_is_agent_cli_auth(agent, home, tmp_path):
    name, cli = agent
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"error": {"status": 401}}}) as fake:
        env = agentcli_world.host_env(name, tmp_path, home, fake)
        agentcli_world.configure(home, env, name, str(cli), "--skip-check")  # the check would refuse this login
        probed = agentcli_world.run_cm(home, env, "network-test")
        doctor = agentcli_world.run_cm(home, env, "doctor", "--probe-model")
    assert probed.returncode == 1, probed.stdout + probed.stderr
    assert "outcome: AGENT_CLI_AUTH" in probed.stdout and "Traceback" not in probed.stderr, probed.stdout
    assert f"route:   {cli}, version " in probed.stdout
    assert doctor.returncode == 1 and "AGENT_CLI_AUTH" in doctor.stdout, doctor.stdout


def test_a_missing_cli_is_agent_cli_not_found(home, tmp_path):
    env = hook_env()
    agentcli_world.configure(home, env, "claude-code", str(tmp_path / "no-such-claude"), "--skip-check")
    probed = agentcli_world.run_cm(home, env, "network-test", "--json")
    assert probed.returncode == 1
    report = json.loads(probed.stdout)
    outcome = report["outcome"]
    assert outcome["ok"] is False and outcome["code"] == "AGENT_CLI_NOT_FOUND" and outcome["remedy"], outcome
    # The settings screen's connection test shows the same report.
    shown = describe_test(report)
    assert "claude-code CLI" in shown and "Outcome: AGENT_CLI_NOT_FOUND" in shown, shown
    doctor = agentcli_world.run_cm(home, env, "doctor", "--probe-model")
    assert doctor.returncode == 1 and "AGENT_CLI_NOT_FOUND" in doctor.stdout, doctor.stdout
    assert "Traceback" not in probed.stderr + doctor.stderr
