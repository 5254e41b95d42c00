"""The outbound network client of one configured model: route, trust, timeouts, fixed origin.

Contract:
- ``NetworkInputs.capture(remote, private_env, process_env)`` snapshots everything that decides the
  route when the Memory Agent is constructed: the base URL, the proxy mode, the standard proxy
  variables of the process and of the private ``.env``, the custom proxy URL and the CA file path.
  Later changes to the environment do not move a running client.
- ``resolve_route(inputs)`` picks the route without opening a connection:
  ``direct`` ignores every proxy variable; ``env`` takes HTTPS_PROXY → HTTP_PROXY → ALL_PROXY (HTTP
  origins: HTTP_PROXY → ALL_PROXY), each group looked up in the process environment first and then
  in the private ``.env`` (lowercase beats uppercase within a source; a present empty value clears
  the group), and bypasses it by NO_PROXY (``noproxy``); ``custom`` takes the URL named by
  ``remote.proxy.urlEnv`` and its own ``noProxy``; no ``remote.proxy`` at all is the ``legacy``
  route, which reads only the process environment. A proxy URL is ``http``, ``https``,
  ``socks5`` or ``socks5h`` (``PROXY_SCHEMES``). A malformed bypass list, proxy URL or CA
  file raises ``AgentError(CONFIGURATION)`` with reason ``no_proxy_invalid``,
  ``proxy_config_invalid`` or ``ca_config_invalid``. The reserved names
  ``COMMON_MEMORY_PROXY_URL`` and ``COMMON_MEMORY_CA_FILE`` are read from the private ``.env``
  only; other ``urlEnv`` / ``caFileEnv`` names from the process environment only.
- ``ModelClient`` owns one ``httpx2.Client`` built lazily at the first request: the chosen route and
  nothing else (``trust_env`` off, so no other proxy, netrc or CA variable applies), TLS
  verification always on with the default trust plus the optional CA file (≤ 1 MiB, PEM) for this
  client only, redirects refused, and every request checked against the base URL's origin.
- ``ModelClient.stream(path, body, deadline, budget=None)`` POSTs one serialized request and
  yields its SSE events (``sse.decode``). Response headers must arrive within ``header_timeout``
  (30 s), the stream may not stall for ``idle_timeout`` (120 s), and a watchdog cuts the
  connection at the whole-attempt ``deadline`` (monotonic seconds). Bytes are counted as they
  arrive, before they are decoded: one event at most ``limits.EVENT_BYTE_LIMIT``, one response at
  most ``limits.RESPONSE_BYTE_LIMIT``, and the attempt's ``ByteBudget`` (``ATTEMPT_BYTE_LIMIT``)
  across its responses; excess is ``errors_map.too_large()``. Only an uncompressed body is asked
  for. Every failure becomes an ``AgentError`` through ``errors_map``; an error body is read at
  most 16 KiB / 2 s and then dropped, and a 429/503's ``Retry-After`` travels on the error. There
  are no retries here: all retries are the Writer's budget.
- An ``Exchange`` passed to ``stream`` records the response's status and every body byte
  received (an error body's kept bytes included) for the disclosure ledger; never the bytes.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from cmrunner.agentrt import errors_map, limits, noproxy, sse
from cmrunner.agentrt.interface import AgentError
from cmrunner.agentrt.limits import ERROR_BODY_LIMIT, ERROR_BODY_SECONDS

HEADER_TIMEOUT = 30.0
IDLE_TIMEOUT = 120.0
CA_FILE_LIMIT = 1 << 20
RESERVED_PROXY_URL = "COMMON_MEMORY_PROXY_URL"
RESERVED_CA_FILE = "COMMON_MEMORY_CA_FILE"
PROXY_GROUPS = ("https_proxy", "http_proxy", "all_proxy", "no_proxy")
# SOCKS5 (experimental, as the specification's custom proxy has it) goes through httpx2's own
# ``socks`` extra (socksio), which httpx2 imports only when such a proxy is used: never on a hook
# path, which does not import httpx2 at all. ``socks5h`` lets the proxy resolve the model's host.
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
USER_AGENT = "cm-memory-agent/0.1"
# What the route may read from the private .env (besides the key): the proxy variables, either case,
# and the reserved proxy URL and CA file names.
PRIVATE_ROUTE_NAMES = frozenset({n for g in PROXY_GROUPS for n in (g, g.upper())} | {RESERVED_PROXY_URL,
                                                                                        RESERVED_CA_FILE})


def _config_error(reason: str) -> AgentError:
    return errors_map.failure("CONFIGURATION", "network_config", reason, False)


class NetworkInputs:
    """The routing inputs of one model, frozen when the agent is constructed."""

    __slots__ = ("base_url", "mode", "proxy", "ca_file_env", "private", "process")

    def __init__(self, base_url: str, mode: str, proxy: dict, ca_file_env: str | None,
                 private: dict[str, str], process: dict[str, str]) -> None:
        self.base_url = base_url
        self.mode = mode
        self.proxy = proxy
        self.ca_file_env = ca_file_env
        self.private = private
        self.process = process

    @classmethod
    def capture(cls, remote: Mapping, private_env: Mapping[str, str],
                process_env: Mapping[str, str]) -> NetworkInputs:
        proxy = dict(remote.get("proxy") or {})
        mode = proxy.get("mode", "legacy")
        wanted = set(PRIVATE_ROUTE_NAMES)
        for name in (proxy.get("urlEnv"), remote.get("caFileEnv")):
            if name:
                wanted.add(name)
        private = {k: v for k, v in private_env.items() if k in wanted}
        process = {k: v for k, v in process_env.items() if k in wanted}
        return cls(remote["baseUrl"].rstrip("/"), mode, proxy, remote.get("caFileEnv"), private, process)

    def named_value(self, name: str, reserved: str) -> str | None:
        """A custom proxy URL or CA path: reserved names from the private .env, others from the process."""
        source = self.private if name == reserved else self.process
        value = source.get(name)
        return value.strip() or None if value is not None else None


class Route:
    """Where requests go: ``proxy_url`` (private, may hold credentials) or direct, and why."""

    __slots__ = ("mode", "proxy_url", "reason")

    def __init__(self, mode: str, proxy_url: str | None, reason: str) -> None:
        self.mode = mode
        self.proxy_url = proxy_url
        self.reason = reason

    @property
    def via_proxy(self) -> bool:
        return self.proxy_url is not None

    def describe(self) -> dict:
        """A printable description: the proxy's scheme, host and port only, never its credentials."""
        info: dict = {"mode": self.mode, "via": "proxy" if self.proxy_url else "direct", "reason": self.reason}
        if self.proxy_url:
            parts = urlsplit(self.proxy_url)
            host = parts.hostname or ""
            host = f"[{host}]" if ":" in host else host
            info["proxy"] = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
            info["proxyCredentials"] = parts.username is not None or parts.password is not None
        return info


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise _config_error("proxy_config_invalid") from None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def _group(name: str, inputs: NetworkInputs, process_only: bool) -> str | None:
    sources = (inputs.process,) if process_only else (inputs.process, inputs.private)
    for source in sources:
        if name in source or name.upper() in source:
            value = source[name] if name in source else source[name.upper()]
            return value.strip() or None
    return None


