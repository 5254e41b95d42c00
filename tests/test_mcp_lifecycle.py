"""`cm mcp` shutdown over the raw stdio wire: stdin EOF and SIGTERM queue a flush, spawn a drain, exit 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from conftest import CM
from mcp_support import configure, retain_template, rows, script_file, server_env, wait_for

from cmrunner.capture import observations
from cmrunner.core import store

RELAY = ["--client-id", "relay-1", "--capability", "relay", "--global", "--accept-client-reported-user-turns"]


def _start(home: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([CM, "mcp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def _send(proc: subprocess.Popen, message: dict) -> None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _request(proc: subprocess.Popen, request_id: int, method: str, params: dict) -> dict:
    _send(proc, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    line = proc.stdout.readline()
    reply = json.loads(line)
    assert reply["id"] == request_id and "result" in reply, reply
    return reply["result"]


def _initialize(proc: subprocess.Popen) -> dict:
    result = _request(proc, 1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"}})
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return result


def _queue_relay_turn(paths) -> None:
    """A relay observation left pending below every threshold, with no flush requested and no drain."""
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            observations.admit(conn, agent='mcp-relay-1', namespace='mcp:["relay-1",["submission","old"]]', entry_id="old",
                               text="I live in Lisbon.", scope="global", source="mcp_user_submission",
                               observed_at="2026-11-30T00:00:00.000Z")
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_shutdown_queues_a_flush_and_spawns_a_drain(home, tmp_path, how):
    paths = configure(home)
    _queue_relay_turn(paths)
    env = server_env(home, CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("Fact {first}")]))
    proc = _start(home, RELAY, env)
    try:
        init = _initialize(proc)
        assert init["serverInfo"]["name"] == "common-memory" and "tools" in init["capabilities"]
        tools = _request(proc, 2, "tools/list", {})
        assert {t["name"] for t in tools["tools"]} == {"memory_submit_user_turn", "memory_status"}
        assert rows(paths, "SELECT state FROM observations") == [("pending",)]
        if how == "eof":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = proc.stdout.read(), proc.stderr.read().decode()
    assert out == b"" and "Traceback" not in err
    if how == "sigterm":
        assert "SIGTERM" in err
    # The pending turn sat below every threshold; only the shutdown's flush and drain process it.
    wait_for(lambda: rows(paths, "SELECT state FROM observations") == [("processed",)])
    assert "Fact" in open(paths.document("profile")).read()


def test_read_profile_exits_on_eof_without_touching_the_store(home):
    paths = configure(home)
    proc = _start(home, ["--capability", "read", "--global"], server_env(home))
    try:
        _initialize(proc)
        listed = _request(proc, 2, "resources/list", {})
        assert [r["uri"] for r in listed["resources"]] == ["common-memory://memory/global"]
        called = _request(proc, 3, "tools/call", {"name": "memory_read", "arguments": {}})
        assert called["structuredContent"]["empty"] is True and called["isError"] is False
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read().decode()
    assert not os.path.exists(paths.db)
