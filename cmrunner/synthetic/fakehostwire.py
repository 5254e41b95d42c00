"""The fake model's wire encoders for the hosts' own providers: Anthropic Messages and Gemini.

Contract: enough of each API for Claude Code and Gemini CLI to run a session against the fake
model as their provider (hosts-more.md §2.3, §3), from the same scripted replies as the OpenAI
encoders (``fakewire``): ``text``, ``tool_calls`` (``{name, arguments, call_id?}``) and ``usage``.
- Anthropic Messages: ``anthropic_events`` are the SSE events of one reply in wire order
  (``message_start`` … ``message_stop``; each is sent with both its ``event:`` and ``data:``
  lines, which Claude Code requires); ``anthropic_message`` is the non-streaming body.
- Gemini: ``gemini_response`` is one ``GenerateContentResponse``; ``gemini_chunks`` the pieces of a
  ``streamGenerateContent?alt=sse`` stream (``data:`` lines only), the last one with the finish
  reason and usage.
- ``route`` names the API a request path belongs to (``None`` for a path these encoders do not serve).
Stdlib only.
"""

from __future__ import annotations

import json

from cmrunner.synthetic.fakewire import _chunks, _usage

ANTHROPIC_MESSAGES = "/v1/messages"
ANTHROPIC_COUNT = "/v1/messages/count_tokens"
GEMINI_PREFIX = "/v1beta/models/"


def route(path: str) -> str | None:
    """``anthropic``, ``anthropic-count``, ``gemini``, ``gemini-stream``, ``gemini-count`` or ``None``."""
    if path == ANTHROPIC_MESSAGES:
        return "anthropic"
    if path == ANTHROPIC_COUNT:
        return "anthropic-count"
    if path.startswith(GEMINI_PREFIX) and ":" in path:
        method = path.rsplit(":", 1)[1]
        return {"generateContent": "gemini", "streamGenerateContent": "gemini-stream",
                "countTokens": "gemini-count"}.get(method)
    return None


def _tool_input(call: dict) -> dict:
    args = call.get("arguments", {})
    return json.loads(args) if isinstance(args, str) else args


def anthropic_message(reply: dict, seq: int, model: str, body: object) -> dict:
    """A non-streaming Messages API body for one reply."""
    content: list[dict] = []
    if reply.get("text") or not reply.get("tool_calls"):
        content.append({"type": "text", "text": reply.get("text", "")})
    for n, call in enumerate(reply.get("tool_calls", [])):
        content.append({"type": "tool_use", "id": call.get("call_id", f"toolu_{seq:06d}_{n}"), "name": call["name"],
                        "input": _tool_input(call)})
    tokens_in, tokens_out = _usage(reply, body)
    stop = "tool_use" if reply.get("tool_calls") else "max_tokens" if reply.get("finish") == "length" else "end_turn"
    return {"id": f"msg_{seq:06d}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}


def anthropic_events(reply: dict, seq: int, model: str, body: object) -> list[tuple[str, dict]]:
    """The Messages API SSE events for one reply, as ``(event name, data)`` in wire order."""
    whole = anthropic_message(reply, seq, model, body)
    start = {**whole, "content": [], "stop_reason": None,
             "usage": {"input_tokens": whole["usage"]["input_tokens"], "output_tokens": 1}}
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            for piece in _chunks(block["text"]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            for piece in _chunks(json.dumps(block["input"], separators=(",", ":"))):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": whole["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _gemini_usage(reply: dict, body: object) -> dict:
    tokens_in, tokens_out = _usage(reply, body)
    return {"promptTokenCount": tokens_in, "candidatesTokenCount": tokens_out, "totalTokenCount": tokens_in + tokens_out}


def _gemini_parts(reply: dict) -> list[dict]:
    parts: list[dict] = []
    if reply.get("text") or not reply.get("tool_calls"):
        parts.append({"text": reply.get("text", "")})
    for call in reply.get("tool_calls", []):
        parts.append({"functionCall": {"name": call["name"], "args": _tool_input(call)}})
    return parts


def gemini_response(reply: dict, seq: int, model: str, body: object) -> dict:
    """One ``GenerateContentResponse`` holding the whole reply."""
    finish = "MAX_TOKENS" if reply.get("finish") == "length" else "STOP"
    return {"candidates": [{"content": {"role": "model", "parts": _gemini_parts(reply)}, "finishReason": finish,
                            "index": 0}],
            "usageMetadata": _gemini_usage(reply, body), "modelVersion": model, "responseId": f"resp_{seq:06d}"}


def gemini_chunks(reply: dict, seq: int, model: str, body: object) -> list[dict]:
    """The ``streamGenerateContent`` pieces: text in small parts, then calls, finish and usage last."""
    chunks: list[dict] = []
    base = {"modelVersion": model, "responseId": f"resp_{seq:06d}"}
    for piece in _chunks(reply.get("text", "")):
        chunks.append({**base, "candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}]})
    last = gemini_response(reply, seq, model, body)
    last["candidates"][0]["content"]["parts"] = [p for p in last["candidates"][0]["content"]["parts"] if "text" not in p]
    if not last["candidates"][0]["content"]["parts"]:
        last["candidates"][0]["content"]["parts"] = [{"text": ""}]
    chunks.append(last)
    return chunks


def answer(api: str, reply: dict, seq: int, path: str, body: object) -> tuple[dict | None, list[bytes]]:
    """What to send for a model call on ``api``: a JSON body (non-streaming) or the SSE frames."""
    request = body if isinstance(body, dict) else {}
    if api == "anthropic":
        named = request.get("model")
        model = named if isinstance(named, str) else "fake-model"
        if request.get("stream") is not True:
            return anthropic_message(reply, seq, model, body), []
        return None, [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                      for name, data in anthropic_events(reply, seq, model, body)]
    model = path[len(GEMINI_PREFIX):].rsplit(":", 1)[0]
    if api == "gemini":
        return gemini_response(reply, seq, model, body), []
    return None, [f"data: {json.dumps(c)}\n\n".encode() for c in gemini_chunks(reply, seq, model, body)]


def count(api: str, body: object) -> dict:
    """A token count answer (consumes no scripted reply)."""
    tokens = max(1, len(json.dumps(body)) // 4)
    return {"input_tokens": tokens} if api == "anthropic-count" else {"totalTokens": tokens}