def _check_proxy_url(url: str) -> str:
    if "://" not in url:
        url = "http://" + url  # curl's convention for a scheme-less proxy variable
    parts = urlsplit(url)
    try:
        _ = parts.port  # raises on a port outside 0-65535
    except ValueError:
        raise _config_error("proxy_config_invalid") from None
    if parts.scheme.lower() not in PROXY_SCHEMES or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment:
        raise _config_error("proxy_config_invalid")
    return url


def resolve_route(inputs: NetworkInputs) -> Route:
    """The route for the model's origin (see module contract); no connection is opened."""
    scheme, host, port = _origin(inputs.base_url)
    if inputs.mode == "direct":
        return Route("direct", None, "direct mode ignores proxy variables")
    if inputs.mode == "custom":
        url = inputs.named_value(inputs.proxy.get("urlEnv", ""), RESERVED_PROXY_URL)
        if url is None:
            raise _config_error("proxy_config_invalid")
        url = _check_proxy_url(url)
        bypass = noproxy.parse(inputs.proxy.get("noProxy", ""), "remote.proxy.noProxy")
        if bypass.matches(host, port):
            return Route("custom", None, "remote.proxy.noProxy bypass")
        return Route("custom", url, "custom proxy")
    process_only = inputs.mode == "legacy"
    chain = ("https_proxy", "http_proxy", "all_proxy") if scheme == "https" else ("http_proxy", "all_proxy")
    bypass = noproxy.parse(_group("no_proxy", inputs, process_only) or "", "NO_PROXY")
    for name in chain:
        url = _group(name, inputs, process_only)
        if url is not None:
            if bypass.matches(host, port):
                return Route(inputs.mode, None, "NO_PROXY bypass")
            return Route(inputs.mode, _check_proxy_url(url), name.upper())
    return Route(inputs.mode, None, "no proxy variable is set")


