"""`cm memory-agent-mcp`, the relay an agent CLI starts (real subprocesses): strict lines, fixed
answers, nothing executed without the attempt that owns the socket, no traceback."""

from __future__ import annotations

import json
import subprocess

from conftest import CM, hook_env

from cmrunner.agentrt.agentcli import relay


def _run(lines: list[bytes], **env: str) -> tuple[int, list[dict], str]:
    done = subprocess.run([CM, "memory-agent-mcp"], input=b"".join(lines), env=hook_env(**env), capture_output=True,
                          timeout=60)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, answers, done.stderr.decode()


def test_started_by_hand_it_refuses_with_a_code():
    code, answers, err = _run([b""])
    assert code == 2 and answers == [] and err.startswith("MEMORY_AGENT_ONLY:") and "Traceback" not in err


def test_bad_lines_get_errors_and_a_call_without_its_attempt_executes_nothing(tmp_path):
    env = {relay.SOCKET_ENV: str(tmp_path / "gone.sock"), relay.TOKEN_ENV: "t" * 32}
    lines = [b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}\n',
             b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"a":NaN}}}\n',
             b'\xff\xfe not utf-8\n',
             b'{"jsonrpc":"2.0","id":3,"method":"resources/list"}\n',
             b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
             b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}\n',
             b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"submit_memory_decision","arguments":{}}}\n']
    code, answers, err = _run(lines, **env)
    assert code == 0 and "Traceback" not in err
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert [a["error"]["code"] for a in answers if a.get("id") is None] == [-32700, -32700]
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["message"].startswith("ATTEMPT_ENDED")
    assert by_id[5]["result"]["isError"] is True
    assert len(answers) == 6  # the notification got no answer
