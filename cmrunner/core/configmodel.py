"""The pydantic model of ``config.json`` (``schemaVersion: 2``): the one validator of the file.

Contract:
- ``ConfigFile`` is strict: unknown keys are refused, nothing is coerced (``true`` is not an
  integer, ``"1"`` is not a number), ranges, enums and patterns are the reference's (Appendix A).
  Its attributes are typed, snake_case names of the camelCase keys.
- ``validate`` raises ``ConfigError`` with the codes and one-line messages cm has always used:
  ``UNSUPPORTED_CONFIG_VERSION`` for any ``schemaVersion`` but the integer 2, else
  ``CONFIG_INVALID`` "config.json field '<dotted path>' must be <what is accepted>; …".
- One error is reported, the first in this order: at each level of the file, unknown keys (in the
  file's order), then missing required keys, then each field in declaration order (a nested
  section is checked completely before the next field). Cross-field rules (``reasoningEffort``
  only with ``api: responses``, …) are checked on the field they forbid, after the fields they
  depend on, so they too name that field. A list is scanned in order: its first malformed or
  repeated item decides the message.
- ``validate`` returns its input unchanged: the file keeps its keys, order and values.
Never on the hook path (pydantic costs tens of milliseconds to import): hooks read the
pre-validated cache ``cmrunner.core.config`` keeps, and come here only when it is stale.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from cmrunner.core import scopes
from cmrunner.core.configdefs import (
    AGENT_CLIS,
    APIS,
    DEFAULT_SCHEDULER,
    DEVICE_NAME_PATTERN,
    EFFORTS,
    MAX_SAFE_INT,
    PRESETS,
    PROVENANCE,
    PROVIDERS,
    SCHEMA_VERSION,
)
from cmrunner.core.errors import ConfigError

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_URL_RE = re.compile(r"^https?://[^\s/@]+(/[^\s]*)?$")
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_DEVICE_RE = re.compile(rf"^{DEVICE_NAME_PATTERN}\Z")  # \Z: no trailing newline slips in


class Expect:
    """Field metadata: what the error message says the field must be."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _refuse(expected: str, sub: str = "") -> PydanticCustomError:
    """An error whose message is not the field's usual one; ``sub`` names a child key to blame."""
    return PydanticCustomError("cm_config", "{expected}", {"expected": expected, "sub": sub})


def _not_null(value: object) -> object:
    # Optional keys may be absent, but an explicit null is a wrong type unless the field allows it.
    if value is None:
        raise ValueError("null")
    return value


def _range(lo: int, hi: int = MAX_SAFE_INT, nullable: bool = False) -> Expect:
    return Expect(f"an integer from {lo} to {hi}" + (" or null" if nullable else ""))


def _one_of(accepted: tuple[str, ...]) -> Expect:
    return Expect("one of " + ", ".join(accepted))


def _matching(pattern: re.Pattern[str]) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError("pattern")
        return value
    return AfterValidator(check)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("blank")
    return value


def _distinct_items(ok: Callable[[object], bool], what: str) -> BeforeValidator:
    # One ordered pass, so the first bad item decides: a duplicate before a malformed item is
    # reported as the duplicate, as a reader scanning the list would find it.
    def check(value: object) -> object:
        if not isinstance(value, list) or not value:
            raise ValueError("empty")
        seen: set[object] = set()
        for item in value:
            if not isinstance(item, str) or not ok(item):
                raise ValueError("item")
            if item in seen:
                raise _refuse(f"a list of {what} without duplicates")
            seen.add(item)
        return value
    return BeforeValidator(check)


def _tagged(key: str, accepted: tuple[str, ...], sub_message: str) -> BeforeValidator:
    def check(value: object) -> object:
        if not isinstance(value, dict) or value.get(key) not in accepted:
            raise _refuse(sub_message, key)
        return value
    return BeforeValidator(check)


_NOT_NULL = BeforeValidator(_not_null)
_SCOPES = "scopes (global or project:<id>)"
_PROVENANCES = "provenance classes (" + ", ".join(PROVENANCE) + ")"

