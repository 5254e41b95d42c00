"""`cm network-test` and `cm status` give the remedy that matches how the provider failed: a 404 names
the base URL's API path, a refused key the key, an unknown model the model list, a dead server the
server — never the generic "check remote.model"."""

from __future__ import annotations

import json
import socket

import pytest
from agent_support import configure_remote, make_agent, run_once
from conftest import hook_env, run_cm
from writer_support import admit

from cmrunner.synthetic import fakemodel

UNKNOWN_MODEL = {"error": {"status": 404, "body": {"error": {"code": "model_not_found", "message": "no such model",
                                                             "type": "invalid_request_error"}}}}
WRONG_KEY = {"error": {"status": 401, "body": {"error": {"message": "bad key", "type": "invalid_request_error"}}}}


def _closed_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(("script", "at_root", "code", "fix"), [
    ([], True, "INVALID_RESPONSE", "remote.baseUrl is probably missing its API path (for example /v1"),
    ([WRONG_KEY], False, "AUTHENTICATION", "the provider refused the API key (HTTP 401): put the right key"),
    ([UNKNOWN_MODEL], False, "INVALID_RESPONSE", "the provider does not know remote.model: pick a model from its "
                                                  "model list"),
])
def test_network_test_names_the_fix_for_the_failure(home, tmp_path, script, at_root, code, fix):
    with fakemodel.running(str(tmp_path / "fm"), script * 2) as fm:  # one reply for each run
        configure_remote(home, fm.root_url if at_root else fm.base_url, api="chat_completions")
        proc = run_cm(["network-test"], env=hook_env(COMMON_MEMORY_HOME=home))
        as_json = run_cm(["network-test", "--json"], env=hook_env(COMMON_MEMORY_HOME=home))
    out = proc.stdout.decode()
    assert proc.returncode == 1 and f"outcome: {code} at http" in out
    fix_line = next(line for line in out.splitlines() if line.startswith("fix:     "))
    assert fix in fix_line and "check remote.model" not in out
    assert "bad key" not in out and "no such model" not in out  # the provider's words stay out
    assert fix in json.loads(as_json.stdout)["outcome"]["remedy"]


def test_network_test_names_the_server_when_nothing_answers(home):
    url = _closed_url()
    configure_remote(home, url)
    proc = run_cm(["network-test"], env=hook_env(COMMON_MEMORY_HOME=home))
    assert proc.returncode == 1
    assert f"\nfix:     nothing answered at {url}: start the model server or fix the base URL" in \
        proc.stdout.decode()


@pytest.mark.parametrize(("inject", "at_root", "fix"), [
    (None, True, "remote.baseUrl is probably missing its API path"),
    (UNKNOWN_MODEL, False, "the provider does not know remote.model: pick a model from its model list"),
])
def test_status_gives_a_dead_jobs_remedy_from_the_providers_answer(home, tmp_path, inject, at_root, fix):
    script = [inject] if inject else []
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        paths, cfg = configure_remote(home, fm.root_url if at_root else fm.base_url)
        admit(paths, "Remember that I prefer tabs.", "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
    assert (outcome.state, outcome.code) == ("dead", "INVALID_RESPONSE")
    report = json.loads(run_cm(["status", "--json"], env=hook_env(COMMON_MEMORY_HOME=home)).stdout)
    dead = report["problems"]["dead"]
    assert len(dead) == 1 and fix in dead[0]["remedy"] and "check remote.model" not in dead[0]["remedy"]
    assert dead[0]["remedy"].endswith(f"then `cm retry {dead[0]['jobIds'][0]}`")
    text = run_cm(["status"], env=hook_env(COMMON_MEMORY_HOME=home)).stdout.decode()
    assert fix in " ".join(text.split())
