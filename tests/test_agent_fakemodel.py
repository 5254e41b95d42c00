"""The fake model's diligent-model mode: conversation reading, pluggable policies, injected cues."""

from __future__ import annotations

import http.client
import json

import pytest
from agent_support import configure_remote, make_agent, policy, read_doc, run_once
from writer_support import admit

from cmrunner.synthetic import fakemodel, fakepolicy

TASK = {"version": "memory_task_v1", "request_id": "job-1",
        "bundles": [{"ingest_id": "ingest_1"}, {"ingest_id": "ingest_2"}], "snapshot": {"handle": "snap"}}


def _chat_body(calls: list[tuple[str, dict, dict]]) -> dict:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": json.dumps(TASK)}]
    for n, (name, args, result) in enumerate(calls):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(result)})
    return {"messages": messages}


def _manifest(handle: str) -> dict:
    return {"handle": handle, "offset": 0, "next": None, "blocks": [{"block_id": "b1", "evidence_ref": "ev_" + handle[-1],
                                                                      "context_only": False, "metadata": {"role": "user"}}]}


def _block(n: int, text: str, offset: int | None = None, next_: int | None = None) -> dict:
    block = {"handle": f"ingest_{n}", "block_id": "b1", "evidence_ref": f"ev_{n}", "role": "user"}
    if offset is not None:
        block.update({"offset": offset, "next": next_})
    return {**block, "text": text}


BULK = {"handle": None, "block": None}


def test_next_calls_follow_pages_and_the_manifest():
    seen = fakepolicy.view("/v1/chat/completions", _chat_body([]))
    assert fakepolicy.next_calls(seen) == [("read_ingest", {**BULK, "offset": 0})]
    assert [c[0] for c in fakepolicy.next_calls(seen, batch=True)] == ["read_ingest", "inspect_memory"]
    calls = [("read_ingest", {**BULK, "offset": 0}, {"offset": 0, "next": 8192, "blocks": [_block(1, "A" * 8192, 0, 8192)]}),
             ("read_ingest", {**BULK, "offset": 8192}, {"error": "MEMORY_TOOL_REJECTED"})]
    seen = fakepolicy.view("/v1/chat/completions", _chat_body(calls))
    assert fakepolicy.next_calls(seen, batch=True)[:1] == [("read_ingest", {**BULK, "offset": 8192})], \
        "a rejected read is read again"
    calls += [("read_ingest", {**BULK, "offset": 8192},
               {"offset": 8192, "next": None, "blocks": [_block(1, "B", 8192, None), _block(2, "C")]}),
              ("inspect_memory", {"handle": "snap", "target": None, "offset": 0},
               {"handle": "snap", "documents": [
                   {"target": "profile", "bytes": 16, "sections": [], "text": "# Profile\n", "next": 10},
                   {"target": "preferences", "bytes": 0, "sections": [], "text": "", "next": None}]})]
    seen = fakepolicy.view("/v1/chat/completions", _chat_body(calls))
    assert fakepolicy.next_calls(seen, batch=True) == [("inspect_memory", {"handle": "snap", "target": "profile", "offset": 10})]
    calls.append(("inspect_memory", {"handle": "snap", "target": "profile", "offset": 10},
                  {"target": "profile", "offset": 10, "next": None, "text": "## A\nb\n"}))
    seen = fakepolicy.view("/v1/chat/completions", _chat_body(calls))
    assert fakepolicy.next_calls(seen, batch=True) == []
    state = fakepolicy.policy_state(seen)
    assert [s["text"] for s in state["sources"]] == ["A" * 8192 + "B", "C"]
    assert state["documents"]["profile"]["text"] == "# Profile\n## A\nb\n"
    decision = fakepolicy.decide(seen, fakepolicy.load_policy("remember_user_turns"))
    assert decision["request_id"] == "job-1"
    assert [op["title"] for op in decision["decisions"][0]["operations"]] == ["User turn 1", "User turn 2"]


