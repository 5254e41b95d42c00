"""Provider and transport failures → ``AgentError`` with a stable code and a sanitised diagnostic.

Contract (reference-facts 4.5 and the diagnostic vocabulary of 3.5):
- ``failure(code, stage, reason, retryable, http_status=None, proxy_status=None)`` builds the one
  ``AgentError`` shape every part of the runtime raises. Its diagnostic is exactly
  ``{stage, reason, retryable, httpStatus?, proxyStatus?}`` with values from fixed vocabularies;
  its message is fixed text per code, so no provider body, key, proxy credential, URL or user text
  can reach ``jobs.diagnostic``, a log or the terminal.
- ``from_http(status, body, via_proxy, retry_after=None)``: 401/403 → ``AUTHENTICATION``; 429 →
  ``RATE_LIMITED``; ≥ 500 → ``UNAVAILABLE``; 407 from a proxy → ``PROXY_AUTHENTICATION``; anything
  else → ``INVALID_RESPONSE``. ``retryable`` is ``status == 429 or status >= 500``. The reason comes
  from the body's ``error.code`` when it is one of the known codes, else from the status; the body
  is parsed only within ``boundedjson``'s size and depth bounds (a deep body is just no hint).
  On 429 and 503 the ``Retry-After`` header (delta-seconds or an HTTP-date) becomes the error's
  ``retry_after_ms``, capped at ``limits.RETRY_AFTER_CAP_MS``; ``jobs.fail`` waits at least that.
- ``too_large()`` and ``too_deep()`` are the failures of a provider that exceeds ``limits``.
- ``from_transport(exc, via_proxy, after_headers)`` walks the exception's cause chain (at most 8
  links) for the allowlisted causes: proxy status, certificate verification, refused connection,
  DNS, timeouts; everything else is ``network_error``. A connection the model's own host refused
  (no proxy between) is ``MODEL_UNREACHABLE`` (reason ``connection_refused``, retryable): nothing
  listens at the base URL, typically a local model server that is not running; the same code the
  endpoint check gives before saving (``manage/providers.py``). Where it is shown, the URL comes
  from the configuration (``reasons.provider_fix``), never from this error. Proxy authentication and TLS verification
  are not retryable; a proxy answering < 500 is not either.
"""

from __future__ import annotations

import email.utils
import re
import socket
import ssl
import time

from cmrunner.agentrt import boundedjson, limits
from cmrunner.agentrt.interface import AgentError

STAGES = frozenset({"network_config", "network", "request", "http", "response_body", "response_envelope",
                    "model_output", "core_validation", "lease", "agent_cli"})

_MESSAGES = {
    "AUTHENTICATION": "the provider rejected the API key; fix the key in the private .env, then `cm retry` the job",
    "PROXY_AUTHENTICATION": "the proxy demanded authentication; fix the proxy credentials, then `cm retry` the job",
    "CONFIGURATION": "the model network settings are invalid; fix remote.proxy / caFileEnv or the private .env, "
                     "then `cm retry` the job",
    "RATE_LIMITED": "the provider is rate limiting; the job will be retried after a backoff",
    "UNAVAILABLE": "the provider or the network route is unavailable; the job will be retried, see `cm status`",
    "MODEL_UNREACHABLE": "nothing answered at the model's base URL; start the model server or fix remote.baseUrl, "
                         "see `cm status`",
    "TIMEOUT": "the model request timed out; the job will be retried, see `cm status`",
    "INVALID_RESPONSE": "the provider's reply could not be used; see the job's diagnostic in `cm status`",
    "MODEL_REFUSAL": "the model refused the maintenance task; the batch stays recoverable with `cm retry`",
    "AGENT_TURN_LIMIT": "the Memory Agent used all remote.maxAgentTurns without submitting; "
                        "raise the limit or `cm retry`",
    "MISSING_SUBMISSION": "the model ended without submitting a decision; the job will be retried",
    "SENSITIVE_CONTENT_REJECTED": "a request or result failed the sensitive-content check; nothing was sent or written",
    "REQUEST_TOO_LARGE": "the next request would exceed remote.maxRequestBytes; nothing was sent, see `cm status`",
    "ATTEMPT_BUDGET_EXHAUSTED": "the attempt sent its whole byte budget without a decision; nothing more was sent, "
                                "see `cm status`",
    "SPEND_CAP_REACHED": "a spend cap was reached before this request; the job waits, see `cm usage`",
    "AGENT_CLI_NOT_FOUND": "the agent CLI set in remote.agent was not found; install it or set remote.agentPath, "
                           "then `cm retry` the job",
    "AGENT_CLI_AUTH": "the agent CLI is not logged in (or its login expired); run it once and log in, "
                      "then `cm retry` the job",
    "AGENT_CLI_QUOTA": "the agent CLI reported a usage limit; the job will be retried after a backoff",
}

