"""The model form of setup: provider presets, model discovery and the recoverable model commit.

Contract:
- ``PRESETS`` are prefills only: a label, an editable base URL, the wire protocol the preset
  uses (OpenAI speaks Responses; the others and Custom speak Chat Completions) and whether it needs
  a key. The local presets (Ollama, LM Studio, llama.cpp's server, vLLM) serve on loopback without
  one: cm stores ``LOCAL_KEY`` as their key, which such a server ignores (``with_local_key``, also
  when the endpoint check is skipped). Custom has no URL.
- ``discover_models`` sends one ``GET {baseUrl}/models`` through the model's own outbound client
  (``netclient``: the configured route, or ``route``'s, CA and origin check, ``trust_env`` off).
  It is called when the user enters model selection and by ``endpoint.check``, never at start-up or
  at run time. Failures are ``CmError`` with a stable code (``AUTHENTICATION``,
  ``PROXY_AUTHENTICATION``, ``MODEL_UNREACHABLE`` naming the URL, ``ENDPOINT_NOT_FOUND`` for a 404:
  the URL probably lacks its API path, ``MODEL_LIST_UNAVAILABLE``, ``MODEL_LIST_INVALID``,
  ``MODEL_LIST_EMPTY``) whose message carries no key, body or proxy credential.
- ``commit_model`` is the recoverable commit (an agent-CLI ``remote`` is replaced whole, as if none): a new key goes into the private ``.env`` under a
  freshly generated name first, then ``config.json`` is replaced atomically to point at it, then
  keys no configuration refers to any more are dropped. A crash between steps leaves the old
  configuration with its old key intact (at worst an unreferenced key, removed by the next commit).
  Unrelated configuration is preserved; thinking/effort options are cleared when the model or the
  protocol changes; a new ``remote`` gets ``proxy: {"mode": "direct"}``, an existing one keeps
  its route (or its absence).
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from typing import Any

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.errors import CmError
from cmrunner.manage import configinit

KEY_PREFIX = "COMMON_MEMORY_API_KEY"
MODEL_LIST_LIMIT = 4 << 20
DISCOVERY_TIMEOUT = 15.0
_THINKING_FIELDS = ("reasoningEffort", "thinking", "enableThinking", "capability")
_URL_RE = re.compile(r"^https?://[^\s/@]+(/[^\s]*)?$")


LOCAL_KEY = "no-key-needed"


@dataclass(frozen=True)
class Preset:
    id: str
    label: str
    base_url: str
    api: str
    needs_key: bool = True


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "https://api.openai.com/v1", "responses"),
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com/v1", "chat_completions"),
    Preset("qwen", "Qwen (Alibaba Cloud Model Studio)", "https://dashscope.aliyuncs.com/compatible-mode/v1",
           "chat_completions"),
    Preset("zhipu", "Zhipu GLM", "https://open.bigmodel.cn/api/paas/v4", "chat_completions"),
    Preset("kimi", "Kimi (Moonshot)", "https://api.moonshot.cn/v1", "chat_completions"),
    Preset("opencode-go", "OpenCode Go", "https://opencode.ai/zen/go/v1", "chat_completions"),
    Preset("anthropic", "Anthropic (OpenAI-compatible)", "https://api.anthropic.com/v1", "chat_completions"),
    Preset("gemini", "Google Gemini (OpenAI-compatible)", "https://generativelanguage.googleapis.com/v1beta/openai",
           "chat_completions"),
    # Checked against OpenRouter's own API pages (openrouter.ai/<model>/api, e.g.
    # https://openrouter.ai/openai/gpt-4-32k/api): base URL https://openrouter.ai/api/v1, OpenAI-style
    # POST /chat/completions with a Bearer key (its HTTP-Referer / X-Title headers are optional
    # ranking labels cm does not send); the model list is GET /api/v1/models
    # (openrouter.ai/docs/api/api-reference/models/get-models), which the endpoint check reads.
    Preset("openrouter", "OpenRouter", "https://openrouter.ai/api/v1", "chat_completions"),
    Preset("ollama", "Ollama (local)", "http://127.0.0.1:11434/v1", "chat_completions", False),
    Preset("lmstudio", "LM Studio (local)", "http://127.0.0.1:1234/v1", "chat_completions", False),
    Preset("llamacpp", "llama.cpp server (local)", "http://127.0.0.1:8080/v1", "chat_completions", False),
    Preset("vllm", "vLLM (local)", "http://127.0.0.1:8000/v1", "chat_completions", False),
    Preset("custom", "Custom (OpenAI-compatible)", "", "chat_completions"),
)


PRESET_IDS = tuple(p.id for p in PRESETS)


def with_local_key(home: str, data: dict, keys: dict[str, str]) -> dict[str, str]:
    """``keys`` plus ``LOCAL_KEY`` for a local preset's model when no key is given or stored, checked
    or not (``--skip-check``): without one the saved model could never be called (``API_KEY_MISSING``)."""
    remote = data.get("remote") or {}
    chosen = remote.get("preset")
    if chosen not in PRESET_IDS or preset(chosen).needs_key:
        return keys
    name = remote["apiKeyEnv"]
    try:
        stored = envfile.get_secret(home, name)
    except CmError:
        stored = None
    return keys if name in keys or stored is not None else {**keys, name: LOCAL_KEY}


def preset(preset_id: str) -> Preset:
    for found in PRESETS:
        if found.id == preset_id:
            return found
    raise CmError("UNKNOWN_PRESET", f"no provider preset is called {preset_id!r}")


def check_base_url(url: str) -> str:
    """The URL without a trailing slash, or ``INVALID_BASE_URL`` (no credentials, no spaces)."""
    url = url.strip().rstrip("/")
    if not _URL_RE.match(url):
        raise CmError("INVALID_BASE_URL", "the base URL must start with http:// or https:// and hold no spaces or "
                                          "user:password@; for example https://api.openai.com/v1")
    return url


def check_model_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise CmError("INVALID_MODEL_NAME", "the model name must be 1-200 printable characters")
    return name


def check_api_key(key: str) -> str:
    key = key.strip()
    if not key or any(ord(c) < 33 for c in key) or len(key) > 4096:
        raise CmError("INVALID_API_KEY", "the API key must be one line without spaces; paste it again")
    return key


def route_remote(home: str, base_url: str, route: dict | None = None) -> dict:
    """The routing fields discovery uses: ``route``'s, else the configured route, else direct."""
    remote = route or {}
    if route is None:
        try:
            remote = config_mod.load(home).remote or {}
        except CmError:
            remote = {}
    routed: dict = {"baseUrl": base_url, "proxy": remote.get("proxy", {"mode": "direct"})}
    if "caFileEnv" in remote:
        routed["caFileEnv"] = remote["caFileEnv"]
    return routed


