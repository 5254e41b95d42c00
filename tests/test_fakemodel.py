"""The project's fake OpenAI-compatible server: both streaming protocols, the log, the script, errors, lifetime."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time

import pytest

from cmrunner.synthetic import fakemodel


def _post(model: fakemodel.FakeModel, path: str, body: dict, headers: dict[str, str] | None = None,
          ) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _get(model: fakemodel.FakeModel, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _sse(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) per SSE frame."""
    frames = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        frames.append((name, "\n".join(data)))
    return frames


def _responses(raw: bytes) -> list[dict]:
    events = []
    for name, data in _sse(raw):
        event = json.loads(data)
        assert event["type"] == name, "the SSE event name repeats the payload type"
        events.append(event)
    return events


def _chat(raw: bytes) -> list[dict]:
    frames = _sse(raw)
    assert frames[-1] == (None, "[DONE]")
    return [json.loads(data) for _, data in frames[:-1]]


def test_responses_stream_text_in_wire_order_with_usage(tmp_path):
    text = "Hello from a scripted reply that is long enough to need several deltas."
    with fakemodel.running(str(tmp_path), [{"text": text, "usage": {"input_tokens": 42, "output_tokens": 7}}]) as fm:
        status, headers, raw = _post(fm, "/v1/responses", {"model": "fake-model", "stream": True, "input": []})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = _responses(raw)
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["response.created", "response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == text
    done = events[-2]["item"]
    assert done["type"] == "message" and done["role"] == "assistant"
    assert done["content"] == [{"type": "output_text", "text": text, "annotations": []}]
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and completed["output"] == [done]
    assert completed["usage"]["input_tokens"] == 42 and completed["usage"]["output_tokens"] == 7
    assert completed["usage"]["total_tokens"] == 49
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_responses_stream_function_calls_with_namespace(tmp_path):
    calls = [{"name": "exec_command", "arguments": {"cmd": "echo hi"}, "call_id": "call_fixed"},
             {"name": "lookup", "namespace": "mcp__cm", "arguments": '{"query":"teal"}'}]
    with fakemodel.running(str(tmp_path), [{"tool_calls": calls}]) as fm:
        _, _, raw = _post(fm, "/v1/responses", {"stream": True, "input": []})
    events = _responses(raw)
    assert not any(e["type"].startswith("response.output_text") for e in events), "a pure tool reply has no text"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [d["type"] for d in done] == ["function_call", "function_call"]
    assert done[0]["call_id"] == "call_fixed" and done[0]["name"] == "exec_command" and "namespace" not in done[0]
    assert json.loads(done[0]["arguments"]) == {"cmd": "echo hi"}
    assert done[1]["namespace"] == "mcp__cm" and done[1]["arguments"] == '{"query":"teal"}'
    assert done[1]["call_id"] and done[1]["call_id"] != done[0]["call_id"]
    for item in done:
        deltas = [e["delta"] for e in events
                  if e["type"] == "response.function_call_arguments.delta" and e["item_id"] == item["id"]]
        assert "".join(deltas) == item["arguments"]
    assert events[-1]["response"]["output"] == done


def test_chat_completions_stream_text_then_tool_calls_and_usage(tmp_path):
    script = [{"text": "Plain answer."},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "echo tool-ran-ok"}, "call_id": "call_1"}]}]
    with fakemodel.running(str(tmp_path), script) as fm:
        body = {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True}, "messages": []}
        _, headers, first = _post(fm, "/v1/chat/completions", body)
        _, _, second = _post(fm, "/v1/chat/completions", {"model": "fake-model", "stream": True, "messages": []})
    assert headers["content-type"] == "text/event-stream"
    chunks = _chat(first)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Plain answer."
    finishing = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finishing == ["stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0

    chunks = _chat(second)
    assert "usage" not in chunks[-1], "usage is sent only when the request asked for it"
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["id"] == "call_1" and calls[0]["type"] == "function" and calls[0]["function"]["name"] == "bash"
    arguments = "".join(tc["function"].get("arguments", "") for tc in calls)
    assert json.loads(arguments) == {"command": "echo tool-ran-ok"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_streaming_requests_get_one_json_body(tmp_path):
    script = [{"text": "Chat body."}, {"text": "Responses body."}]
    with fakemodel.running(str(tmp_path), script) as fm:
        status, headers, chat = _post(fm, "/v1/chat/completions", {"messages": [], "stream": False})
        _, _, resp = _post(fm, "/v1/responses", {"input": []})
    assert status == 200 and headers["content-type"] == "application/json"
    chat_body = json.loads(chat)
    assert chat_body["object"] == "chat.completion"
    assert chat_body["choices"][0]["message"] == {"role": "assistant", "content": "Chat body."}
    resp_body = json.loads(resp)
    assert resp_body["status"] == "completed"
    assert resp_body["output"][0]["content"][0]["text"] == "Responses body."


def test_script_order_default_models_and_request_log(tmp_path):
    script = {"replies": [{"text": "one"}, {"text": "two"}], "default": {"text": "fallback"}}
    with fakemodel.running(str(tmp_path), script) as fm:
        status, models = _get(fm, "/v1/models")
        texts = []
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/chat/completions", "/v1/responses"):
            _, _, raw = _post(fm, path, {"model": "m", "stream": False, "marker": path},
                              {"Authorization": "Bearer sk-not-logged", "X-Codex-Window-Id": "w1"})
            body = json.loads(raw)
            texts.append(body["choices"][0]["message"]["content"] if "choices" in body
                         else body["output"][0]["content"][0]["text"])
        missing, _ = _get(fm, "/v1/nothing")
        log = fm.requests()
    assert status == 200 and json.loads(models)["data"][0]["id"] == "fake-model"
    assert missing == 404
    assert texts == ["one", "two", "fallback", "fallback"], "replies are consumed in order across both endpoints"
    assert [(r["method"], r["path"], r["reply"]) for r in log] == [
        ("GET", "/v1/models", None), ("POST", "/v1/chat/completions", 0), ("POST", "/v1/responses", 1),
        ("POST", "/v1/chat/completions", "default"), ("POST", "/v1/responses", "default"),
        ("GET", "/v1/nothing", None)]
    assert [r["seq"] for r in log] == [1, 2, 3, 4, 5, 6]
    posted = log[1]
    assert posted["body"] == {"model": "m", "stream": False, "marker": "/v1/chat/completions"}
    assert posted["authorized"] is True and "authorization" not in posted["headers"]
    assert posted["headers"]["x-codex-window-id"] == "w1"
    assert "sk-not-logged" not in open(fm.log_path).read()
    assert log[0]["authorized"] is False


def test_scripted_errors_carry_status_body_and_headers(tmp_path):
    script = [{"error": {"status": 429, "headers": {"Retry-After": "2"}}},
              {"error": {"status": 400, "body": {"error": {"message": "bad thing", "type": "invalid_request_error"}}}},
              {"error": {"status": 503}}, {"text": "recovered"}]
    with fakemodel.running(str(tmp_path), script) as fm:
        results = [_post(fm, "/v1/responses", {"stream": True}) for _ in range(4)]
    (s1, h1, b1), (s2, _, b2), (s3, _, b3), (s4, _, b4) = results
    assert s1 == 429 and h1["retry-after"] == "2" and json.loads(b1)["error"]["type"] == "rate_limit_error"
    assert s2 == 400 and json.loads(b2) == {"error": {"message": "bad thing", "type": "invalid_request_error"}}
    assert s3 == 503 and json.loads(b3)["error"]["type"] == "server_error"
    assert s4 == 200 and _responses(b4)[-1]["type"] == "response.completed"


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions"])
def test_truncated_stream_ends_without_completion(tmp_path, path):
    with fakemodel.running(str(tmp_path), [{"text": "x" * 200, "truncate": True}]) as fm:
        conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=10)
        conn.request("POST", path, json.dumps({"stream": True}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        with pytest.raises(http.client.IncompleteRead) as cut:
            resp.read()
        conn.close()
    partial = cut.value.partial.decode()
    assert partial.count("data: ") >= 1
    assert "response.completed" not in partial and "[DONE]" not in partial and '"finish_reason": "stop"' not in partial


def test_delay_pauses_after_the_first_event(tmp_path):
    with fakemodel.running(str(tmp_path), [{"text": "slow", "delay_seconds": 0.6}]) as fm:
        conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=10)
        conn.request("POST", "/v1/responses", json.dumps({"stream": True}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = resp.readline()
        started = time.monotonic()
        rest = resp.read()
        conn.close()
    assert first.startswith(b"event: response.created")
    assert time.monotonic() - started >= 0.5  # a lower bound: load can only lengthen the pause
    assert b"response.completed" in rest


def test_gate_file_holds_the_answer_until_the_file_exists(tmp_path):
    import threading

    gate = str(tmp_path / "gate")
    with fakemodel.running(str(tmp_path / "fm"), [{"text": "held", "gate_file": gate}]) as fm:
        conn = http.client.HTTPConnection("127.0.0.1", fm.port, timeout=30)
        conn.request("POST", "/v1/responses", json.dumps({"stream": True}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = resp.readline()
        rest: list[bytes] = []
        reader = threading.Thread(target=lambda: rest.append(resp.read()))
        reader.start()
        reader.join(1.0)
        assert reader.is_alive(), "the answer went on without its gate"
        open(gate, "w").close()
        reader.join(20)
        conn.close()
    assert first.startswith(b"event: response.created") and b"response.completed" in rest[0]


def test_lifetime_bound_stops_the_server_by_itself(tmp_path):
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, fakemodel.__file__, "--port-file", str(port_file), "--log", str(log),
                             "--lifetime-seconds", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.wait(10) == 0
    finally:
        fakemodel.stop_process(proc)
    assert int(port_file.read_text()) > 0


def test_context_manager_stops_the_process_by_pid(tmp_path):
    with fakemodel.running(str(tmp_path), []) as fm:
        pid, process = fm.pid, fm.process
        assert process.poll() is None
        assert _get(fm, "/v1/models")[0] == 200
    assert process.returncode is not None, "the child is reaped when the block ends"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_context_manager_stops_the_server_when_the_test_fails(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with fakemodel.running(str(tmp_path), []) as fm:
            process = fm.process
            raise RuntimeError("boom")
    assert process.returncode is not None


@pytest.mark.parametrize("script", [
    [{"txt": "typo"}],
    [{"tool_calls": [{"arguments": {}}]}],
    [{"error": {"status": 200}}],
    [{"usage": {"input_tokens": -1}}],
    [{"text": "x", "gate_file": 3}],
    {"replies": [], "extra": 1},
    "not a script",
])
def test_bad_scripts_are_refused_before_start(tmp_path, script):
    with pytest.raises(fakemodel.ScriptError):
        with fakemodel.running(str(tmp_path), script):
            pass
    assert not (tmp_path / "fakemodel.port").exists()


def test_server_refuses_a_bad_script_file(tmp_path):
    bad = tmp_path / "script.json"
    bad.write_text(json.dumps([{"text": 3}]))
    proc = subprocess.run([sys.executable, fakemodel.__file__, "--port-file", str(tmp_path / "port"),
                           "--log", str(tmp_path / "log"), "--script", str(bad)], capture_output=True, timeout=20)
    assert proc.returncode == 2 and b"replies[0].text" in proc.stderr
    assert not (tmp_path / "port").exists()
