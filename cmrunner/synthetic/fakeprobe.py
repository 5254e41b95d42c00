"""How the fake model answers cm's endpoint check (``cmrunner.manage.endpoint``): a model that can call tools.

Contract:
- ``answer(body, calls_tools)`` returns the reply (in the script's reply shape) for a request that
  offers exactly one tool named ``PROBE_TOOL``, or ``None`` for any other request, which the script
  answers as before. Such a request consumes no scripted reply, so a test's script keeps its order
  whether or not a check ran first.
- A tool-capable fake (the default) does what the probe's prompt asks: without a tool result in the
  conversation yet, it calls the tool with the nonce the prompt names; once the result is there, it
  answers with text. ``calls_tools`` ``False`` (script ``"tools": false``) is a model that never
  calls tools: it answers every probe with text only.
The tool's name is the check's, spelled here as the fake sees it on the wire (the synthetic room may
not import the Writer's side); ``tests/test_endpoint_check.py`` holds the two spellings together.
Stdlib only.
"""

from __future__ import annotations

import re

PROBE_TOOL = "cm_capability_probe"
_NONCE = re.compile(r"nonce ([A-Za-z0-9]{4,64})")


def _tool_names(tools: object) -> list[str]:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        names.append(name if isinstance(name, str) else "")
    return names


def _texts(body: dict) -> tuple[list[str], bool]:
    """The conversation's text parts and whether it already holds a tool result."""
    items = body.get("messages") if "messages" in body else body.get("input")
    texts: list[str] = []
    answered = False
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("role") == "tool" or item.get("type") == "function_call_output":
            answered = True
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
    return texts, answered


def answer(body: object, calls_tools: bool) -> dict | None:
    if not isinstance(body, dict) or _tool_names(body.get("tools")) != [PROBE_TOOL]:
        return None
    texts, answered = _texts(body)
    if not calls_tools:
        return {"text": "I would call a tool, but I cannot."}
    if answered:
        return {"text": "OK"}
    found = next((m.group(1) for m in map(_NONCE.search, texts) if m), "")
    return {"tool_calls": [{"name": PROBE_TOOL, "arguments": {"nonce": found}}]}