def not_found(url: str) -> CmError:
    return CmError("ENDPOINT_NOT_FOUND", f"{url} answered HTTP 404: the base URL is probably missing its API path "
                                         "(for example /v1 at its end); fix the base URL")


def unreachable(url: str, reason: str) -> CmError:
    return CmError("MODEL_UNREACHABLE", f"nothing answered at {url} ({reason}); start the model server or fix the "
                                        "base URL and network settings")


def _agent_failure(exc: CmError, url: str = "the base URL") -> CmError:
    diagnostic = getattr(exc, "diagnostic", {}) or {}
    reason = diagnostic.get("reason", exc.code.lower())
    if diagnostic.get("httpStatus") == 404:
        return not_found(url)
    if exc.code == "AUTHENTICATION":
        status = diagnostic.get("httpStatus")
        return CmError("AUTHENTICATION", f"the provider refused the API key (HTTP {status}); check the key and the "
                                         "base URL")
    if exc.code == "PROXY_AUTHENTICATION":
        return CmError("PROXY_AUTHENTICATION", "the proxy refused its credentials (HTTP 407); fix the proxy URL in "
                                               "network settings")
    if exc.code == "CONFIGURATION":
        return CmError("NETWORK_CONFIGURATION", f"the network settings are invalid ({reason}); fix them in network "
                                                "settings")
    if "httpStatus" in diagnostic:
        return CmError("MODEL_LIST_UNAVAILABLE", f"the model list answered HTTP {diagnostic['httpStatus']} "
                                                 f"({reason}); retry, or type the model name")
    return unreachable(url, reason)


