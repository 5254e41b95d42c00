"""Stream decoding of both protocols from raw SSE events, including shapes other providers send."""

from __future__ import annotations

import json

import pytest

from cmrunner.agentrt import wire
from cmrunner.agentrt.interface import AgentError

REMOTE = {"model": "m"}


class Event:
    def __init__(self, data: object, event: str = "message") -> None:
        self.data = data if isinstance(data, str) else json.dumps(data)
        self.event = event


def _responses(*events: object) -> wire.Turn:
    return wire.ResponsesConversation(REMOTE, "p", [], "t").decode([Event(e) for e in events])


def _chat(*events: object) -> wire.Turn:
    return wire.ChatConversation(REMOTE, "p", [], "t").decode([Event(e) for e in events])


COMPLETED = {"type": "response.completed", "response": {"usage": {
    "input_tokens": 10, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 4},
    "output_tokens_details": {"reasoning_tokens": 2}}}}


def test_responses_calls_from_deltas_when_done_items_are_missing():
    turn = _responses(
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "function_call", "call_id": "c1", "name": "read_ingest"}},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"handle":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '"ingest_1"}'},
        COMPLETED)
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [("c1", "read_ingest", '{"handle":"ingest_1"}')]
    assert turn.usage == {"input_tokens": 10, "output_tokens": 3, "cached_input_tokens": 4, "reasoning_tokens": 2}


def test_responses_done_item_wins_and_order_is_kept():
    turn = _responses(
        {"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "b", "name": "y"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "a", "name": "x"}},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "function_call", "call_id": "a", "name": "x", "arguments": "{}"}},
        {"type": "response.output_item.done", "output_index": 1,
         "item": {"type": "function_call", "call_id": "b", "name": "y", "arguments": '{"k":1}'}},
        COMPLETED)
    assert [(c.call_id, c.arguments) for c in turn.calls] == [("b", '{"k":1}'), ("a", "{}")]


@pytest.mark.parametrize(("events", "flag"), [
    ([{"type": "response.refusal.delta", "delta": "no"}, COMPLETED], "refused"),
    ([{"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}], "truncated"),
    ([{"type": "response.incomplete", "response": {"incomplete_details": {"reason": "content_filter"}}}], "refused"),
])
def test_responses_refusal_and_truncation_flags(events, flag):
    assert getattr(_responses(*events), flag) is True


@pytest.mark.parametrize(("events", "code", "reason"), [
    ([{"type": "response.created"}], "INVALID_RESPONSE", "stream_interrupted"),
    (["{not json"], "INVALID_RESPONSE", "invalid_envelope"),
    (["[1, 2]"], "INVALID_RESPONSE", "invalid_envelope"),
    ([{"type": "error", "error": {"code": "rate_limit_exceeded"}}], "RATE_LIMITED", "rate_limited"),
    ([{"type": "response.failed", "response": {"error": {"code": "server_error"}}}], "UNAVAILABLE", "provider_unavailable"),
    ([{"type": "response.failed", "response": {"error": {"code": "context_length_exceeded"}}}], "INVALID_RESPONSE",
     "context_length_exceeded"),
])
def test_responses_stream_failures(events, code, reason):
    with pytest.raises(AgentError) as caught:
        _responses(*events)
    assert (caught.value.code, caught.value.diagnostic["reason"]) == (code, reason)


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_chat_interleaved_tool_calls_by_index():
    turn = _chat(
        _chunk({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "a", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "b", "arguments": '{"x"'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": ":1}"}}]}),
        _chunk({"reasoning_content": "thinking…"}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5,
                                  "prompt_tokens_details": {"cached_tokens": 8}}},
        "[DONE]")
    assert [(c.call_id, c.name, c.arguments) for c in turn.calls] == [("c0", "a", "{}"), ("c1", "b", '{"x":1}')]
    assert turn.usage["input_tokens"] == 9 and turn.usage["cached_input_tokens"] == 8


def test_chat_accepts_a_finish_without_done_and_fills_missing_ids():
    turn = _chat(_chunk({"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "{}"}}]}, "stop"))
    assert [(c.call_id, c.name) for c in turn.calls] == [("call_0", "a")]


@pytest.mark.parametrize(("events", "flag"), [
    ([_chunk({"refusal": "no"}, "stop"), "[DONE]"], "refused"),
    ([_chunk({"content": "cut"}, "content_filter"), "[DONE]"], "refused"),
    ([_chunk({"content": "cut"}, "length"), "[DONE]"], "truncated"),
])
def test_chat_refusal_and_truncation_flags(events, flag):
    assert getattr(_chat(*events), flag) is True


@pytest.mark.parametrize(("events", "code", "reason"), [
    ([_chunk({"content": "half"})], "INVALID_RESPONSE", "stream_interrupted"),
    ([{"choices": ["nope"]}], "INVALID_RESPONSE", "invalid_envelope"),
    ([_chunk({"tool_calls": ["nope"]})], "INVALID_RESPONSE", "invalid_envelope"),
    ([{"error": {"type": "server_error", "message": "x"}}], "UNAVAILABLE", "provider_unavailable"),
    (["data that is not json"], "INVALID_RESPONSE", "invalid_envelope"),
])
def test_chat_stream_failures(events, code, reason):
    with pytest.raises(AgentError) as caught:
        _chat(*events)
    assert (caught.value.code, caught.value.diagnostic["reason"]) == (code, reason)


def test_history_replays_calls_with_rejected_arguments_blanked():
    for kind in (wire.ResponsesConversation, wire.ChatConversation):
        conv = kind(REMOTE, "p", [{"name": "t", "description": "d", "parameters": {}}], "task")
        ok, bad = wire.ToolCall("c1", "read_ingest", '{"handle":"h"}'), wire.ToolCall("c2", "x", '{"secret":"v"}')
        conv.record([(ok, {"text": "page"}, False), (bad, {"error": "MEMORY_TOOL_REJECTED"}, True)])
        dumped = json.dumps(conv.body())
        assert '{\\"handle\\":\\"h\\"}' in dumped and "secret" not in dumped
        assert json.dumps({"text": "page"}, separators=(",", ":")).replace('"', '\\"') in dumped
