"""A local model server that is down after its model was saved: the drain's job, `cm status` and
`cm network-test` all say `MODEL_UNREACHABLE` and name the configured URL (issue 33, "Bad input"),
the same code the endpoint check gives before saving; a route through a proxy keeps `UNAVAILABLE`
(the proxy, not the model's server, refused)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from conftest import REAL_CM, hook_env, run_cm

from cmrunner.agentrt import errors_map


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound and never listening, held for the test so no
    other process can take it meanwhile."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_a_saved_local_server_that_is_down_is_model_unreachable_with_its_url(home, tmp_path, closed_port):
    url = f"http://127.0.0.1:{closed_port}/v1"
    env = hook_env(COMMON_MEMORY_HOME=home)
    saved = run_cm(["config", "init", "--preset", "ollama", "--base-url", url, "--model", "qwen3:8b",
                    "--skip-check", "--api-key-stdin"], stdin=b"no-key-needed\n", env=env, cm=REAL_CM)
    assert saved.returncode == 0, saved.stderr
    allowed = run_cm(["config", "set", "disclosure.allowedProvenance", "+document_import"], env=env, cm=REAL_CM)
    assert allowed.returncode == 0, allowed.stderr
    note = tmp_path / "note.md"
    note.write_text("# Editor\n\nI prefer tabs over spaces.\n", encoding="utf-8")
    queued = run_cm(["import", str(note), "--yes", "--no-wait"], env=env, cm=REAL_CM)
    assert queued.returncode == 0, queued.stderr

    run_cm(["flush"], env=env, timeout=120, cm=REAL_CM)  # a real drain tries the model and fails

    report = json.loads(run_cm(["status", "--json"], env=env, cm=REAL_CM).stdout)
    [job] = report["jobList"]["jobs"]
    assert job["issue"] == "MODEL_UNREACHABLE", job
    text = run_cm(["status"], env=env, cm=REAL_CM).stdout.decode()
    assert f"nothing answered at {url}" in text and "UNAVAILABLE" not in text.replace("MODEL_UNREACHABLE", "")

    probe = run_cm(["network-test", "--json"], env=env, cm=REAL_CM)
    outcome = json.loads(probe.stdout)["outcome"]
    assert probe.returncode == 1
    assert (outcome["code"], outcome["reason"]) == ("MODEL_UNREACHABLE", "connection_refused")
    assert f"nothing answered at {url}" in outcome["remedy"]


def test_a_local_preset_saved_without_its_check_needs_no_key(home, closed_port):
    """`--skip-check` saves a local preset without a key: cm stores the one such a server ignores, so
    the saved model is tried (and found down) instead of lacking a key."""
    url = f"http://127.0.0.1:{closed_port}/v1"
    env = hook_env(COMMON_MEMORY_HOME=home)
    saved = run_cm(["config", "init", "--preset", "lmstudio", "--base-url", url, "--model", "qwen3-8b",
                    "--skip-check"], env=env, cm=REAL_CM)
    assert saved.returncode == 0, saved.stderr
    probe = run_cm(["network-test", "--json"], env=env, cm=REAL_CM)
    assert probe.returncode == 1 and b"API_KEY_MISSING" not in probe.stdout + probe.stderr, probe.stderr
    assert json.loads(probe.stdout)["outcome"]["code"] == "MODEL_UNREACHABLE"
    status = json.loads(run_cm(["status", "--json"], env=env, cm=REAL_CM).stdout)
    assert status["model"]["apiKeyConfigured"] is True


def test_a_refused_connection_is_the_models_only_without_a_proxy():
    refused = ConnectionRefusedError(111, "Connection refused")
    direct = errors_map.from_transport(refused, via_proxy=False)
    assert (direct.code, direct.diagnostic["reason"], direct.retryable) == ("MODEL_UNREACHABLE", "connection_refused",
                                                                            True)
    proxied = errors_map.from_transport(refused, via_proxy=True)
    assert (proxied.code, proxied.diagnostic["reason"]) == ("UNAVAILABLE", "proxy_unavailable")