def discover_models(home: str, base_url: str, api_key: str, route: dict | None = None) -> list[str]:
    """Model ids from ``GET {base_url}/models`` over the model's outbound client (see contract)."""
    import httpx2

    from cmrunner.agentrt import errors_map
    from cmrunner.agentrt.interface import AgentError
    from cmrunner.agentrt.netclient import ModelClient, NetworkInputs

    base_url = check_base_url(base_url)
    inputs = NetworkInputs.capture(route_remote(home, base_url, route), envfile.read(home), os.environ)
    client = ModelClient(inputs, api_key)
    try:
        try:
            http = client.client()
            via_proxy = client.route.via_proxy
            with http.stream("GET", base_url + "/models",  # type: ignore[attr-defined]
                             headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
                             timeout=httpx2.Timeout(DISCOVERY_TIMEOUT)) as response:
                if not 200 <= response.status_code < 300:
                    raise errors_map.from_http(response.status_code, b"", via_proxy)
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MODEL_LIST_LIMIT:
                        raise CmError("MODEL_LIST_INVALID", "the model list is larger than 4 MiB; type the model name")
        except AgentError as exc:
            raise _agent_failure(exc, base_url + "/models") from None
        except httpx2.HTTPError as exc:
            raise _agent_failure(errors_map.from_transport(exc, client.route.via_proxy), base_url + "/models") from None
    finally:
        client.close()
    return parse_model_list(body)


def parse_model_list(body: bytes) -> list[str]:
    """Sorted unique model ids of an OpenAI-style ``{"data": [{"id": …}]}`` list."""
    from cmrunner.agentrt import boundedjson

    try:
        data: Any = boundedjson.loads(body, MODEL_LIST_LIMIT)  # a provider's nesting never reaches the parser
        entries = data["data"]
        ids = sorted({e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]})
    except (ValueError, KeyError, TypeError):
        raise CmError("MODEL_LIST_INVALID", "the provider's model list is not in the expected format; type the model "
                                            "name instead") from None
    if not ids:
        raise CmError("MODEL_LIST_EMPTY", "the provider listed no models; type the model name instead")
    return ids


@dataclass(frozen=True)
class ModelChoice:
    preset: str
    base_url: str
    model: str

    @property
    def api(self) -> str:
        return preset(self.preset).api


def key_configured(home: str) -> bool:
    """Whether the configured model's key is present in the private ``.env`` (never its value)."""
    remote = config_mod.load(home).remote
    if not remote or config_mod.is_agent_cli(remote):
        return False
    try:
        return envfile.get_secret(home, remote["apiKeyEnv"]) is not None
    except CmError:
        return False


def build_remote(old: dict | None, choice: ModelChoice, key_env: str) -> dict:
    """The new ``remote`` section (see module contract)."""
    remote = copy.deepcopy(old) if old else {"proxy": {"mode": "direct"}}
    same_model = bool(old and old.get("model") == choice.model and old.get("api", "responses") == choice.api)
    if not same_model:
        for field in _THINKING_FIELDS:
            remote.pop(field, None)
    remote.update({"provider": "openai-compatible", "baseUrl": check_base_url(choice.base_url),
                   "model": check_model_name(choice.model), "api": choice.api, "preset": choice.preset,
                   "apiKeyEnv": key_env, "apiKeySource": "private-env"})
    return remote


def network_remote(remote: dict | None) -> dict | None:
    """``remote`` when it is an HTTP model; ``None`` for none or an agent CLI (it has no key or URL to keep)."""
    return None if not remote or config_mod.is_agent_cli(remote) else remote


def would_change(home: str, choice: ModelChoice, api_key: str | None) -> bool:
    """Whether ``commit_model`` would change anything: the model settings, or the key (``None`` keeps it)."""
    old = network_remote(config_mod.load(home).remote)
    if not old:
        return True
    if api_key is not None and api_key != envfile.get_secret(home, old["apiKeyEnv"]):
        return True
    return build_remote(old, choice, old["apiKeyEnv"]) != old


def commit_model(home: str, choice: ModelChoice, api_key: str | None) -> dict:
    """Save the model choice; ``api_key`` ``None`` keeps the configured key. Returns the new config."""
    cfg = config_mod.load(home)
    data = copy.deepcopy(cfg.data)
    old = network_remote(data.get("remote"))  # an agent CLI's settings are replaced whole
    if api_key is None:
        if not old or envfile.get_secret(home, old["apiKeyEnv"]) is None:
            raise CmError("API_KEY_MISSING", "no API key is configured yet; enter one")
        key_env = old["apiKeyEnv"]
    else:
        key_env = f"{KEY_PREFIX}_{os.urandom(4).hex().upper()}"
    data["remote"] = build_remote(old, choice, key_env)
    config_mod.validate(data)  # before the key is checked, as `cm config init` orders it
    configinit.publish(home, data, {key_env: check_api_key(api_key)} if api_key is not None else {})
    stale = [name for name in envfile.read(home) if name.startswith(KEY_PREFIX) and name != key_env]
    if stale:
        envfile.update(home, {name: None for name in stale})
    return data
