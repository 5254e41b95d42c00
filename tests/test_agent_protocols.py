"""The network Memory Agent over both wire protocols, end to end through the Writer and the drain."""

from __future__ import annotations

import hashlib
import json

import pytest
from agent_support import KEY_NAME, TEST_KEY, configure_remote, job_row, make_agent, policy, read_doc, run_once
from conftest import hook_env, run_cm
from writer_support import admit

from cmrunner.agentrt.agent import NetworkAgent, system_prompt
from cmrunner.core import config as config_mod, envfile
from cmrunner.synthetic import fakemodel, fakepolicy
from cmrunner.writer_proc import drain, tools

APIS = ["responses", "chat_completions"]
TOOL_NAMES = ["inspect_ingest", "read_ingest", "inspect_memory", "processing_state", "record_working_notes",
              "submit_memory_decision"]


def _tool_names(body: dict) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in body["tools"]]


def _task(body: dict) -> dict:
    first = body["input"][0]["content"] if "input" in body else body["messages"][1]["content"]
    return json.loads(first)


@pytest.mark.parametrize("api", APIS)
def test_remember_commits_markdown_through_the_real_tools(home, tmp_path, api):
    text = "I am a marine biologist and I write all my analysis code in Julia."
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api)
        oid = admit(paths, text, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    assert outcome.state == "committed"
    assert read_doc(paths, "profile") == f"# Profile\n\n## User turn {oid}\n{text}\n"
    state, issue, diagnostic, retries, turns, calls, tokens_in, tokens_out = job_row(paths)
    assert (state, issue, diagnostic, retries) == ("done", None, None, 0)
    cues = [r["cue"] for r in log]
    assert cues == ["read_ingest", "submit_memory_decision"], "the first read returned everything the job holds"
    assert turns == len(log) and calls == len(log)  # one tool call per turn in this mode
    assert tokens_in > 0 and tokens_out > 0, "token usage is recorded per job"
    path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    assert {r["path"] for r in log} == {path}, "no runtime fallback between protocols"
    for request in log:
        body = request["body"]
        assert body["stream"] is True and body["model"] == "fake-model"
        assert _tool_names(body) == TOOL_NAMES
        assert request["auth_sha256"] == hashlib.sha256(f"Bearer {TEST_KEY}".encode()).hexdigest()
        assert "authorization" not in request["headers"]
    first = log[0]["body"]
    task = _task(first)
    assert task["version"] == "memory_task_v1" and "decision_schema" not in task
    assert text not in json.dumps(first, ensure_ascii=False), "the task holds handles, never source text"
    assert text in json.dumps(log[1]["body"], ensure_ascii=False), "the text arrives through read_ingest"


def test_responses_payload_options(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, maxOutputTokens=7, reasoningEffort="low")
        admit(paths, "I like short answers.", "e1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
        body = fm.model_requests()[0]["body"]
    assert body["store"] is False and body["max_output_tokens"] == 7 and body["reasoning"] == {"effort": "low"}
    assert body["instructions"] == system_prompt()
    assert all(t["type"] == "function" and t["strict"] is True for t in body["tools"])
    submit = body["tools"][-1]
    assert submit["parameters"]["properties"]["version"]["enum"] == ["memory_maintenance_v2"]


def test_responses_unlimited_output_omits_the_field(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, cfg = configure_remote(home, fm.base_url, maxOutputTokens=None)
        admit(paths, "what time is it?", "e1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "ignored"
        body = fm.model_requests()[0]["body"]
    assert "max_output_tokens" not in body and "reasoning" not in body


@pytest.mark.parametrize(("extra", "expected"), [
    ({"maxOutputTokens": 321, "thinking": {"type": "enabled"}}, {"max_tokens": 321, "thinking": {"type": "enabled"}}),
    ({"enableThinking": False}, {"enable_thinking": False}),
    ({}, {}),
])
def test_chat_payload_options(home, tmp_path, extra, expected):
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api="chat_completions", **extra)
        admit(paths, "hello", "e1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "ignored"
        body = fm.model_requests()[0]["body"]
    for key in ("max_tokens", "thinking", "enable_thinking", "reasoning_effort", "store", "max_output_tokens"):
        assert body.get(key) == expected.get(key)
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": system_prompt()}


@pytest.mark.parametrize("api", APIS)
def test_batched_calls_in_one_turn_run_in_order(home, tmp_path, api):
    with fakemodel.running(str(tmp_path / "fm"), policy(batch=True)) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api)
        first = admit(paths, "I live in Lisbon.", "e1")
        second = admit(paths, "I ride a bike to work. " * 700, "e2")  # three 8 KiB pages
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    assert outcome.state == "committed"
    doc = read_doc(paths, "profile")
    assert f"## User turn {first}\nI live in Lisbon.\n" in doc and f"## User turn {second}\n" in doc
    *_, turns, calls, _, _ = job_row(paths)
    assert turns == len(log) and calls > turns, "several calls per turn"
    assert len(log) <= 5


@pytest.mark.parametrize("api", APIS)
def test_second_job_replaces_its_own_section_and_reads_the_document(home, tmp_path, api):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api=api)
        admit(paths, "I prefer dark themes.", "e1", batch="b1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
        admit(paths, "I now prefer light themes.", "e2", batch="b2")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
        log = fm.model_requests()
    doc = read_doc(paths, "profile")
    assert "I prefer dark themes." in doc and "I now prefer light themes." in doc
    assert [r["cue"] for r in log] == ["read_ingest", "submit_memory_decision"] * 2
    view = fakepolicy.view(log[-1]["path"], log[-1]["body"])
    everything = view.results("read_ingest")[0][1]
    assert everything["complete"] is True
    profile = next(d for d in everything["memory"] if d["target"] == "profile")
    assert "I prefer dark themes." in profile["text"] and profile["next"] is None, \
        "the second job read the whole document before editing it"


def test_cm_flush_runs_the_network_agent_in_a_real_process(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, api="chat_completions")
        admit(paths, "My name is Ada and I build compilers.", "e1")
        proc = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home))
        assert len(fm.model_requests()) == 2, "the task, then the read that returned everything"
    assert proc.returncode == 0, proc.stderr.decode()
    assert "committed" in proc.stdout.decode()
    assert "My name is Ada and I build compilers." in read_doc(paths, "profile")


def test_agent_port_selection(home, tmp_path, monkeypatch):
    paths, cfg = configure_remote(home, "http://127.0.0.1:9/v1", key=None)
    monkeypatch.setenv(KEY_NAME, TEST_KEY)  # a shell variable of the same name is never used
    assert drain.agent_port(cfg) is None
    envfile.update(home, {KEY_NAME: TEST_KEY})
    cfg = config_mod.load(home)
    agent = drain.agent_port(cfg)
    assert isinstance(agent, NetworkAgent) and agent.max_turns == 64 and agent.deadline_ms == 60_000
    assert agent.client._client is None, "the network client is built at the first request, not before"
    data = cfg.data
    data["disclosure"]["enabled"] = False
    config_mod.save(home, data)
    assert drain.agent_port(config_mod.load(home)) is None, "disabled disclosure sends nothing"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"decisions": [[]]}))
    for name in ("COMMON_MEMORY_AGENT_SCRIPT", "CM_TEST_AGENT_SCRIPT"):
        monkeypatch.setenv(name, str(script))
    data["disclosure"]["enabled"] = True
    config_mod.save(home, data)
    assert isinstance(drain.agent_port(config_mod.load(home)), NetworkAgent), "no environment variable swaps the agent"


