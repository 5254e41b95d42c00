"""Network settings of the configured model: route mode, custom proxy, bypass list and extra CA.

Contract:
- ``save`` validates everything before writing anything: a custom proxy URL must be an
  ``http://``, ``https://``, ``socks5://`` or ``socks5h://`` URL (SOCKS5 experimental) with a host
  and no path (credentials allowed), the bypass list
  must parse with the ``noproxy`` grammar, a CA file must be an absolute path to a regular file of
  at most 1 MiB holding PEM certificates that load, and in ``env`` mode the NO_PROXY the process
  environment or the private ``.env`` supplies must parse too. Errors are ``CmError`` naming the
  field, never its value (a proxy URL may carry a password).
- Private values use the reserved names only: the proxy URL is ``COMMON_MEMORY_PROXY_URL`` and the
  CA path ``COMMON_MEMORY_CA_FILE`` in the private ``.env``; ``config.json`` names them
  (``remote.proxy.urlEnv``, ``remote.caFileEnv``). Order: private values, then ``config.json``,
  then private values the new configuration no longer names are removed.
- ``describe`` reports the mode, whether a proxy URL / CA file is set, the bypass list and the
  route the client would take for the base URL — without opening a connection and without the
  proxy's credentials.
"""

from __future__ import annotations

import copy
import os
import ssl
from urllib.parse import urlsplit

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.errors import CmError

PROXY_ENV = "COMMON_MEMORY_PROXY_URL"
CA_ENV = "COMMON_MEMORY_CA_FILE"
CA_LIMIT = 1 << 20
MODES = ("direct", "env", "custom")


def check_proxy_url(url: str) -> str:
    from cmrunner.agentrt.netclient import PROXY_SCHEMES

    url = url.strip()
    parts = urlsplit(url)
    try:
        _ = parts.port
    except ValueError:
        raise CmError("PROXY_URL_INVALID", "the proxy URL has an invalid port") from None
    if parts.scheme.lower() not in PROXY_SCHEMES or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or any(c.isspace() for c in url):
        raise CmError("PROXY_URL_INVALID", "the proxy URL must look like http://host:port or socks5://host:port "
                                           "(user:password@ allowed; no path; PAC and NTLM are not supported)")
    return url


def check_no_proxy(text: str, where: str) -> str:
    from cmrunner.agentrt import noproxy

    try:
        noproxy.parse(text, where)
    except noproxy.NoProxyInvalid as exc:
        raise CmError("NO_PROXY_INVALID", exc.message) from None
    return text.strip()


def check_ca_file(path: str) -> str:
    path = path.strip()
    if not os.path.isabs(path):
        raise CmError("CA_FILE_INVALID", "the CA file must be an absolute path")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise CmError("CA_FILE_INVALID", "the CA file cannot be opened (missing, a link, or unreadable)") from None
    with os.fdopen(fd, "rb") as handle:
        import stat

        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise CmError("CA_FILE_INVALID", "the CA file is not a regular file")
        pem = handle.read(CA_LIMIT + 1)
    if len(pem) > CA_LIMIT:
        raise CmError("CA_FILE_INVALID", "the CA file is larger than 1 MiB")
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise CmError("CA_FILE_INVALID", "the CA file holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    try:
        ssl.create_default_context().load_verify_locations(cadata=pem.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        raise CmError("CA_FILE_INVALID", "the CA file's certificates do not load; export them again as PEM") from None
    return path


def _env_no_proxy(private: dict[str, str]) -> str:
    for source in (os.environ, private):
        for name in ("no_proxy", "NO_PROXY"):
            if name in source:
                return source[name]
    return ""


def save(home: str, mode: str, proxy_url: str | None = None, no_proxy: str = "", ca_file: str | None = None) -> dict:
    """Validate and save the network settings (see module contract); returns the new ``remote``."""
    cfg = config_mod.load(home)
    if not cfg.remote:
        raise CmError("UNCONFIGURED", "choose a provider and model first (Change Model / Provider)")
    if mode not in MODES:
        raise CmError("INVALID_MODE", "the network mode must be direct, env or custom")
    private = envfile.read(home)
    changes: dict[str, str | None] = {}
    proxy: dict = {"mode": mode}
    if mode == "custom":
        if proxy_url is None or not proxy_url.strip():
            if not private.get(PROXY_ENV):
                raise CmError("PROXY_URL_INVALID", "custom mode needs a proxy URL")
        else:
            changes[PROXY_ENV] = check_proxy_url(proxy_url)
        proxy["urlEnv"] = PROXY_ENV
        if no_proxy.strip():
            proxy["noProxy"] = check_no_proxy(no_proxy, "the bypass list")
    else:
        if no_proxy.strip():
            raise CmError("NO_PROXY_INVALID", "a bypass list belongs to custom mode; env mode uses NO_PROXY")
        if mode == "env":
            check_no_proxy(_env_no_proxy(private), "NO_PROXY")
        changes[PROXY_ENV] = None
    data = copy.deepcopy(cfg.data)
    remote = data["remote"]
    remote["proxy"] = proxy
    if ca_file is not None and ca_file.strip():
        changes[CA_ENV] = check_ca_file(ca_file)
        remote["caFileEnv"] = CA_ENV
    else:
        remote.pop("caFileEnv", None)
        changes[CA_ENV] = None
    config_mod.validate(data)
    envfile.update(home, {k: v for k, v in changes.items() if v is not None})
    config_mod.save(home, data)
    stale: dict[str, str | None] = {k: None for k, v in changes.items() if v is None and k in private}
    if stale:
        envfile.update(home, stale)
    return remote


def describe(home: str) -> dict:
    """Mode, private values present or not, bypass list and the resolved route (no connection)."""
    from cmrunner.agentrt.netclient import NetworkInputs, resolve_route

    cfg = config_mod.load(home)
    remote = cfg.remote
    if not remote:
        return {"configured": False}
    try:
        private = envfile.read(home)
    except CmError:
        private = {}
    proxy = remote.get("proxy")
    info: dict = {"configured": True, "mode": proxy["mode"] if proxy else "legacy",
                  "proxyUrlSet": bool(private.get(PROXY_ENV)), "noProxy": (proxy or {}).get("noProxy", ""),
                  "caFile": private.get(CA_ENV) if remote.get("caFileEnv") == CA_ENV else None}
    try:
        info["route"] = resolve_route(NetworkInputs.capture(remote, private, os.environ)).describe()
    except CmError as exc:
        info["routeError"] = f"{exc.code}: {getattr(exc, 'diagnostic', {}).get('reason', exc.message)}"
    return info
