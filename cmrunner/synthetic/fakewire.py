"""The fake model's wire encoders: Responses SSE events and Chat Completions chunks for one reply.

Contract: ``responses_events`` and ``chat_chunks`` return the events of one scripted reply in wire
order (``fakemodel`` frames and sends them); ``chat_completion`` is the non-streaming Chat body and
``error_body`` an HTTP error body. Reply keys: ``text``, ``tool_calls``, ``usage`` (``input_tokens``,
``output_tokens``, ``cached_tokens``), ``cache_report`` (the provider's fields for the cached tokens,
``CACHE_REPORTS``), ``raw_usage`` (sent
as the usage object verbatim, whatever it holds; ``null`` sends none), ``refusal``,
``finish: "length"`` (cut by the token limit) and ``stream_error`` (an error inside the stream).
Stdlib only.
"""

from __future__ import annotations

import json
import time


def _arguments(call: dict) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args, separators=(",", ":"))


# Where each provider reports the input tokens its prompt cache served (``fakemodel``'s ``cache_report``).
CACHE_REPORTS = ("openai", "deepseek", "anthropic", "none")


def _usage(reply: dict, body: object) -> tuple[int, int]:
    usage = reply.get("usage", {})
    # Rough default counts so that token-limit knobs (auto-compaction) react to real sizes.
    prompt = max(1, len(json.dumps(body)) // 4)
    produced = max(1, len(reply.get("text", "")) // 4 + sum(len(_arguments(c)) // 4 for c in reply.get("tool_calls", [])))
    return usage.get("input_tokens", prompt), usage.get("output_tokens", produced)


def _cached(reply: dict, body: object) -> int:
    """The input tokens the prompt cache served: never more than the input."""
    return min(reply.get("usage", {}).get("cached_tokens", 0), _usage(reply, body)[0])


def _chat_usage(reply: dict, body: object) -> dict:
    """A Chat Completions usage object, the cached tokens in the fields of ``reply["cache_report"]``."""
    tokens_in, tokens_out = _usage(reply, body)
    usage: dict = {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}
    cached, report = _cached(reply, body), reply.get("cache_report", "openai")
    if report == "openai":
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    elif report == "deepseek":
        usage.update({"prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": tokens_in - cached})
    elif report == "anthropic":
        usage.update({"cache_read_input_tokens": cached, "cache_creation_input_tokens": 0})
    return usage


def reported_usage(reply: dict, body: object) -> object:
    """The usage the reply reports, as the request log records it: ``raw_usage`` verbatim when the
    reply has one (``None`` then means no usage at all), else the input, cached and output token counts."""
    if "raw_usage" in reply:
        return reply["raw_usage"]
    tokens_in, tokens_out = _usage(reply, body)
    return {"input_tokens": tokens_in, "cached_tokens": _cached(reply, body), "output_tokens": tokens_out}


def responses_events(reply: dict, seq: int, model: str, body: object) -> list[dict]:
    """The Responses API SSE events for one reply, in wire order (without the completion cut)."""
    resp_id = f"resp_{seq:06d}"
    base = {"id": resp_id, "object": "response", "created_at": int(time.time()), "model": model}
    events: list[dict] = [{"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}]
    output: list[dict] = []
    if "refusal" in reply:
        item_id = f"msg_{seq:06d}_r"
        idx = len(output)
        events.append({"type": "response.output_item.added", "output_index": idx, "item": {
            "id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}})
        events.append({"type": "response.content_part.added", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "part": {"type": "refusal", "refusal": ""}})
        for chunk in _chunks(reply["refusal"]):
            events.append({"type": "response.refusal.delta", "item_id": item_id, "output_index": idx,
                           "content_index": 0, "delta": chunk})
        events.append({"type": "response.refusal.done", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "refusal": reply["refusal"]})
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "refusal", "refusal": reply["refusal"]}]}
        events.append({"type": "response.output_item.done", "output_index": idx, "item": item})
        output.append(item)
    if "text" in reply or not (reply.get("tool_calls") or "refusal" in reply):
        text = reply.get("text", "")
        item_id = f"msg_{seq:06d}"
        idx = len(output)
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.output_item.added", "output_index": idx, "item": {
            "id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}})
        events.append({"type": "response.content_part.added", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "part": part})
        for chunk in _chunks(text):
            events.append({"type": "response.output_text.delta", "item_id": item_id, "output_index": idx,
                           "content_index": 0, "delta": chunk})
        events.append({"type": "response.output_text.done", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "text": text})
        done_part = {**part, "text": text}
        events.append({"type": "response.content_part.done", "item_id": item_id, "output_index": idx,
                       "content_index": 0, "part": done_part})
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed", "content": [done_part]}
        events.append({"type": "response.output_item.done", "output_index": idx, "item": item})
        output.append(item)
    for n, call in enumerate(reply.get("tool_calls", [])):
        idx = len(output)
        item_id = f"fc_{seq:06d}_{n}"
        args = _arguments(call)
        item = {"id": item_id, "type": "function_call", "status": "in_progress",
                "call_id": call.get("call_id", f"call_{seq:06d}_{n}"), "name": call["name"], "arguments": ""}
        if call.get("namespace"):
            item["namespace"] = call["namespace"]
        events.append({"type": "response.output_item.added", "output_index": idx, "item": item})
        for chunk in _chunks(args):
            events.append({"type": "response.function_call_arguments.delta", "item_id": item_id,
                           "output_index": idx, "delta": chunk})
        events.append({"type": "response.function_call_arguments.done", "item_id": item_id,
                       "output_index": idx, "arguments": args})
        done = {**item, "status": "completed", "arguments": args}
        events.append({"type": "response.output_item.done", "output_index": idx, "item": done})
        output.append(done)
    tokens_in, tokens_out = _usage(reply, body)
    usage: dict = {"usage": {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": _cached(reply, body)},
                             "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
                             "total_tokens": tokens_in + tokens_out}}
    if "raw_usage" in reply:
        usage = {} if reply["raw_usage"] is None else {"usage": reply["raw_usage"]}
    if reply.get("stream_error"):
        events.append({"type": "response.failed", "response": {
            **base, "status": "failed", "output": output, "error": reply["stream_error"], **usage}})
    elif reply.get("finish") == "length":
        events.append({"type": "response.incomplete", "response": {
            **base, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": output,
            **usage}})
    else:
        events.append({"type": "response.completed",
                       "response": {**base, "status": "completed", "output": output, **usage}})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def chat_chunks(reply: dict, seq: int, model: str, body: object, include_usage: bool) -> list[dict]:
    """The Chat Completions ``chat.completion.chunk`` objects for one reply (without ``[DONE]``)."""
    base = {"id": f"chatcmpl-{seq:06d}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in _chunks(reply.get("text", "")):
        chunks.append(chunk({"content": piece}))
    for piece in _chunks(reply.get("refusal", "")):
        chunks.append(chunk({"refusal": piece}))
    calls = reply.get("tool_calls", [])
    for n, call in enumerate(calls):
        call_id = call.get("call_id", f"call_{seq:06d}_{n}")
        chunks.append(chunk({"tool_calls": [{"index": n, "id": call_id, "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        for piece in _chunks(_arguments(call)):
            chunks.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]}))
    if reply.get("stream_error"):
        chunks.append({**base, "error": reply["stream_error"]})
        return chunks
    chunks.append(chunk({}, reply.get("finish") or ("tool_calls" if calls else "stop")))
    if include_usage and "raw_usage" in reply:
        if reply["raw_usage"] is not None:
            chunks.append({**base, "choices": [], "usage": reply["raw_usage"]})
    elif include_usage:
        chunks.append({**base, "choices": [], "usage": _chat_usage(reply, body)})
    return chunks


def chat_completion(reply: dict, seq: int, model: str, body: object) -> dict:
    """A non-streaming Chat Completions body."""
    calls = [{"id": c.get("call_id", f"call_{seq:06d}_{n}"), "type": "function",
              "function": {"name": c["name"], "arguments": _arguments(c)}}
             for n, c in enumerate(reply.get("tool_calls", []))]
    message: dict = {"role": "assistant", "content": reply.get("text", "" if not calls else None)}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{seq:06d}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": _chat_usage(reply, body)}


def _chunks(text: str, size: int = 16) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def error_body(status: int) -> dict:
    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": f"scripted error {status}", "type": kind, "code": None, "param": None}}