Api = Literal["responses", "chat_completions"]
Preset = Literal["deepseek", "qwen", "openai", "zhipu", "opencode-go", "kimi", "custom", "anthropic", "gemini",
                 "openrouter", "ollama", "lmstudio", "llamacpp", "vllm"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
Provenance = Literal["user_explicit", "agent_observation", "document_import", "conversation_context"]
Provider = Literal["openai-compatible", "agent-cli"]
AgentCli = Literal["claude-code", "codex", "gemini"]
if (get_args(Api), get_args(Preset), get_args(Effort), get_args(Provenance), get_args(Provider),
        get_args(AgentCli)) != (APIS, PRESETS, EFFORTS, PROVENANCE, PROVIDERS, AGENT_CLIS):
    raise ImportError("configmodel's enums differ from configdefs")  # one list of accepted values, two spellings

Count = Annotated[int, Field(ge=1, le=MAX_SAFE_INT), _range(1)]
OptionalCount = Annotated[Annotated[int, Field(ge=1, le=MAX_SAFE_INT)] | None, _NOT_NULL, _range(1)]
NullableCount = Annotated[Annotated[int, Field(ge=1, le=MAX_SAFE_INT)] | None, _range(1, nullable=True)]
ScopeList = Annotated[list[str], _distinct_items(scopes.is_scope, _SCOPES), Expect(f"a non-empty list of {_SCOPES}")]
ProvenanceList = Annotated[list[str], _distinct_items(PROVENANCE.__contains__, _PROVENANCES),
                           Expect(f"a non-empty list of {_PROVENANCES}")]


class _Section(BaseModel):
    """A strict section: camelCase keys, no extras, no coercion. ``ACCEPTED`` orders the message."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, alias_generator=to_camel)
    ACCEPTED: ClassVar[tuple[str, ...]] = ()


class Thinking(_Section):
    ACCEPTED = ("type",)
    type: Annotated[Literal["enabled", "disabled"], _one_of(("enabled", "disabled"))]


class UnknownCapability(_Section):
    ACCEPTED = ("source", "contextWindow", "maxOutput")
    source: Literal["unknown/custom"]
    context_window: Any
    max_output: Any

    @model_validator(mode="after")
    def _nulls(self) -> UnknownCapability:
        if self.context_window is not None or self.max_output is not None:
            raise _refuse("{source: unknown/custom, contextWindow: null, maxOutput: null}")
        return self


class CatalogCapability(_Section):
    ACCEPTED = ("source", "version", "digest", "contextWindow", "maxOutput")
    source: Literal["official-catalog"]
    version: Annotated[str, Field(min_length=1), Expect("a non-empty catalog version")]
    digest: Annotated[str, _matching(_DIGEST_RE), Expect("64 lowercase hex digits")]
    context_window: Count
    max_output: Count


class PlainProxy(_Section):
    ACCEPTED = ("mode",)
    mode: Literal["direct", "env"]


class CustomProxy(_Section):
    ACCEPTED = ("mode", "urlEnv", "noProxy")
    mode: Literal["custom"]
    url_env: Annotated[str, _matching(ENV_NAME_RE), Expect("an environment-variable name such as COMMON_MEMORY_PROXY_URL")]
    no_proxy: Annotated[str | None, _NOT_NULL, Expect("a string of comma-separated bypass rules")] = None


Capability = Annotated[UnknownCapability | CatalogCapability, Field(discriminator="source")]
Proxy = Annotated[PlainProxy | CustomProxy, Field(discriminator="mode")]


def _absolute(value: str) -> str:
    if "\x00" in value or not os.path.isabs(value):
        raise ValueError("relative")
    return value


# What only one kind of provider may hold (``Remote._by_provider``), in ``ACCEPTED`` order.
_NETWORK_ONLY = ("baseUrl", "apiKeyEnv", "api", "preset", "capability", "apiKeySource", "maxOutputTokens",
                 "reasoningEffort", "thinking", "enableThinking", "proxy", "caFileEnv")
_AGENT_ONLY = ("agent", "agentPath")


class Remote(_Section):
    ACCEPTED = ("provider", "baseUrl", "model", "apiKeyEnv", "api", "preset", "capability", "apiKeySource",
                "maxOutputTokens", "maxAgentTurns", "reasoningEffort", "thinking", "enableThinking", "proxy",
                "caFileEnv", "deadlineMs", "maxRequestBytes", "agent", "agentPath")
    provider: Annotated[Provider, _one_of(PROVIDERS)]
    # Required with openai-compatible, absent with agent-cli (``_by_provider``); model is optional there.
    base_url: Annotated[str | None, _NOT_NULL, _matching(_URL_RE),
                        Expect("an http:// or https:// URL without credentials or spaces")] = None
    model: Annotated[str | None, _NOT_NULL, AfterValidator(_non_blank), Expect("a non-empty model name")] = None
    api_key_env: Annotated[str | None, _NOT_NULL, _matching(ENV_NAME_RE),
                           Expect("an environment-variable name such as OPENAI_API_KEY")] = None
    api: Annotated[Api, _one_of(APIS)] = "responses"
    preset: Annotated[Preset | None, _NOT_NULL, _one_of(PRESETS)] = None
    api_key_source: Annotated[Literal["private-env"] | None, _NOT_NULL, _one_of(("private-env",))] = None
    max_output_tokens: NullableCount = None
    max_agent_turns: Annotated[Annotated[int, Field(ge=1, le=1024)] | None, _NOT_NULL, _range(1, 1024)] = None
    deadline_ms: Annotated[Annotated[int, Field(ge=1000, le=3600000)] | None, _NOT_NULL,
                           _range(1000, 3_600_000)] = None
    max_request_bytes: Annotated[Annotated[int, Field(ge=32768, le=67108864)] | None, _NOT_NULL,
                                 _range(32768, 67_108_864)] = None
    reasoning_effort: Annotated[Effort | None, _NOT_NULL, _one_of(EFFORTS)] = None
    thinking: Annotated[Thinking | None, _NOT_NULL, Expect("an object")] = None
    enable_thinking: Annotated[bool | None, _NOT_NULL, Expect("true or false")] = None
    capability: Annotated[Capability | None, _tagged("source", ("unknown/custom", "official-catalog"),
                                                        "unknown/custom or official-catalog")] = None
    proxy: Annotated[Proxy | None, _tagged("mode", ("direct", "env", "custom"), "one of direct, env, custom")] = None
    ca_file_env: Annotated[str | None, _NOT_NULL, _matching(ENV_NAME_RE), Expect("an environment-variable name such as COMMON_MEMORY_CA_FILE")] = None
    agent: Annotated[AgentCli | None, _NOT_NULL, _one_of(AGENT_CLIS)] = None
    agent_path: Annotated[str | None, _NOT_NULL, AfterValidator(_absolute),
                          Expect("an absolute path to the agent's executable")] = None

    @model_validator(mode="after")
    def _by_provider(self) -> Remote:
        present = {type(self).model_fields[name].alias for name in self.model_fields_set}
        if self.provider == "agent-cli":
            if "agent" not in present:
                raise _refuse("present (it is required)", "agent")
            extra = next((key for key in _NETWORK_ONLY if key in present), None)
            if extra is not None:
                raise _refuse("absent when remote.provider is agent-cli (the agent uses its own login)", extra)
            return self
        missing = next((key for key in ("baseUrl", "model", "apiKeyEnv") if key not in present), None)
        if missing is not None:
            raise _refuse("present (it is required)", missing)
        extra = next((key for key in _AGENT_ONLY if key in present), None)
        if extra is not None:
            raise _refuse("absent unless remote.provider is agent-cli", extra)
        return self

    @field_validator("reasoning_effort")
    @classmethod
    def _effort_needs_responses(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("api") != "responses":
            raise _refuse("absent unless remote.api is responses")
        return value

    @field_validator("thinking", "enable_thinking", mode="before")
    @classmethod
    def _thinking_needs_chat(cls, value: object, info: ValidationInfo) -> object:
        if info.data.get("api") != "chat_completions":
            raise _refuse("absent unless remote.api is chat_completions")
        return value

    @field_validator("enable_thinking")
    @classmethod
    def _enable_excludes_thinking(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        if info.data.get("thinking") is not None:
            raise _refuse("absent when remote.thinking is set (they are exclusive)")
        return value

    @field_validator("ca_file_env")
    @classmethod
    def _ca_needs_proxy(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("proxy") is None:
            raise _refuse("used only together with an explicit remote.proxy mode")
        return value


class Disclosure(_Section):
    ACCEPTED = ("enabled", "allowedScopes", "allowedProvenance", "maxExcerptBytes", "maxCandidateBytes",
                "maxTotalBytes")
    enabled: Annotated[bool, Expect("true or false")]
    allowed_scopes: ScopeList
    allowed_provenance: ProvenanceList
    max_excerpt_bytes: OptionalCount = None
    max_candidate_bytes: OptionalCount = None
    max_total_bytes: NullableCount = None


class Scheduler(_Section):
    ACCEPTED = tuple(DEFAULT_SCHEDULER)
    turn_threshold: Count
    byte_threshold: Count
    idle_ms: Count
    max_wait_ms: Count
    lease_ms: Count
    max_attempts: Count


class SessionCache(_Section):
    ACCEPTED = ("maxSessionBytes", "maxTotalBytes", "contextTailTurns")
    max_session_bytes: OptionalCount = None
    max_total_bytes: OptionalCount = None
    context_tail_turns: Annotated[Annotated[int, Field(ge=0, le=1024)] | None, _NOT_NULL, _range(0, 1024)] = None


class History(_Section):
    ACCEPTED = ("trashRetentionDays",)
    trash_retention_days: Annotated[Annotated[int, Field(ge=1, le=3650)] | None, _NOT_NULL, _range(1, 3650)] = None


class Sync(_Section):
    ACCEPTED = ("autoDeadlineSeconds",)
    auto_deadline_seconds: Annotated[Annotated[int, Field(ge=1, le=3600)] | None, _NOT_NULL, _range(1, 3600)] = None


SpendCap = Annotated[Annotated[int, Field(ge=0, le=MAX_SAFE_INT)] | None, _range(0, nullable=True)]


class Spend(_Section):
    ACCEPTED = ("requestsPerHour", "tokensPerDay", "tokensPerMonth")
    requests_per_hour: SpendCap = None
    tokens_per_day: SpendCap = None
    tokens_per_month: SpendCap = None


def _schema_version(value: object) -> object:
    if type(value) is not int or value != SCHEMA_VERSION:
        raise PydanticCustomError("cm_version", "unsupported")
    return value


class ConfigFile(_Section):
    ACCEPTED = ("schemaVersion", "dataRoot", "disclosure", "writableScopes", "scheduler", "remote", "sessionCache",
                "history", "spend", "sync", "deviceName")
    schema_version: Annotated[int, BeforeValidator(_schema_version)]
    data_root: Annotated[str, AfterValidator(_absolute), Expect("an absolute path")]
    remote: Annotated[Remote | None, _NOT_NULL, Expect("an object")] = None
    disclosure: Annotated[Disclosure, Expect("an object")]
    writable_scopes: ScopeList
    scheduler: Annotated[Scheduler, Expect("an object")]
    session_cache: Annotated[SessionCache | None, _NOT_NULL, Expect("an object")] = None
    history: Annotated[History | None, _NOT_NULL, Expect("an object")] = None
    spend: Annotated[Spend | None, _NOT_NULL, Expect("an object")] = None
    sync: Annotated[Sync | None, _NOT_NULL, Expect("an object")] = None
    device_name: Annotated[str | None, _NOT_NULL, _matching(_DEVICE_RE),
                           Expect("1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")] = None


# ---------------------------------------------------------------- errors


def _fail(path: str, expected: str) -> ConfigError:
    return ConfigError(
        "CONFIG_INVALID",
        f"config.json field '{path}' must be {expected}; edit the file or rerun `cm config init --force`",
    )


def _models(annotation: Any) -> list[type[_Section]]:
    """The sections a field's annotation can hold (several for a tagged union)."""
    if isinstance(annotation, type) and issubclass(annotation, _Section):
        return [annotation]
    found: list[type[_Section]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found += _models(arg)
    return found


def _tag_model(candidates: list[type[_Section]], tag: object) -> type[_Section] | None:
    for model in candidates:
        field = model.model_fields.get("source") or model.model_fields.get("mode")
        if field is not None and tag in getattr(field.annotation, "__args__", ()):
            return model
    return None


def _locate(error: Mapping[str, Any], data: object) -> tuple[tuple[tuple[int, int], ...], str, str]:
    """Where an error is (its rank, dotted path) and what the field there must be."""
    loc, kind = tuple(error["loc"]), error["type"]
    model: type[_Section] | None = ConfigFile
    node = data
    parts: list[str] = []
    rank: list[tuple[int, int]] = []
    expected = "an object"
    index = 0
    while index < len(loc) and model is not None:
        key = loc[index]
        index += 1
        if not isinstance(key, str):
            break  # an item of a list: the message names the whole list
        aliases = {info.alias: (n, info) for n, info in enumerate(model.model_fields.values())}
        parts.append(key)
        if key not in aliases:  # an unknown key: absent, whatever the value
            position = list(node).index(key) if isinstance(node, dict) and key in node else 0
            rank.append((0, position))
            expected = f"absent (unknown field; accepted fields: {', '.join(model.ACCEPTED)})"
            break
        n, info = aliases[key]
        rank.append((1 if kind == "missing" and index == len(loc) else 2, n))
        if kind == "missing" and index == len(loc):
            expected = "present (it is required)"
            break
        expected = next((m.text for m in info.metadata if isinstance(m, Expect)), "an object")
        node = node.get(key) if isinstance(node, dict) else None
        candidates = _models(info.annotation)
        if len(candidates) > 1:
            model = _tag_model(candidates, loc[index]) if index < len(loc) else None
            index += 1
        else:
            model = candidates[0] if candidates else None
        if model is not None:
            expected = "an object"
    if kind == "cm_config":
        ctx = error.get("ctx") or {}
        expected = str(ctx.get("expected", expected))
        if ctx.get("sub"):
            parts.append(str(ctx["sub"]))
    return tuple(rank), ".".join(parts), expected


def field_kind(key: str) -> str:
    """What the dotted camelCase ``key`` of config.json names (``cm config get|set``): ``"section"``,
    ``"list"`` or ``"value"``; a key the model does not have is ``CONFIG_KEY_UNKNOWN`` naming the
    fields accepted where it went wrong."""
    models: list[type[_Section]] = [ConfigFile]
    kind = "section"
    walked: list[str] = []
    for part in key.split("."):
        fields = {info.alias: info for model in models for info in model.model_fields.values()}
        if part not in fields:
            where = f"'{'.'.join(walked)}'" if walked else "config.json"
            accepted = list(dict.fromkeys(a for model in models for a in model.ACCEPTED))
            raise ConfigError("CONFIG_KEY_UNKNOWN", f"{where} has no field '{part}'"
                              + (f"; its fields: {', '.join(accepted)}" if accepted else " (it is a value)"))
        walked.append(part)
        annotation = fields[part].annotation
        models = _models(annotation)
        kind = "section" if models else "list" if get_origin(annotation) is list else "value"
    return kind


def validate(data: object) -> dict:
    """Validate a parsed configuration strictly; return it unchanged or raise (see module contract)."""
    parse(data)
    assert isinstance(data, dict)
    return data


def parse(data: object) -> ConfigFile:
    """The typed model of a parsed configuration, or the first error as a ``ConfigError``."""
    try:
        return ConfigFile.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    located = sorted((_locate(e, data) + (e["type"],) for e in errors), key=lambda item: item[0])
    _, path, expected, kind = located[0]
    if kind == "cm_version":
        raise ConfigError(
            "UNSUPPORTED_CONFIG_VERSION",
            f"config.json schemaVersion must be {SCHEMA_VERSION}; older layouts are not migrated, "
            "move the file aside and run `cm config init`",
        ) from None
    raise _fail(path, expected) from None