def test_blocks_listed_one_by_one_are_read_to_their_end_too():
    calls = [("inspect_ingest", {"handle": "ingest_1", "offset": 0}, _manifest("ingest_1")),
             ("read_ingest", {"handle": "ingest_1", "block": "b1", "offset": 0},
              {"offset": 0, "next": 8192, "text": "A" * 8192})]
    seen = fakepolicy.view("/v1/chat/completions", _chat_body(calls))
    assert ("read_ingest", {"handle": "ingest_1", "block": "b1", "offset": 8192}) in fakepolicy.next_calls(seen, batch=True)
    calls.append(("read_ingest", {"handle": "ingest_1", "block": "b1", "offset": 8192},
                  {"offset": 8192, "next": None, "text": "B"}))
    seen = fakepolicy.view("/v1/chat/completions", _chat_body(calls))
    assert [c for c in fakepolicy.next_calls(seen, batch=True) if c[1].get("handle") == "ingest_1"] == []
    assert fakepolicy.policy_state(seen)["sources"][0]["text"] == "A" * 8192 + "B"


def test_a_policy_from_a_file_decides(home, tmp_path):
    module = tmp_path / "my_policy.py"
    module.write_text(
        "def decide(state):\n"
        "    ev = [s['evidence_ref'] for s in state['sources']]\n"
        "    words = sum(len(s['text'].split()) for s in state['sources'])\n"
        "    return [{'kind': 'retain', 'applicability': 'global', 'confidence': 1, 'evidence': ev, 'reason': 'r',\n"
        "             'admission': 'remember', 'lifetime': 'stable', 'operations': [{'op': 'put_section',\n"
        "             'target': 'preferences', 'section': None, 'title': 'Counted', 'body': f'{words} words\\n'}]}]\n")
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{module}:decide")) as fm:
        paths, cfg = configure_remote(home, fm.base_url)
        admit(paths, "one two three four", "e1")
        assert run_once(paths, cfg, make_agent(cfg)).state == "committed"
    assert read_doc(paths, "preferences") == "# Preferences\n\n## Counted\n4 words\n"


@pytest.mark.parametrize("script", [
    {"policy": "no_such_policy"},
    {"policy": "/nonexistent/file.py:decide"},
    {"policy": "json:not_a_function_name_here"},
    {"policy": "ignore", "inject": {"sometime": {"text": "x"}}},
    {"inject": {"first": {"text": "x"}}},
    {"policy": "ignore", "inject": {"first": {"finish": "stop"}}},
])
def test_bad_policy_scripts_are_refused_before_start(tmp_path, script):
    with pytest.raises(fakemodel.ScriptError):
        with fakemodel.running(str(tmp_path), script):
            pass


def test_injected_lists_are_consumed_per_cue_and_done_answers_with_text(tmp_path):
    script = policy("ignore", inject={"read_ingest": [{"text": "one"}, {"text": "two"}]})
    with fakemodel.running(str(tmp_path), script) as fm:
        conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=10)
        texts = []
        for _ in range(3):
            conn.request("POST", "/v1/chat/completions", json.dumps({"stream": False, **_chat_body([])}))
            body = json.loads(conn.getresponse().read())
            conn.close()
            message = body["choices"][0]["message"]
            texts.append(message.get("content") or message["tool_calls"][0]["function"]["name"])
        submitted = _chat_body([("submit_memory_decision", {}, {"submitted": True, "committed": False})])
        conn.request("POST", "/v1/chat/completions", json.dumps({"stream": False, **submitted}))
        done = json.loads(conn.getresponse().read())["choices"][0]["message"]["content"]
        conn.close()
        cues = [r["cue"] for r in fm.requests()]
    assert texts == ["one", "two", "read_ingest"]
    assert done == "The decision was submitted." and cues == ["read_ingest"] * 3 + ["done"]


def test_a_broken_policy_answers_500_and_says_so(tmp_path):
    module = tmp_path / "broken.py"
    module.write_text("def decide(state):\n    raise RuntimeError('policy bug')\n")
    script = policy(f"{module}:decide")
    with fakemodel.running(str(tmp_path / "fm"), script) as fm:
        body = _chat_body([("inspect_memory", {"handle": "snap", "target": None, "offset": 0},
                            {"handle": "snap", "documents": []})])
        body["messages"][1]["content"] = json.dumps({**TASK, "bundles": []})
        conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps({"stream": False, **body}))
        status = conn.getresponse().status
        conn.close()
        log = fm.requests()
    assert status == 500 and log[-1]["cue"] == "policy_failed"
    assert "policy bug" in open(tmp_path / "fm" / "fakemodel.stderr").read()
