"""The agent-CLI runtime's bad outcomes, with stand-in CLIs (real subprocesses, no model): each
ends the attempt with a stable code, commits nothing, keeps the job's real cause, and never
shows the CLI's own output (issue 33's "bad input must get").

A Codex-shaped session through the real `cm hook codex` makes one job; `cm flush` runs it with
`remote.agentPath` naming a small Python script that behaves like a broken CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import CM, db_rows, hook_env, settle

from cmrunner.synthetic import codexplay

pytestmark = pytest.mark.timeout(180)

STANDINS = {
    # 6 MiB on stdout, then it would wait: the runtime stops reading at its cap and kills the group.
    "flood": "sys.stdout.buffer.write(b'x' * (6 << 20)); sys.stdout.flush(); time.sleep(60)",
    "login": "print(json.dumps({'type': 'result', 'is_error': True, 'result': 'Invalid API key - Please run /login "
             "SECRET-OUTPUT-4411'})); sys.exit(1)",
    "quota": "print('Claude AI usage limit reached SECRET-OUTPUT-4411', file=sys.stderr); sys.exit(1)",
    "garbage": "sys.stdout.buffer.write(bytes(range(256)) * 64); sys.exit(0)",
    # A CLI that starts cm's relay as its MCP config says, lists the tools and calls two cm never
    # offered, then ends without a submission.
    "offtool": textwrap.dedent("""\
        config = json.load(open(sys.argv[sys.argv.index('--mcp-config') + 1]))['mcpServers']['cm']
        relay = subprocess.Popen([config['command'], *config['args']], env={**os.environ, **config['env']},
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        def ask(n, method, params):
            relay.stdin.write((json.dumps({'jsonrpc': '2.0', 'id': n, 'method': method, 'params': params}) + '\\n').encode())
            relay.stdin.flush()
            return json.loads(relay.stdout.readline())
        ask(1, 'initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'x'}})
        tools = ask(2, 'tools/list', {})['result']['tools']
        print(json.dumps({'tools': [t['name'] for t in tools]}), file=sys.stderr)
        a = ask(3, 'tools/call', {'name': 'delete_all_memory', 'arguments': {}})['result']
        b = ask(4, 'tools/call', {'name': 'Bash', 'arguments': {'command': 'touch ' + PROOF}})['result']
        open(PROOF + '.answers', 'w').write(json.dumps([a, b]))
        relay.stdin.close(); relay.wait(5)
        """),
}


def _standin(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"claude-{kind}"
    proof = json.dumps(str(tmp_path / "bash-ran"))
    path.write_text(f"#!{sys.executable}\nimport json, os, subprocess, sys, time\nPROOF = {proof}\n{STANDINS[kind]}\n")
    path.chmod(0o755)
    return str(path)


def _job(home: str, tmp_path: Path, agent_path: str) -> None:
    done = subprocess.run([CM, "config", "init", "--home", home, "--agent", "claude-code", "--agent-path", agent_path,
                           "--skip-check"],
                          env=hook_env(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    work = tmp_path / "work"
    work.mkdir()
    session = codexplay.Session(str(tmp_path), "s1", home, str(work))
    session.start()
    session.turn(1, "Remember that my editor is zed-2207.")
    session.end()


def _flush(home: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CM, "flush", "--home", home], env=hook_env(), capture_output=True, text=True, timeout=150)


def _outcome(home: str) -> tuple[str, str]:
    (state, issue), = db_rows(home, "SELECT state, issue FROM jobs")
    return state, issue


@pytest.mark.parametrize(("kind", "code", "final"), [
    ("flood", "INVALID_RESPONSE", ("retry", "dead")),
    ("login", "AGENT_CLI_AUTH", ("dead",)),
    ("quota", "AGENT_CLI_QUOTA", ("retry", "dead")),
    ("garbage", "MISSING_SUBMISSION", ("retry", "dead")),
])
def test_a_broken_cli_ends_with_its_code_and_commits_nothing(home, tmp_path, kind, code, final):
    _job(home, tmp_path, _standin(tmp_path, kind))
    flushed = _flush(home)
    settle(home)
    state, issue = _outcome(home)
    assert issue == code and state in final, (state, issue)
    assert not list((Path(home) / "data" / "memory").glob("*.md"))
    status = subprocess.run([CM, "status", "--home", home], env=hook_env(), capture_output=True, text=True, timeout=60)
    shown = flushed.stdout + flushed.stderr + status.stdout + status.stderr
    assert code in status.stdout and "SECRET-OUTPUT-4411" not in shown and "Traceback" not in shown


def test_a_missing_cli_is_agent_cli_not_found(home, tmp_path):
    _job(home, tmp_path, str(tmp_path / "no-such-claude"))
    _flush(home)
    settle(home)
    assert _outcome(home) == ("dead", "AGENT_CLI_NOT_FOUND")
    doctor = subprocess.run([CM, "doctor", "--home", home], env=hook_env(), capture_output=True, text=True, timeout=120)
    assert "AGENT_CLI_NOT_FOUND" in doctor.stdout + doctor.stderr


def test_a_tool_cm_never_offered_executes_nothing_and_the_job_keeps_the_cause(home, tmp_path):
    proof = tmp_path / "bash-ran"
    _job(home, tmp_path, _standin(tmp_path, "offtool"))
    _flush(home)
    settle(home)
    assert not proof.exists()
    first, second = json.loads(Path(f"{proof}.answers").read_text())
    for answer in (first, second):
        assert answer["isError"] is True and json.loads(answer["content"][0]["text"])["code"] == "UNKNOWN_TOOL"
    # The attempt ended without a submission; the job names what the model kept getting wrong.
    (state, issue, failure, rejection), = db_rows(home, "SELECT state, issue, failure, rejection FROM jobs")
    assert (issue, failure) == ("UNKNOWN_TOOL", "MISSING_SUBMISSION") and state in ("retry", "dead"), (state, issue)
    assert json.loads(rejection)["code"] == "UNKNOWN_TOOL"
    assert not list((Path(home) / "data" / "memory").glob("*.md"))
    assert os.path.exists(f"{proof}.answers")