def test_limits_come_from_the_configuration(home):
    _, cfg = configure_remote(home, "http://127.0.0.1:9/v1", maxAgentTurns=3, deadlineMs=5000)
    agent = make_agent(cfg)
    assert (agent.max_turns, agent.deadline_ms) == (3, 5000)


def test_system_prompt_and_tool_definitions_pass_the_scanner():
    from cmrunner.secrets import safety
    from cmrunner.writer_proc import contract

    assert safety.scan_text(system_prompt()) == []
    for edit in (False, True):
        assert safety.scan_value(tools.definitions(contract.decision_json_schema(edit))) == []
    assert "submit_memory_decision" in system_prompt(), "the prompt ships inside the installed package"


def test_the_fixed_text_of_every_request_stays_small():
    """Instructions and tool schemas travel with every request (store: false allows no reuse), so they
    are the bulk of what a job sends; at most 5 KB for an ordinary job (issue 35: 8.7 KB before) keeps
    a 21-turn session under 2.5 KB per user turn (bench/agent_cost.py); an edit task's schema adds
    ``edit_result`` (its rule travels in the task) and stays within 5 KB too. Grow them only with a
    reason worth paying for on every request."""
    from cmrunner.agentrt import wire
    from cmrunner.writer_proc import contract

    for edit in (False, True):
        conv = wire.conversation({"model": "m"}, system_prompt(),
                                 tools.definitions(contract.decision_json_schema(edit)), "{}")
        body = conv.body()
        fixed = len(json.dumps({"instructions": body["instructions"], "tools": body["tools"]}, ensure_ascii=False,
                               separators=(",", ":")).encode())
        assert fixed <= 5_000, (edit, fixed)