# JSON ``error.code`` values the reference maps exactly; anything else keeps the status's reason.
_BODY_CODES = {
    "invalid_json_schema": "invalid_schema",
    "model_not_found": "model_not_found",
    "unsupported_parameter": "unsupported_parameter",
    "context_length_exceeded": "context_length_exceeded",
    "insufficient_quota": "insufficient_quota",
    "invalid_api_key": "authentication",
}


def failure(code: str, stage: str, reason: str, retryable: bool, http_status: int | None = None,
            proxy_status: int | None = None) -> AgentError:
    assert stage in STAGES, stage
    diagnostic: dict = {"stage": stage, "reason": reason, "retryable": retryable}
    if http_status is not None and 100 <= http_status <= 599:
        diagnostic["httpStatus"] = http_status
    if proxy_status is not None and 100 <= proxy_status <= 599:
        diagnostic["proxyStatus"] = proxy_status
    message = _MESSAGES.get(code, "the Memory Agent attempt failed; see the job's diagnostic in `cm status`")
    return AgentError(code, message, retryable=retryable, diagnostic=diagnostic)


def body_reason(body: bytes) -> str | None:
    """The mapped reason of a provider error body, or ``None``; the body itself is dropped."""
    try:
        parsed = boundedjson.loads(body, limits.ERROR_BODY_LIMIT)
    except boundedjson.JsonRejected:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    if isinstance(code, str) and code in _BODY_CODES:
        return _BODY_CODES[code]
    message = error.get("message")
    if (error.get("type") == "invalid_request_error" and isinstance(message, str)
            and message.startswith("Invalid json schema:")):
        return "invalid_schema"
    return None


_DELTA_SECONDS = re.compile(r"^[0-9]{1,12}$")


def retry_after_ms(value: str | None, now: float) -> int | None:
    """A ``Retry-After`` value (delta-seconds or HTTP-date) as a wait in ms from ``now`` (epoch
    seconds), capped at ``limits.RETRY_AFTER_CAP_MS``; ``None`` when absent or unparsable."""
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.match(value):
        wait = int(value) * 1000
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None or when.tzinfo is None:
            return None  # an HTTP-date is always GMT; a date without a zone is not one
        wait = int((when.timestamp() - now) * 1000)
    return max(0, min(limits.RETRY_AFTER_CAP_MS, wait))


def from_http(status: int, body: bytes, via_proxy: bool, retry_after: str | None = None,
              now: float | None = None) -> AgentError:
    if status == 407 and via_proxy:
        return failure("PROXY_AUTHENTICATION", "network", "proxy_authentication", False, proxy_status=407)
    reason = body_reason(body)
    retryable = status == 429 or status >= 500
    if status in (401, 403):
        error = failure("AUTHENTICATION", "http", reason or "authentication", False, http_status=status)
    elif status == 429:
        error = failure("RATE_LIMITED", "http", reason or "rate_limited", True, http_status=status)
    elif status >= 500:
        error = failure("UNAVAILABLE", "http", reason or "provider_unavailable", True, http_status=status)
    else:
        error = failure("INVALID_RESPONSE", "http", reason or "request_rejected", retryable, http_status=status)
    if status in (429, 503):
        error.retry_after_ms = retry_after_ms(retry_after, time.time() if now is None else now)
    return error


