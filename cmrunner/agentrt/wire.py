"""The two wire protocols: OpenAI Responses and Chat Completions, streaming with function tools.

Contract:
- A ``Conversation`` (``ResponsesConversation`` or ``ChatConversation``) holds one attempt's
  history and renders the next request body as a dict: the system prompt, the task as the first
  user message, then for each turn the model's tool calls and their results. Rejected calls are
  replayed with blank arguments ``{}``; assistant prose is not replayed (it is never a decision,
  and not echoing it keeps every request free of model-invented text).
- The static prefix is byte-identical across the requests of an attempt and across jobs: the body
  serializes the model, instructions, tools and options first and the conversation (task, calls,
  results) last, so a provider's prefix cache serves them. For providers that cache only at
  explicit breakpoints (``cache_breakpoints``: the hosted Anthropic preset, OpenRouter's
  ``anthropic/`` models) the Chat system message carries ``cache_control: {type: ephemeral}``.
  Cached input tokens are read wherever the provider reports them: OpenAI's
  ``input_tokens_details``/``prompt_tokens_details.cached_tokens``, DeepSeek's
  ``prompt_cache_hit_tokens``, Anthropic's ``cache_read_input_tokens``.
- Request options follow the reference payload hook: Responses ``store: false``,
  ``max_output_tokens`` and ``reasoning: {effort}`` only when configured; Chat ``max_tokens``,
  ``thinking`` and ``enable_thinking`` only when configured, and ``stream_options.include_usage``.
  Both stream (``stream: true``); several calls in one turn are allowed and run in order.
- ``decode(events)`` turns one SSE stream into a ``Turn`` (tool calls, a refusal flag, an
  output-truncated flag, usage) or raises ``AgentError``: an unparsable event is
  ``invalid_envelope``, a stream that ends before its terminal event (Responses
  ``response.completed`` / ``incomplete`` / ``failed``; Chat ``[DONE]`` or a finish reason) is
  ``stream_interrupted``, and an error delivered inside the stream maps through ``errors_map``.
  Every event is parsed within ``boundedjson``'s bounds: nesting deeper than
  ``limits.JSON_MAX_DEPTH`` is ``json_too_deep``. What a turn keeps (text, refusal, call ids,
  names, arguments) is counted as it accumulates: more than ``limits.TURN_KEPT_CHARS`` characters
  or ``limits.MAX_CALLS_PER_TURN`` calls is ``body_too_large``, so a flood of deltas can never grow
  memory beyond the cap (text parts are joined once, at the end, never re-copied per delta).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from cmrunner.agentrt import boundedjson, errors_map, limits
from cmrunner.agentrt.interface import AgentError


class ToolCall:
    __slots__ = ("call_id", "name", "arguments")

    def __init__(self, call_id: str, name: str, arguments: str) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments = arguments


class Turn:
    """One model response, normalised."""

    __slots__ = ("calls", "text", "refused", "truncated", "usage")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.text = ""
        self.refused = False
        self.truncated = False
        # As reported: a count is None when absent or not a count; empty when no usage came at all.
        self.usage: dict[str, int | None] = {}

    def output_bytes(self) -> bytes:
        """What the model produced in this turn (text, call names and arguments), for estimates."""
        parts = [self.text] + [c.name + c.arguments for c in self.calls]
        return "".join(parts).encode("utf-8", "replace")


def _count(value: object) -> int | None:
    """A token count as the provider reported it, or ``None`` when it is absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# Where providers report the input tokens their prompt cache served, beside OpenAI's
# ``<inputs>_details.cached_tokens``: DeepSeek's ``prompt_cache_hit_tokens`` and Anthropic's
# ``cache_read_input_tokens`` (as gateways relay it), both at the top of the usage object.
_CACHE_HITS = ("prompt_cache_hit_tokens", "cache_read_input_tokens")


