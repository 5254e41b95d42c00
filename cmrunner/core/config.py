"""``config.json`` (``schemaVersion: 2``): loading, strict validation, defaults and saving.

Contract:
- The field set is the reference's (reference-facts Appendix A) with strict keys: an unknown key,
  a wrong type or a value out of range raises ``ConfigError("CONFIG_INVALID", …)`` naming the
  field path and the accepted values. Nothing is silently coerced.
- ``remote`` may be absent: capture needs no model, and an install can capture before a model is
  chosen. Every other section has documented defaults when the whole file is absent.
- The file holds no secrets; keys live in the private ``.env`` (``cmrunner.core.envfile``).
- Saving is atomic and durable (``fsutil.write_atomic``).
- A file that exists but does not load (not JSON, invalid or unsupported fields: ``UNREADABLE_CODES``)
  can be replaced by ``cm config init --force``; ``keep_aside`` first copies it, byte for byte, to
  ``config.json.corrupt-<UTC time>`` (0600, never overwriting an earlier copy), so nothing is lost.
Stdlib only: hooks read the configuration to find the data root and the disclosure rules.
"""

from __future__ import annotations

import json
import os
import re

from cmrunner.core import fsutil
from cmrunner.core.errors import ConfigError
from cmrunner.core.home import config_path, default_data_root

SCHEMA_VERSION = 2
CONFIG_LIMIT = 1 << 20
UNREADABLE_CODES = frozenset({"CONFIG_INVALID", "UNSUPPORTED_CONFIG_VERSION"})