def too_large() -> AgentError:
    return failure("INVALID_RESPONSE", "response_body", "body_too_large", True)


def too_deep() -> AgentError:
    return failure("INVALID_RESPONSE", "response_envelope", "json_too_deep", True)


def from_stream_error(error: object) -> AgentError:
    """An ``error`` object delivered inside a 200 stream (``response.failed``, an ``error`` event/chunk)."""
    code = error.get("code") if isinstance(error, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    if code in ("rate_limit_exceeded",) or kind == "rate_limit_error":
        return failure("RATE_LIMITED", "response_envelope", "rate_limited", True)
    if code in ("server_error", "overloaded") or kind in ("server_error", "overloaded_error"):
        return failure("UNAVAILABLE", "response_envelope", "provider_unavailable", True)
    if isinstance(code, str) and code in _BODY_CODES:
        return failure("INVALID_RESPONSE", "response_envelope", _BODY_CODES[code], False)
    return failure("INVALID_RESPONSE", "response_envelope", "request_rejected", False)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and len(seen) < 8 and node not in seen:
        seen.append(node)
        node = node.__cause__ or node.__context__
    return seen


def _proxy_status(exc: BaseException) -> int | None:
    # httpcore reports a refused CONNECT as ProxyError("<status> <reason>"); the status is all we keep.
    if type(exc).__name__ != "ProxyError":
        return None
    match = re.match(r"^\s*([1-5][0-9]{2})\b", str(exc))
    return int(match.group(1)) if match else None


def _socks_refused_credentials(exc: BaseException) -> bool:
    # httpcore's SOCKS5 handshake: a rejected username/password, or a proxy that asks for an
    # authentication method other than the one offered (credentials missing or not wanted).
    return type(exc).__name__ == "ProxyError" and str(exc).startswith(("Invalid username/password", "Requested "))


def from_transport(exc: BaseException, via_proxy: bool, after_headers: bool = False) -> AgentError:
    chain = _chain(exc)
    for link in chain:
        if _socks_refused_credentials(link):
            return failure("PROXY_AUTHENTICATION", "network", "proxy_authentication", False)
        status = _proxy_status(link)
        if status is not None:
            if status == 407:
                return failure("PROXY_AUTHENTICATION", "network", "proxy_authentication", False, proxy_status=407)
            return failure("UNAVAILABLE", "network", "proxy_http_error", status >= 500, proxy_status=status)
    names = {type(link).__name__ for link in chain}
    stage = "response_body" if after_headers else "network"
    if any(isinstance(link, ssl.SSLCertVerificationError) for link in chain):
        return failure("UNAVAILABLE", "network", "tls_verification_failed", False)
    if "ReadTimeout" in names and after_headers:
        return failure("TIMEOUT", stage, "stream_idle_timeout", True)
    if names & {"ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout"}:
        return failure("TIMEOUT", stage, "connection_timeout", True)
    if any(isinstance(link, socket.gaierror) for link in chain):
        return failure("UNAVAILABLE", "network", "proxy_dns_error" if via_proxy else "dns_error", True)
    if any(isinstance(link, ConnectionRefusedError) for link in chain):
        if via_proxy:
            return failure("UNAVAILABLE", "network", "proxy_unavailable", True)
        return failure("MODEL_UNREACHABLE", "network", "connection_refused", True)
    if after_headers:
        return failure("UNAVAILABLE", stage, "stream_interrupted", True)
    if via_proxy and "ConnectError" in names:
        return failure("UNAVAILABLE", "network", "proxy_unavailable", True)
    return failure("UNAVAILABLE", "network", "network_error", True)
