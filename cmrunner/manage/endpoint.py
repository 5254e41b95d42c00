"""Checking a model endpoint before it is saved: its model list, then one synthetic tool-call round trip.

Contract:
- ``check(home, remote, api_key, listed=None)`` is what `cm config init` and the setup wizard run
  before they write anything. ``remote`` holds ``baseUrl``, ``model``, ``api`` and the routing
  fields (``proxy``, ``caFileEnv``). It lists the models (``providers.discover_models``, unless the
  caller already has ``listed``), refuses a model the list does not hold, then sends the probe: one
  request offering the single tool ``PROBE_TOOL`` and asking the model to call it with a nonce, and,
  once it did, a second request carrying the tool's result. The Memory Agent works only through
  tool calls, so a model that answers without calling the tool is refused.
  Returns the listed model ids (or ``None`` when the server keeps no usable list).
- Failures are ``CmError`` with a stable code and a one-line fix; none carries a key, a provider
  body or the model's text:
  ``MODEL_UNREACHABLE`` (nothing answered at the URL, which the message names);
  ``ENDPOINT_NOT_FOUND`` (HTTP 404 from the list or the request: the URL is probably missing its
  API path, e.g. ``/v1``); ``AUTHENTICATION`` (401/403: the key); ``MODEL_NOT_LISTED`` (the list
  lacks the model; the message names a few that are listed); ``MODEL_CANNOT_CALL_TOOLS`` (the
  model answered without the tool call, or the server refused a request with a tool);
  ``ENDPOINT_REJECTED`` (any other refusal, with its HTTP status and reason code).
Decisions: the probe carries no memory and no user text and runs before any configuration exists,
so it is not entered in the disclosure ledger (`cm network-test` is, once configured). A model list
the server does not give (even a 404: not every provider serves ``/models``) does not block: the
probe then decides, so a wrong URL is still ``ENDPOINT_NOT_FOUND`` (from the test request), and a
provider's ``model_not_found`` answer is ``MODEL_NOT_LISTED``. The probe's output cap leaves room
for a reasoning model's thinking before its call.
"""

from __future__ import annotations

import json
import os
import time

from cmrunner.core import envfile
from cmrunner.core.errors import CmError

PROBE_TOOL = "cm_capability_probe"
PROBE_OUTPUT_TOKENS = 1024
PROBE_DEADLINE_SECONDS = 90.0
SHOWN_MODELS = 5
_PROBE_SYSTEM = "This is a capability test from cm. Follow the user's instruction exactly."
_TOOL = {"name": PROBE_TOOL, "description": "Echo the nonce cm asked for; proves the model can call tools.",
         "parameters": {"type": "object", "properties": {"nonce": {"type": "string"}}, "required": ["nonce"],
                        "additionalProperties": False}}
# A server may keep no model list (a 404 there too): the test request then decides whether the URL is right.
_SOFT_LIST_CODES = ("MODEL_LIST_UNAVAILABLE", "MODEL_LIST_INVALID", "MODEL_LIST_EMPTY", "ENDPOINT_NOT_FOUND")


def not_listed(base_url: str, model: str, listed: list[str]) -> CmError:
    shown = ", ".join(listed[:SHOWN_MODELS]) + (f" (and {len(listed) - SHOWN_MODELS} more)"
                                                 if len(listed) > SHOWN_MODELS else "")
    return CmError("MODEL_NOT_LISTED", f"{base_url}/models does not list {model!r}; pick a listed one: {shown}")


def cannot_call_tools(model: str, why: str) -> CmError:
    return CmError("MODEL_CANNOT_CALL_TOOLS", f"{model!r} {why}: it cannot call tools, and the Memory Agent works "
                                              "only through tool calls; pick a model with tool (function) calling")


def check(home: str, remote: dict, api_key: str, listed: list[str] | None = None) -> list[str] | None:
    """List, compare, probe (see module contract); returns the listed model ids or ``None``."""
    from cmrunner.manage import providers

    base_url = providers.check_base_url(remote["baseUrl"])
    model = providers.check_model_name(remote["model"])
    if listed is None:
        try:
            listed = providers.discover_models(home, base_url, api_key, route=remote)
        except CmError as exc:
            if exc.code not in _SOFT_LIST_CODES:
                raise
            listed = None
    if listed is not None and model not in listed:
        raise not_listed(base_url, model, listed)
    probe(home, dict(remote, baseUrl=base_url, model=model), api_key)
    return listed