def ssl_context(inputs: NetworkInputs) -> ssl.SSLContext:
    """Default trust plus the optional CA file, verification and hostname checks always on."""
    import httpx2

    ctx = httpx2.create_ssl_context(verify=True, trust_env=False)
    if inputs.ca_file_env:
        path = inputs.named_value(inputs.ca_file_env, RESERVED_CA_FILE)
        if path is None or not os.path.isabs(path):
            raise _config_error("ca_config_invalid")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as handle:
                pem = handle.read(CA_FILE_LIMIT + 1)
        except OSError:
            raise _config_error("ca_config_invalid") from None
        if len(pem) > CA_FILE_LIMIT or b"-----BEGIN CERTIFICATE-----" not in pem:
            raise _config_error("ca_config_invalid")
        try:
            ctx.load_verify_locations(cadata=pem.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError, ValueError):
            raise _config_error("ca_config_invalid") from None
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _Watchdog:
    """Cuts the response's socket when the attempt deadline passes mid-stream."""

    def __init__(self, response: object, deadline: float) -> None:
        self.fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire, (response,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, response: object) -> None:
        self.fired = True
        stream = getattr(response, "extensions", {}).get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                # The plain socket's shutdown wakes a reader blocked in recv, TLS or not.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


def deadline_failure() -> AgentError:
    return errors_map.failure("TIMEOUT", "model_output", "timeout", True)


class ByteBudget:
    """The bytes one attempt may still receive, across all of its responses."""

    __slots__ = ("remaining",)

    def __init__(self, limit: int | None = None) -> None:
        self.remaining = limits.ATTEMPT_BYTE_LIMIT if limit is None else limit

    def spend(self, count: int) -> None:
        self.remaining -= count
        if self.remaining < 0:
            raise errors_map.too_large()


class Exchange:
    """What one request did on the wire, for the ledger: the body bytes sent (0 when no connection
    took it), the HTTP status (``None`` when no response arrived) and the body bytes received,
    error bodies included."""

    __slots__ = ("sent", "status", "received")

    def __init__(self) -> None:
        self.sent = 0  # the body's bytes once the request was handed to a connection
        self.status: int | None = None
        self.received = 0

    @property
    def accepted(self) -> bool:
        """The provider answered 2xx: it took the request and may bill it."""
        return self.status is not None and 200 <= self.status < 300


