"""The bounds on provider data, unit by unit: bounded JSON, the SSE decoder, Retry-After, a turn's caps."""

from __future__ import annotations

import email.utils
import json

import pytest

from cmrunner.agentrt import boundedjson, errors_map, limits, sse, wire
from cmrunner.agentrt.interface import AgentError
from cmrunner.writer_proc import tools

DEEP = "[" * 100_000 + "]" * 100_000


# ------------------------------------------------------------------ bounded JSON


@pytest.mark.parametrize(("text", "reason"), [
    (DEEP, "too_deep"),
    ('{"a":' * 65 + "1" + "}" * 65, "too_deep"),
    ("[" * 100_000, "too_deep"),  # unclosed, and opened too deep: never handed to the scanner either
    ("[" + "[}," * 70 + "]", "invalid"),  # many brackets, shallow, mismatched
    ("[1, 2", "invalid"),
    ("{not json", "invalid"),
])
def test_bounded_json_refuses_deep_or_broken_text_with_a_reason(text, reason):
    with pytest.raises(boundedjson.JsonRejected) as caught:
        boundedjson.loads(text, 1 << 20)
    assert caught.value.reason == reason and isinstance(caught.value, ValueError)


def test_bounded_json_accepts_the_limit_and_brackets_inside_strings():
    at_limit = "[" * boundedjson.MAX_DEPTH + "]" * boundedjson.MAX_DEPTH
    assert boundedjson.loads(at_limit, 1 << 20) is not None
    quoted = {"text": "[" * 500 + '\\" {{{{' * 100, "list": [[1], [2], {"k": "]]]]"}]}
    assert boundedjson.loads(json.dumps(quoted), 1 << 20) == quoted
    wide = "[" + ",".join(["[[1]]"] * 10_000) + "]"
    assert len(boundedjson.loads(wide, 1 << 20)) == 10_000, "many shallow brackets are fine"


def test_bounded_json_size_and_encoding():
    with pytest.raises(boundedjson.JsonRejected) as caught:
        boundedjson.loads(b'"' + b"x" * 100 + b'"', 64)
    assert caught.value.reason == "too_large"
    with pytest.raises(boundedjson.JsonRejected) as caught:
        boundedjson.loads('"' + "é" * 40 + '"', 64)  # 40 characters, 82 UTF-8 bytes
    assert caught.value.reason == "too_large"
    with pytest.raises(boundedjson.JsonRejected) as caught:
        boundedjson.loads(b'"\xff"', 64)
    assert caught.value.reason == "invalid"
    assert boundedjson.loads(b'{"a": "\xc3\xa9"}', 64) == {"a": "é"}


# ------------------------------------------------------------------ SSE decoder


def _decode(chunks: list[bytes], limit: int = 1000) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in sse.decode(iter(chunks), limit)]


def test_sse_fields_line_endings_and_chunk_boundaries():
    chunks = [b"event: a\ndata: 1\n\nda", b"ta: 2\r", b"\n\r\n: comment\n", b"data: x\rdata: y\r\r",
              b"data: h\xc3", b"\xa9\n\n", b"data: never dispatched\n"]
    assert _decode(chunks) == [("a", "1"), ("message", "2"), ("message", "x\ny"), ("message", "hé")]


def test_sse_bounds_an_event_a_pending_line_and_comments():
    with pytest.raises(sse.EventTooLarge):
        _decode([b"data: " + b"x" * 600 + b"\n", b"data: " + b"x" * 600 + b"\n\n"])
    with pytest.raises(sse.EventTooLarge):
        _decode([b"data: " + b"x" * 700] * 2)  # no newline ever: refused before the line ends
    with pytest.raises(sse.EventTooLarge):
        _decode([b": " + b"x" * 2000])
    # Comments are dropped once their line ends, so a long run of them is fine.
    assert _decode([b": " + b"x" * 500 + b"\n"] * 50 + [b"data: ok\n\n"]) == [("message", "ok")]


# ------------------------------------------------------------------ Retry-After


NOW = 1_800_000_000.0


@pytest.mark.parametrize(("value", "expected"), [
    ("30", 30_000),
    (" 0 ", 0),
    ("86400", limits.RETRY_AFTER_CAP_MS),
    (email.utils.formatdate(NOW + 120, usegmt=True), 120_000),
    (email.utils.formatdate(NOW - 120, usegmt=True), 0),
    (email.utils.formatdate(NOW + 10 * 86400, usegmt=True), limits.RETRY_AFTER_CAP_MS),
    ("Sunday, 06-Nov-94 08:49:37 GMT", 0),  # RFC 850 form, long past
    ("-5", None),
    ("soon", None),
    ("1.5", None),
    (None, None),
])
def test_retry_after_values(value, expected):
    assert errors_map.retry_after_ms(value, NOW) == expected