def _usage(usage: dict, inputs: str, outputs: str) -> dict[str, int | None]:
    """A usage object in cm's names; the protocols differ only in the names of the two counts
    (Responses ``input_tokens``/``output_tokens``, Chat ``prompt_tokens``/``completion_tokens``)."""
    cached = _count(_dict(usage.get(f"{inputs}_details")).get("cached_tokens"))
    for name in _CACHE_HITS:
        cached = _count(usage.get(name)) if cached is None else cached
    return {"input_tokens": _count(usage.get(inputs)), "output_tokens": _count(usage.get(outputs)),
            "cached_input_tokens": cached,
            "reasoning_tokens": _count(_dict(usage.get(f"{outputs}_details")).get("reasoning_tokens"))}


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list:
    """A field that should be an array; anything else but an empty value is a broken envelope."""
    if not value:
        return []
    if not isinstance(value, list):
        raise _envelope_error()
    return value


def _envelope_error() -> AgentError:
    return errors_map.failure("INVALID_RESPONSE", "response_envelope", "invalid_envelope", True)


def _interrupted() -> AgentError:
    return errors_map.failure("INVALID_RESPONSE", "response_envelope", "stream_interrupted", True)


def _json(data: str) -> dict:
    try:
        value = boundedjson.loads(data, limits.EVENT_BYTE_LIMIT)
    except boundedjson.JsonRejected as exc:
        if exc.reason == "too_deep":
            raise errors_map.too_deep() from None
        if exc.reason == "too_large":
            raise errors_map.too_large() from None
        raise _envelope_error() from None
    if not isinstance(value, dict):
        raise _envelope_error()
    return value


class _Kept:
    """Characters and calls one turn keeps; over the caps the attempt fails (module contract)."""

    __slots__ = ("chars", "calls")

    def __init__(self) -> None:
        self.chars = 0
        self.calls = 0

    def add(self, value: object) -> str:
        text = value if isinstance(value, str) else ""
        self.chars += len(text)
        if self.chars > limits.TURN_KEPT_CHARS:
            raise errors_map.too_large()
        return text

    def drop(self, text: str) -> None:
        self.chars -= len(text)

    def call(self) -> None:
        self.calls += 1
        if self.calls > limits.MAX_CALLS_PER_TURN:
            raise errors_map.too_large()