def _failure(exc: CmError, url: str, model: str) -> CmError:
    """An ``AgentError`` of the probe, as the check's codes."""
    from cmrunner.manage import providers

    diagnostic = getattr(exc, "diagnostic", {}) or {}
    status, reason = diagnostic.get("httpStatus"), diagnostic.get("reason", exc.code.lower())
    if status == 404 and reason != "model_not_found":
        return providers.not_found(url)
    if exc.code == "AUTHENTICATION":
        return CmError("AUTHENTICATION", f"{url} refused the API key (HTTP {status}); check the key")
    if exc.code == "PROXY_AUTHENTICATION":
        return CmError("PROXY_AUTHENTICATION", "the proxy refused its credentials (HTTP 407); fix the proxy URL in "
                                               "network settings")
    if reason == "model_not_found":
        return CmError("MODEL_NOT_LISTED", f"the server does not know {model!r}; pick one from its model list")
    if status in (400, 422) and reason in ("request_rejected", "unsupported_parameter"):
        return cannot_call_tools(model, f"was refused a request offering a tool (HTTP {status})")
    if status is None and diagnostic.get("stage") in ("network", "network_config"):
        if exc.code in ("CONFIGURATION",):
            return CmError("NETWORK_CONFIGURATION", f"the network settings are invalid ({reason}); fix them in "
                                                    "network settings")
        return providers.unreachable(url, reason)
    if exc.code == "TIMEOUT":
        return providers.unreachable(url, reason)
    where = f"HTTP {status}, {reason}" if status else reason
    return CmError("ENDPOINT_REJECTED", f"{url} did not complete a test request ({exc.code}: {where}); check the "
                                        "base URL, the key and the model")


def probe(home: str, remote: dict, api_key: str) -> None:
    """The synthetic tool-call round trip (see module contract); raises ``CmError`` on failure."""
    from cmrunner.agentrt import wire
    from cmrunner.agentrt.agent import serialize
    from cmrunner.agentrt.interface import AgentError
    from cmrunner.agentrt.netclient import ModelClient, NetworkInputs

    settings = dict(remote, maxOutputTokens=PROBE_OUTPUT_TOKENS)
    for field in ("reasoningEffort", "thinking", "enableThinking"):
        settings.pop(field, None)
    nonce = os.urandom(6).hex()
    conv = wire.conversation(settings, _PROBE_SYSTEM, [_TOOL],
                             f"Call the tool {PROBE_TOOL} once, with nonce {nonce}. Do not answer in text.")
    url = settings["baseUrl"] + conv.path
    client = ModelClient(NetworkInputs.capture(settings, envfile.read(home), os.environ), api_key)
    deadline = time.monotonic() + PROBE_DEADLINE_SECONDS
    try:
        with client.stream(conv.path, serialize(conv.body()), deadline) as events:
            turn = conv.decode(events)
        call = next((c for c in turn.calls if c.name == PROBE_TOOL), None)
        if call is None:
            why = "stopped at its output limit before calling the test tool" if turn.truncated else \
                "answered a request to call a test tool without calling it"
            raise cannot_call_tools(settings["model"], why)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            raise cannot_call_tools(settings["model"], "called the test tool with arguments that are not a JSON object")
        conv.record([(call, {"ok": True, "nonce": nonce}, False)])
        with client.stream(conv.path, serialize(conv.body()), deadline) as events:
            conv.decode(events)
    except AgentError as exc:
        raise _failure(exc, url, settings["model"]) from None
    finally:
        client.close()


def for_init(home: str, data: dict, keys: dict[str, str]) -> None:
    """`cm config init`'s check of ``data``'s model before anything is written; ``keys`` are the keys
    it will store. A local preset without a key gets ``providers.LOCAL_KEY`` added to ``keys``."""
    from cmrunner.manage import providers

    remote = data.get("remote")
    if not remote or remote.get("provider") != "openai-compatible":
        return
    name = remote["apiKeyEnv"]
    key = keys.get(name)
    if key is None and os.path.isdir(home):
        try:
            key = envfile.get_secret(home, name)
        except CmError:
            key = None
    local = remote.get("preset") in providers.PRESET_IDS and not providers.preset(remote["preset"]).needs_key
    if key is None and local:
        key = keys[name] = providers.LOCAL_KEY
    if key is None:
        raise CmError("API_KEY_MISSING", "the endpoint check needs the API key: pipe it in with --api-key-stdin "
                                         "(or pass --skip-check to save without checking)")
    check(home, remote, key)