@pytest.mark.parametrize(("status", "kept"), [(429, True), (503, True), (500, False), (401, False), (400, False)])
def test_retry_after_travels_only_on_429_and_503(status, kept):
    error = errors_map.from_http(status, b"", False, "30", now=NOW)
    assert error.retry_after_ms == (30_000 if kept else None)
    assert "30" not in error.message


def test_a_deep_error_body_is_no_hint_and_no_crash():
    assert errors_map.body_reason(DEEP.encode()[: limits.ERROR_BODY_LIMIT]) is None
    deep_code = b'{"error": {"code": "model_not_found", "x": ' + b"[" * 100 + b"]" * 100 + b"}}"
    assert errors_map.body_reason(deep_code) is None
    assert errors_map.from_http(400, deep_code, False).diagnostic["reason"] == "request_rejected"


# ------------------------------------------------------------------ a turn's caps


class Event:
    def __init__(self, data: object, event: str = "message") -> None:
        self.data = data if isinstance(data, str) else json.dumps(data)
        self.event = event


def _decode_turn(api: str, events: list[object]) -> wire.Turn:
    kind = wire.ResponsesConversation if api == "responses" else wire.ChatConversation
    return kind({"model": "m"}, "p", [], "t").decode(Event(e) for e in events)


def _failure(api: str, events: list[object]) -> dict:
    with pytest.raises(AgentError) as caught:
        _decode_turn(api, events)
    return {"code": caught.value.code, **caught.value.diagnostic}


def _text(api: str, piece: str) -> dict:
    if api == "responses":
        return {"type": "response.output_text.delta", "output_index": 0, "delta": piece}
    return {"choices": [{"index": 0, "delta": {"content": piece}}]}


def _call(api: str, n: int) -> dict:
    if api == "responses":
        return {"type": "response.output_item.added", "output_index": n,
                "item": {"type": "function_call", "call_id": f"c{n}", "name": "processing_state"}}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": f"c{n}",
                                                                "function": {"name": "processing_state"}}]}}]}


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_deep_json_in_an_event_is_a_stable_retryable_failure(api):
    assert _failure(api, [_text(api, "a"), '{"pad":' + DEEP + "}"]) == {
        "code": "INVALID_RESPONSE", "stage": "response_envelope", "reason": "json_too_deep", "retryable": True}


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_a_flood_of_text_deltas_stops_at_the_turn_cap(api):
    piece = "x" * 4096
    count = limits.TURN_KEPT_CHARS // len(piece) + 1
    assert _failure(api, [_text(api, piece)] * count) == {
        "code": "INVALID_RESPONSE", "stage": "response_body", "reason": "body_too_large", "retryable": True}


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_too_many_tool_calls_in_one_turn_fail(api):
    assert _failure(api, [_call(api, n) for n in range(limits.MAX_CALLS_PER_TURN + 1)])["reason"] == "body_too_large"


def test_responses_done_item_replaces_its_deltas_in_the_count():
    big = "y" * (limits.TURN_KEPT_CHARS // 2 + 10)
    args = json.dumps({"notes": big})
    events = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "function_call", "call_id": "c", "name": "record_working_notes"}},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": args},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "function_call", "call_id": "c", "name": "record_working_notes", "arguments": args}},
        {"type": "response.completed", "response": {}},
    ]
    turn = _decode_turn("responses", events)
    assert [c.arguments for c in turn.calls] == [args], "the same arguments are not counted twice"


@pytest.mark.parametrize(("api", "event"), [
    ("responses", {"type": "response.output_item.added", "output_index": [1],
                   "item": {"type": "function_call", "call_id": "c", "name": "n"}}),
    ("responses", {"type": "response.completed", "response": {"usage": {"input_tokens_details": "x"},
                                                              "incomplete_details": 5}}),
    ("responses", {"type": "response.output_item.done", "output_index": 0,
                   "item": {"type": "message", "content": 7}}),
    ("chat_completions", {"choices": 5}),
    ("chat_completions", {"choices": [{"delta": {"tool_calls": {"index": 0}}}]}),
])
def test_odd_shapes_are_envelope_failures_or_ignored_never_a_crash(api, event):
    tail = [{"type": "response.completed", "response": {}}] if api == "responses" else ["[DONE]"]
    try:
        _decode_turn(api, [event, *tail])
    except AgentError as exc:
        assert exc.code == "INVALID_RESPONSE" and exc.diagnostic["reason"] == "invalid_envelope"


def test_deep_tool_arguments_are_a_rejection_naming_the_rule():
    box = tools.Toolbox(None, {})  # type: ignore[arg-type] - arguments are checked before anything is read
    outcome = box.call("submit_memory_decision", DEEP)
    assert outcome.rejected and outcome.result["code"] == "TOOL_ARGUMENTS_INVALID"
    assert outcome.result["schema_errors"] == [{"path": "$", "rule": "maxDepth"}]
    assert "[" not in json.dumps(outcome.result["hint"]), "no argument text is echoed"