class Conversation:
    path = ""

    def __init__(self, remote: dict, system_prompt: str, tools: list[dict], task_text: str) -> None:
        self.remote = remote
        self.system_prompt = system_prompt
        self.tools = tools
        self.task_text = task_text

    def body(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def history(self) -> list[dict]:  # pragma: no cover - interface
        """The append-only part of the request (items or messages), oldest first."""
        raise NotImplementedError

    def record(self, calls: list[tuple[ToolCall, dict, bool]]) -> None:  # pragma: no cover - interface
        """Append one turn's calls with their results (``rejected`` blanks the arguments)."""
        raise NotImplementedError

    def nudge(self, text: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def decode(self, events: Iterable[object]) -> Turn:  # pragma: no cover - interface
        raise NotImplementedError


def _result_text(result: dict) -> str:
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


class ResponsesConversation(Conversation):
    path = "/responses"

    def __init__(self, remote: dict, system_prompt: str, tools: list[dict], task_text: str) -> None:
        super().__init__(remote, system_prompt, tools, task_text)
        self.items: list[dict] = [{"type": "message", "role": "user", "content": task_text}]

    def body(self) -> dict:
        body: dict = {"model": self.remote["model"], "instructions": self.system_prompt}
        if self.tools:
            body["tools"] = [{"type": "function", "name": t["name"], "description": t["description"],
                              "parameters": t["parameters"], "strict": True} for t in self.tools]
        body.update({"stream": True, "store": False})
        if self.remote.get("maxOutputTokens") is not None:
            body["max_output_tokens"] = self.remote["maxOutputTokens"]
        if "reasoningEffort" in self.remote:
            body["reasoning"] = {"effort": self.remote["reasoningEffort"]}
        body["input"] = self.items  # last: everything before it is the same for every request of every job
        return body

    def history(self) -> list[dict]:
        return self.items

    def record(self, calls: list[tuple[ToolCall, dict, bool]]) -> None:
        for call, result, rejected in calls:
            self.items.append({"type": "function_call", "call_id": call.call_id, "name": call.name,
                               "arguments": "{}" if rejected else call.arguments})
            self.items.append({"type": "function_call_output", "call_id": call.call_id, "output": _result_text(result)})

    def nudge(self, text: str) -> None:
        self.items.append({"type": "message", "role": "user", "content": text})

    def decode(self, events: Iterable[object]) -> Turn:
        turn = Turn()
        kept = _Kept()
        text: list[str] = []
        pending: dict[object, dict] = {}
        finished: dict[object, ToolCall] = {}
        order: list[object] = []
        terminal = False
        for event in events:
            data = getattr(event, "data", "")
            if data.strip() == "[DONE]":
                break
            obj = _json(data)
            kind = obj.get("type") or getattr(event, "event", "")
            key = obj.get("output_index", obj.get("item_id"))
            if not isinstance(key, (int, str)) or isinstance(key, bool):
                key = None
            item = _dict(obj.get("item"))
            if kind == "response.output_item.added" and item.get("type") == "function_call":
                if key not in order:
                    kept.call()
                    order.append(key)
                pending[key] = {"call_id": kept.add(item.get("call_id")), "name": kept.add(item.get("name")),
                                "arguments": []}
            elif kind == "response.function_call_arguments.delta" and key in pending:
                pending[key]["arguments"].append(kept.add(obj.get("delta")))
            elif kind == "response.output_item.done" and item.get("type") == "function_call":
                if key not in order:
                    kept.call()
                    order.append(key)
                base = pending.pop(key, {})
                arguments = item.get("arguments")
                if isinstance(arguments, str):
                    for part in base.get("arguments", []):
                        kept.drop(part)  # the done item's copy replaces the deltas
                    arguments = kept.add(arguments)
                else:
                    arguments = "".join(base.get("arguments", []))
                previous = finished.get(key)
                if previous is not None:
                    kept.drop(previous.arguments)
                finished[key] = ToolCall(kept.add(str(item.get("call_id") or base.get("call_id") or f"call_{len(order)}")),
                                         kept.add(str(item.get("name") or base.get("name") or "")), arguments)
            elif kind == "response.output_item.done" and item.get("type") == "message":
                for part in item["content"] if isinstance(item.get("content"), list) else []:
                    if isinstance(part, dict) and part.get("type") == "refusal":
                        turn.refused = True
            elif kind == "response.output_text.delta":
                text.append(kept.add(obj.get("delta")))
            elif kind in ("response.refusal.delta", "response.refusal.done"):
                turn.refused = True
            elif kind == "error":
                raise errors_map.from_stream_error(obj.get("error", obj))
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                response = _dict(obj.get("response"))
                usage = response.get("usage")
                if isinstance(usage, dict):
                    turn.usage = _usage(usage, "input_tokens", "output_tokens")
                if kind == "response.failed":
                    raise errors_map.from_stream_error(response.get("error"))
                if kind == "response.incomplete":
                    reason = _dict(response.get("incomplete_details")).get("reason")
                    turn.refused = turn.refused or reason == "content_filter"
                    turn.truncated = reason != "content_filter"
                terminal = True
                break
        if not terminal:
            raise _interrupted()
        turn.text = "".join(text)
        for key in order:
            call = finished.get(key)
            if call is None and key in pending:
                base = pending[key]
                call_id = str(base["call_id"] or f"call_{len(turn.calls)}")
                call = ToolCall(call_id, str(base["name"] or ""), "".join(base["arguments"]))
            if call is not None:
                turn.calls.append(call)
        return turn


class ChatConversation(Conversation):
    path = "/chat/completions"

    def __init__(self, remote: dict, system_prompt: str, tools: list[dict], task_text: str) -> None:
        super().__init__(remote, system_prompt, tools, task_text)
        system: str | list[dict] = system_prompt
        if cache_breakpoints(remote):
            # One explicit breakpoint after the system prompt: the provider caches tools and instructions.
            system = [{"type": "text", "text": system_prompt, "cache_control": {"type": "ephemeral"}}]
        self.messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": task_text}]

    def body(self) -> dict:
        body: dict = {"model": self.remote["model"]}
        if self.tools:
            body["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                               "parameters": t["parameters"]}} for t in self.tools]
        body.update({"stream": True, "stream_options": {"include_usage": True}})
        if self.remote.get("maxOutputTokens") is not None:
            body["max_tokens"] = self.remote["maxOutputTokens"]
        if "thinking" in self.remote:
            body["thinking"] = {"type": self.remote["thinking"]["type"]}
        if "enableThinking" in self.remote:
            body["enable_thinking"] = self.remote["enableThinking"]
        body["messages"] = self.messages  # last: everything before the task is the same for every request of every job
        return body

    def history(self) -> list[dict]:
        return self.messages

    def record(self, calls: list[tuple[ToolCall, dict, bool]]) -> None:
        if not calls:
            return
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.call_id, "type": "function",
             "function": {"name": c.name, "arguments": "{}" if rejected else c.arguments}}
            for c, _result, rejected in calls]})
        for call, result, _rejected in calls:
            self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": _result_text(result)})

    def nudge(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def decode(self, events: Iterable[object]) -> Turn:
        turn = Turn()
        kept = _Kept()
        text: list[str] = []
        slots: dict[int, dict] = {}
        finish: str | None = None
        done = False
        for event in events:
            data = getattr(event, "data", "")
            if data.strip() == "[DONE]":
                done = True
                break
            obj = _json(data)
            if obj.get("error") is not None:
                raise errors_map.from_stream_error(obj["error"])
            usage = obj.get("usage")
            if isinstance(usage, dict):
                turn.usage = _usage(usage, "prompt_tokens", "completion_tokens")
            for choice in _list(obj.get("choices")):
                if not isinstance(choice, dict):
                    raise _envelope_error()
                delta = _dict(choice.get("delta"))
                if isinstance(delta.get("content"), str):
                    text.append(kept.add(delta["content"]))
                if delta.get("refusal"):
                    turn.refused = True
                for piece in _list(delta.get("tool_calls")):
                    if not isinstance(piece, dict):
                        raise _envelope_error()
                    index = piece.get("index", 0)
                    index = index if isinstance(index, int) and not isinstance(index, bool) else 0
                    if index not in slots:
                        kept.call()
                        slots[index] = {"id": "", "name": "", "arguments": []}
                    slot = slots[index]
                    if piece.get("id"):
                        kept.drop(slot["id"])
                        slot["id"] = kept.add(str(piece["id"]))
                    function = _dict(piece.get("function"))
                    if function.get("name"):
                        kept.drop(slot["name"])
                        slot["name"] = kept.add(str(function["name"]))
                    if isinstance(function.get("arguments"), str):
                        slot["arguments"].append(kept.add(function["arguments"]))
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        if not done and finish is None:
            raise _interrupted()
        turn.refused = turn.refused or finish == "content_filter"
        turn.truncated = finish == "length"
        turn.text = "".join(text)
        for n, index in enumerate(sorted(slots)):
            slot = slots[index]
            turn.calls.append(ToolCall(slot["id"] or f"call_{n}", slot["name"], "".join(slot["arguments"])))
        return turn


def cache_breakpoints(remote: dict) -> bool:
    """Whether the provider caches a prompt only at explicit ``cache_control`` breakpoints: Claude
    models, through the hosted Anthropic preset or OpenRouter's ``anthropic/`` models."""
    model = str(remote.get("model") or "")
    return remote.get("preset") == "anthropic" or (remote.get("preset") == "openrouter" and model.startswith("anthropic/"))


def conversation(remote: dict, system_prompt: str, tools: list[dict], task_text: str) -> Conversation:
    kind = ResponsesConversation if remote.get("api", "responses") == "responses" else ChatConversation
    return kind(remote, system_prompt, tools, task_text)
