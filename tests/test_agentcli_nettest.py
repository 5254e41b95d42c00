"""`cm network-test` and `cm doctor --probe-model` on an agent-CLI runtime (issue 33): one confined,
headless run of the configured CLI with a fixed synthetic task, reported as the CLI's path and
version and an outcome code, never the CLI's own output.

The real Claude Code (2.1.328), offline, pointed at the project's loopback fake model; a CLI that
does not exist. Never skipped: without node/npm these tests fail saying what to install.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env
from support import agenthosts

from cmrunner.synthetic import fakemodel
from cmrunner.tui.settings import describe_test

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def claude() -> Path:
    return agenthosts.claude_binary()


def _configure(home: str, env: dict[str, str], agent_path: str) -> None:
    done = subprocess.run([CM, "config", "init", "--home", home, "--agent", "claude-code", "--agent-path", agent_path],
                          env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr


def _cm(home: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CM, *args, "--home", home], env=env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)


def _claude_env(tmp_path: Path, home: str, fake: fakemodel.FakeModel) -> dict[str, str]:
    scratch = tmp_path / "scratchhome"
    agenthosts.write_claude_settings(scratch, None)
    return agenthosts.claude_env(scratch, home, fake.root_url)


def test_network_test_runs_claude_code_once_and_reports_its_version(claude, home, tmp_path):
    answer = "OK-SECRET-REPLY-7319"
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"text": answer}}) as fake:
        env = _claude_env(tmp_path, home, fake)
        _configure(home, env, str(claude))
        probed = _cm(home, env, "network-test", "--json")
        requests = fake.model_requests()
        doctor = _cm(home, env, "doctor", "--probe-model")
    assert probed.returncode == 0, probed.stdout + probed.stderr
    report = json.loads(probed.stdout)
    version = subprocess.run([str(claude), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert report["runtime"] == "agent-cli" and report["agent"] == "claude-code"
    assert report["binary"] == str(claude) and report["version"] and report["version"] in version
    assert report["outcome"]["ok"] is True and report["outcome"]["usage"]["input_tokens"] > 0, report
    # The CLI really ran, confined: only cm's (empty) server, no built-in tool, the probe's prompt.
    assert requests and all(not r["body"].get("tools") or all(t.get("defer_loading") for t in r["body"]["tools"])
                            for r in requests), [r["body"].get("tools") for r in requests]
    assert any("Reply with the word OK." in json.dumps(r["body"]) for r in requests)
    # The CLI's own reply is never shown.
    assert answer not in probed.stdout + probed.stderr + doctor.stdout + doctor.stderr
    assert db_rows(home, "SELECT process, api, outcome FROM ledger") == [
        ("network_test", "agent-cli", "ok"), ("network_test", "agent-cli", "ok")]
    assert "answered one small task" in doctor.stdout, doctor.stdout


def test_a_refused_login_is_agent_cli_auth(claude, home, tmp_path):
    with fakemodel.running(str(tmp_path / "model"), {"replies": [], "default": {"error": {"status": 401}}}) as fake:
        env = _claude_env(tmp_path, home, fake)
        _configure(home, env, str(claude))
        probed = _cm(home, env, "network-test")
    assert probed.returncode == 1, probed.stdout + probed.stderr
    assert "outcome: AGENT_CLI_AUTH" in probed.stdout and "Traceback" not in probed.stderr, probed.stdout
    assert f"route:   {claude}, version " in probed.stdout


def test_a_missing_cli_is_agent_cli_not_found(home, tmp_path):
    env = hook_env()
    _configure(home, env, str(tmp_path / "no-such-claude"))
    probed = _cm(home, env, "network-test", "--json")
    assert probed.returncode == 1
    report = json.loads(probed.stdout)
    outcome = report["outcome"]
    assert outcome["ok"] is False and outcome["code"] == "AGENT_CLI_NOT_FOUND" and outcome["remedy"], outcome
    # The settings screen's connection test shows the same report.
    shown = describe_test(report)
    assert "claude-code CLI" in shown and "Outcome: AGENT_CLI_NOT_FOUND" in shown, shown
    doctor = _cm(home, env, "doctor", "--probe-model")
    assert doctor.returncode == 1 and "AGENT_CLI_NOT_FOUND" in doctor.stdout, doctor.stdout
    assert "Traceback" not in probed.stderr + doctor.stderr