SCOPE_RE = re.compile(r"^(global|project:[A-Za-z0-9_-]{1,128})$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
PROVENANCE = ("user_explicit", "agent_observation", "document_import", "conversation_context")
PRESETS = ("deepseek", "qwen", "openai", "zhipu", "opencode-go", "kimi", "custom")
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
APIS = ("responses", "chat_completions")

DEFAULT_SCHEDULER = {
    "turnThreshold": 6,
    "byteThreshold": 16384,
    "idleMs": 120_000,
    "maxWaitMs": 600_000,
    "leaseMs": 120_000,
    "maxAttempts": 5,
}
DEFAULT_SESSION_CACHE = {"maxSessionBytes": 8_388_608, "maxTotalBytes": 67_108_864, "contextTailTurns": 2}
MAX_SAFE_INT = 2**53 - 1


def _fail(path: str, expected: str) -> ConfigError:
    return ConfigError(
        "CONFIG_INVALID",
        f"config.json field '{path}' must be {expected}; edit the file or rerun `cm config init --force`",
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _keys(obj: object, path: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    if not isinstance(obj, dict):
        raise _fail(path, "an object")
    for key in obj:
        if key not in required and key not in optional:
            allowed = ", ".join(required + optional)
            raise _fail(f"{path}.{key}" if path else key, f"absent (unknown field; accepted fields: {allowed})")
    for key in required:
        if key not in obj:
            raise _fail(f"{path}.{key}" if path else key, "present (it is required)")
    return obj


def _int(obj: dict, key: str, path: str, lo: int, hi: int = MAX_SAFE_INT, nullable: bool = False) -> None:
    if key not in obj:
        return
    value = obj[key]
    if nullable and value is None:
        return
    if not _is_int(value) or not lo <= value <= hi:
        raise _fail(f"{path}.{key}", f"an integer from {lo} to {hi}" + (" or null" if nullable else ""))


def _enum(obj: dict, key: str, path: str, accepted: tuple[str, ...]) -> None:
    if key in obj and obj[key] not in accepted:
        raise _fail(f"{path}.{key}", "one of " + ", ".join(accepted))


def _string_list(value: object, path: str, pattern: re.Pattern[str] | None, accepted: tuple[str, ...] | None,
                 what: str) -> None:
    if not isinstance(value, list) or not value:
        raise _fail(path, f"a non-empty list of {what}")
    seen = set()
    for item in value:
        ok = isinstance(item, str) and (
            (pattern is not None and pattern.match(item)) or (accepted is not None and item in accepted)
        )
        if not ok:
            raise _fail(path, f"a non-empty list of {what}")
        if item in seen:
            raise _fail(path, f"a list of {what} without duplicates")
        seen.add(item)


def _validate_remote(remote: object) -> None:
    path = "remote"
    _keys(remote, path, ("provider", "baseUrl", "model", "apiKeyEnv"),
          ("api", "preset", "capability", "apiKeySource", "maxOutputTokens", "maxAgentTurns",
           "reasoningEffort", "thinking", "enableThinking", "proxy", "caFileEnv", "deadlineMs"))
    assert isinstance(remote, dict)
    if remote["provider"] != "openai-compatible":
        raise _fail("remote.provider", "openai-compatible")
    url = remote["baseUrl"]
    if not isinstance(url, str) or not re.match(r"^https?://[^\s/@]+(/[^\s]*)?$", url):
        raise _fail("remote.baseUrl", "an http:// or https:// URL without credentials or spaces")
    if not isinstance(remote["model"], str) or not remote["model"].strip():
        raise _fail("remote.model", "a non-empty model name")
    if not isinstance(remote["apiKeyEnv"], str) or not ENV_NAME_RE.match(remote["apiKeyEnv"]):
        raise _fail("remote.apiKeyEnv", "an environment-variable name such as OPENAI_API_KEY")
    _enum(remote, "api", path, APIS)
    _enum(remote, "preset", path, PRESETS)
    _enum(remote, "apiKeySource", path, ("private-env",))
    _int(remote, "maxOutputTokens", path, 1, nullable=True)
    _int(remote, "maxAgentTurns", path, 1, 1024)
    _int(remote, "deadlineMs", path, 1000, 3_600_000)
    _enum(remote, "reasoningEffort", path, EFFORTS)
    api = remote.get("api", "responses")
    if "reasoningEffort" in remote and api != "responses":
        raise _fail("remote.reasoningEffort", "absent unless remote.api is responses")
    if "thinking" in remote:
        if api != "chat_completions":
            raise _fail("remote.thinking", "absent unless remote.api is chat_completions")
        thinking = _keys(remote["thinking"], "remote.thinking", ("type",), ())
        _enum(thinking, "type", "remote.thinking", ("enabled", "disabled"))
    if "enableThinking" in remote:
        if api != "chat_completions":
            raise _fail("remote.enableThinking", "absent unless remote.api is chat_completions")
        if not isinstance(remote["enableThinking"], bool):
            raise _fail("remote.enableThinking", "true or false")
        if "thinking" in remote:
            raise _fail("remote.enableThinking", "absent when remote.thinking is set (they are exclusive)")
    if "capability" in remote:
        _validate_capability(remote["capability"])
    if "proxy" in remote:
        proxy = remote["proxy"]
        if not isinstance(proxy, dict) or proxy.get("mode") not in ("direct", "env", "custom"):
            raise _fail("remote.proxy.mode", "one of direct, env, custom")
        if proxy["mode"] == "custom":
            _keys(proxy, "remote.proxy", ("mode", "urlEnv"), ("noProxy",))
            if not isinstance(proxy["urlEnv"], str) or not ENV_NAME_RE.match(proxy["urlEnv"]):
                raise _fail("remote.proxy.urlEnv", "an environment-variable name such as COMMON_MEMORY_PROXY_URL")
            if "noProxy" in proxy and not isinstance(proxy["noProxy"], str):
                raise _fail("remote.proxy.noProxy", "a string of comma-separated bypass rules")
        else:
            _keys(proxy, "remote.proxy", ("mode",), ())
    if "caFileEnv" in remote:
        if not isinstance(remote["caFileEnv"], str) or not ENV_NAME_RE.match(remote["caFileEnv"]):
            raise _fail("remote.caFileEnv", "an environment-variable name such as COMMON_MEMORY_CA_FILE")
        if "proxy" not in remote:
            raise _fail("remote.caFileEnv", "used only together with an explicit remote.proxy mode")


def _validate_capability(cap: object) -> None:
    path = "remote.capability"
    if not isinstance(cap, dict) or cap.get("source") not in ("unknown/custom", "official-catalog"):
        raise _fail(f"{path}.source", "unknown/custom or official-catalog")
    if cap["source"] == "unknown/custom":
        _keys(cap, path, ("source", "contextWindow", "maxOutput"), ())
        if cap["contextWindow"] is not None or cap["maxOutput"] is not None:
            raise _fail(path, "{source: unknown/custom, contextWindow: null, maxOutput: null}")
    else:
        _keys(cap, path, ("source", "version", "digest", "contextWindow", "maxOutput"), ())
        if not isinstance(cap["version"], str) or not cap["version"]:
            raise _fail(f"{path}.version", "a non-empty catalog version")
        if not isinstance(cap["digest"], str) or not re.match(r"^[0-9a-f]{64}$", cap["digest"]):
            raise _fail(f"{path}.digest", "64 lowercase hex digits")
        _int(cap, "contextWindow", path, 1)
        _int(cap, "maxOutput", path, 1)


def validate(config: object) -> dict:
    """Validate a parsed configuration strictly; return it unchanged or raise CONFIG_INVALID."""
    _keys(config, "", ("schemaVersion", "dataRoot", "disclosure", "writableScopes", "scheduler"),
          ("remote", "sessionCache"))
    assert isinstance(config, dict)
    if config["schemaVersion"] != SCHEMA_VERSION or not _is_int(config["schemaVersion"]):
        raise ConfigError(
            "UNSUPPORTED_CONFIG_VERSION",
            f"config.json schemaVersion must be {SCHEMA_VERSION}; older layouts are not migrated, "
            "move the file aside and run `cm config init`",
        )
    root = config["dataRoot"]
    if not isinstance(root, str) or "\x00" in root or not os.path.isabs(root):
        raise _fail("dataRoot", "an absolute path")
    if "remote" in config:
        _validate_remote(config["remote"])
    disclosure = _keys(config["disclosure"], "disclosure", ("enabled", "allowedScopes", "allowedProvenance"),
                       ("maxExcerptBytes", "maxCandidateBytes", "maxTotalBytes"))
    if not isinstance(disclosure["enabled"], bool):
        raise _fail("disclosure.enabled", "true or false")
    _string_list(disclosure["allowedScopes"], "disclosure.allowedScopes", SCOPE_RE, None,
                 "scopes (global or project:<id>)")
    _string_list(disclosure["allowedProvenance"], "disclosure.allowedProvenance", None, PROVENANCE,
                 "provenance classes (" + ", ".join(PROVENANCE) + ")")
    _int(disclosure, "maxExcerptBytes", "disclosure", 1)
    _int(disclosure, "maxCandidateBytes", "disclosure", 1)
    _int(disclosure, "maxTotalBytes", "disclosure", 1, nullable=True)
    _string_list(config["writableScopes"], "writableScopes", SCOPE_RE, None, "scopes (global or project:<id>)")
    scheduler = _keys(config["scheduler"], "scheduler", tuple(DEFAULT_SCHEDULER), ())
    for key in DEFAULT_SCHEDULER:
        _int(scheduler, key, "scheduler", 1)
    if "sessionCache" in config:
        cache = _keys(config["sessionCache"], "sessionCache", (), tuple(DEFAULT_SESSION_CACHE))
        _int(cache, "maxSessionBytes", "sessionCache", 1)
        _int(cache, "maxTotalBytes", "sessionCache", 1)
        _int(cache, "contextTailTurns", "sessionCache", 0, 1024)
    return config


def default_config(home: str) -> dict:
    """The configuration an install starts from: capture on, nothing disclosed beyond user turns."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "dataRoot": default_data_root(home),
        "disclosure": {"enabled": True, "allowedScopes": ["global"], "allowedProvenance": ["user_explicit"]},
        "writableScopes": ["global"],
        "scheduler": dict(DEFAULT_SCHEDULER),
    }


class Config:
    """A validated configuration plus where it came from."""

    __slots__ = ("home", "data", "exists")

    def __init__(self, home: str, data: dict, exists: bool) -> None:
        self.home = home
        self.data = data
        self.exists = exists

    @property
    def data_root(self) -> str:
        return os.path.normpath(self.data["dataRoot"])

    @property
    def remote(self) -> dict | None:
        return self.data.get("remote")

    @property
    def allowed_scopes(self) -> list[str]:
        return list(self.data["disclosure"]["allowedScopes"])

    @property
    def session_cache(self) -> dict:
        merged = dict(DEFAULT_SESSION_CACHE)
        merged.update(self.data.get("sessionCache", {}))
        return merged


def load(home: str) -> Config:
    """Load and validate ``<home>/config.json``; the defaults if it does not exist."""
    path = config_path(home)
    raw = fsutil.read_regular_file(path, CONFIG_LIMIT, "config.json")
    if raw is None:
        return Config(home, default_config(home), exists=False)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError("CONFIG_INVALID", f"{path} is not valid UTF-8 JSON; fix it or rerun `cm config init --force`") from None
    return Config(home, validate(data), exists=True)


def save(home: str, data: dict) -> None:
    """Validate and publish ``config.json`` atomically (the home is created 0700 if needed)."""
    validate(data)
    fsutil.ensure_private_dir(home, "configuration home")
    body = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fsutil.write_atomic(config_path(home), body.encode("utf-8"))


def keep_aside(home: str) -> str:
    """Copy the current ``config.json`` to a new ``config.json.corrupt-<UTC time>``; returns its path."""
    import time

    raw = fsutil.read_regular_file(config_path(home), CONFIG_LIMIT, "config.json")
    if raw is None:
        raise ConfigError("CONFIG_MISSING", f"{config_path(home)} disappeared; rerun `cm config init`")
    stem = f"{config_path(home)}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    for n in range(100):
        target = stem if n == 0 else f"{stem}-{n}"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            fsutil.fsync_fd(fd)
        finally:
            os.close(fd)
        fsutil.fsync_dir(home)
        return target
    raise ConfigError("CONFIG_BACKUP_FAILED", f"too many {stem}* copies exist; remove old ones and retry")