class ModelClient:
    """One model's client (see module contract); build errors surface at the first request."""

    def __init__(self, inputs: NetworkInputs, api_key: str, header_timeout: float = HEADER_TIMEOUT,
                 idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.inputs = inputs
        self._api_key = api_key
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.origin = _origin(inputs.base_url)
        self._client: object | None = None
        self._route: Route | None = None
        self._lock = threading.Lock()

    @property
    def route(self) -> Route:
        if self._route is None:
            try:
                self._route = resolve_route(self.inputs)
            except noproxy.NoProxyInvalid:
                raise _config_error("no_proxy_invalid") from None
        return self._route

    def _check_origin(self, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)) != self.origin:
            raise _config_error("proxy_config_invalid")

    def client(self) -> object:
        with self._lock:
            if self._client is None:
                import httpx2

                route = self.route
                verify = ssl_context(self.inputs)
                self._client = httpx2.Client(
                    proxy=route.proxy_url, trust_env=False, verify=verify, follow_redirects=False,
                    limits=httpx2.Limits(max_connections=2, max_keepalive_connections=1),
                    headers={"User-Agent": USER_AGENT}, event_hooks={"request": [self._check_origin]},
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()  # type: ignore[attr-defined]
                self._client = None

    def _read_error_body(self, response: object) -> bytes:
        response.request.extensions.get("timeout", {})["read"] = ERROR_BODY_SECONDS  # type: ignore[attr-defined]
        started, data = time.monotonic(), b""
        try:
            for chunk in response.iter_raw():  # type: ignore[attr-defined]
                data += chunk
                if len(data) >= ERROR_BODY_LIMIT or time.monotonic() - started > ERROR_BODY_SECONDS:
                    break
        except Exception:
            pass
        return data[:ERROR_BODY_LIMIT]

    @contextmanager
    def stream(self, path: str, body: bytes, deadline: float, budget: ByteBudget | None = None,
               exchange: Exchange | None = None) -> Iterator[Iterator[object]]:
        """POST ``body`` to ``base_url + path``; yields an iterator of SSE events (see contract).
        ``exchange`` is filled in as the response arrives (status, bytes received)."""
        import httpx2

        exchange = exchange or Exchange()

        client = self.client()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise deadline_failure()
        first = min(self.header_timeout, remaining)
        request = client.build_request(  # type: ignore[attr-defined]
            "POST", self.inputs.base_url + path, content=body,
            headers={"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json",
                     "Accept": "text/event-stream", "Accept-Encoding": "identity"},
            timeout=httpx2.Timeout(first, connect=first, write=first, pool=first),
        )
        via_proxy = self.route.via_proxy
        exchange.sent = len(body)
        try:
            response = client.send(request, stream=True)  # type: ignore[attr-defined]
        except AgentError:
            exchange.sent = 0  # refused before it left (the origin check)
            raise
        except httpx2.HTTPError as exc:
            if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ProxyError)):
                exchange.sent = 0  # no connection took the body
            if time.monotonic() >= deadline:
                raise deadline_failure() from None
            raise errors_map.from_transport(exc, via_proxy) from None
        watchdog: _Watchdog | None = None
        exchange.status = response.status_code
        try:
            if not 200 <= response.status_code < 300:
                error_body = self._read_error_body(response)
                exchange.received += len(error_body)
                raise errors_map.from_http(response.status_code, error_body, via_proxy,
                                           response.headers.get("retry-after"))
            # The header timeout bounded the wait for headers; from here each read may wait the
            # idle timeout (the body reads take this value when they start).
            timeouts = response.request.extensions.get("timeout")
            if isinstance(timeouts, dict):
                timeouts["read"] = self.idle_timeout
            watchdog = _Watchdog(response, deadline)
            yield self._events(response, watchdog, deadline, via_proxy, budget or ByteBudget(), exchange)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            response.close()

    @staticmethod
    def _metered(response: object, watchdog: _Watchdog, deadline: float, budget: ByteBudget,
                 exchange: Exchange) -> Iterator[bytes]:
        """The body's chunks, each counted against the response and attempt caps before use."""
        received = 0
        for chunk in response.iter_bytes():  # type: ignore[attr-defined]
            received += len(chunk)
            exchange.received += len(chunk)
            if received > limits.RESPONSE_BYTE_LIMIT:
                raise errors_map.too_large()
            budget.spend(len(chunk))
            if watchdog.fired or time.monotonic() >= deadline:
                raise deadline_failure()
            yield chunk

    def _events(self, response: object, watchdog: _Watchdog, deadline: float, via_proxy: bool,
                budget: ByteBudget, exchange: Exchange) -> Iterator[object]:
        import httpx2

        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()  # type: ignore[attr-defined]
        if kind != "text/event-stream":
            raise errors_map.failure("INVALID_RESPONSE", "response_envelope", "invalid_envelope", True)
        try:
            for event in sse.decode(self._metered(response, watchdog, deadline, budget, exchange),
                                    limits.EVENT_BYTE_LIMIT):
                if watchdog.fired or time.monotonic() >= deadline:
                    raise deadline_failure()
                yield event
        except sse.EventTooLarge:
            raise errors_map.too_large() from None
        except httpx2.HTTPError as exc:
            if watchdog.fired or time.monotonic() >= deadline:
                raise deadline_failure() from None
            raise errors_map.from_transport(exc, via_proxy, after_headers=True) from None
