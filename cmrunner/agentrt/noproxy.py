"""NO_PROXY (and custom ``noProxy``) bypass rules: the specification's grammar, strictly parsed.

Contract:
- ``parse(text)`` splits on commas and whitespace and accepts, in any order:
  ``*`` (bypass everything); a hostname ``example.com``, ``.example.com`` or ``*.example.com`` (all
  three mean the apex plus every subdomain); an IPv4 literal; an IPv6 literal, bare or in brackets;
  any hostname or IP literal with ``:port`` (IPv6 only in brackets); and IP-literal CIDRs such as
  ``10.0.0.0/8`` or ``2001:db8::/32`` (prefix 0–32 / 0–128, no brackets, ports or zone ids).
- Anything else — a malformed CIDR, a URL or path, a wildcard other than a leading ``*.``, an empty
  label, a bad port, a zone id — raises ``NoProxyInvalid`` (diagnostic reason ``no_proxy_invalid``)
  naming only the entry's position: nothing is silently ignored and no entry text is echoed.
- ``NoProxy.matches(host, port)`` compares a request origin after normalising case, IDNA, a
  trailing dot and IP spelling. A rule without a port matches every port; a rule with a port
  matches the origin's effective port (the caller passes 443/80 when the URL omits it). No DNS is
  done: hostname rules never match IP literals, ``localhost`` is not ``127.0.0.1``, and CIDRs match
  only literal endpoints of their own address family. ``0.0.0.0/0`` is therefore not ``*``.
Decision where the specification is silent: a CIDR with host bits set (``10.1.2.3/8``) is accepted
as its network, as curl and Go do.
"""

from __future__ import annotations

import ipaddress
import re

from cmrunner.core.errors import CmError

_SPLIT = re.compile(r"[,\s]+")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_PORT = re.compile(r"^[0-9]{1,5}$")
_PREFIX = re.compile(r"^[0-9]{1,3}$")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class NoProxyInvalid(CmError):
    """A bypass list has an entry outside the supported grammar (reason ``no_proxy_invalid``)."""

    def __init__(self, position: int, where: str) -> None:
        super().__init__("CONFIGURATION", f"{where} entry {position} is not a supported bypass rule "
                                          "(hostnames, .domain, *.domain, IP literals with optional ports, "
                                          "IP CIDRs or *); fix it or remove it")
        self.reason = "no_proxy_invalid"


def normalize_hostname(host: str) -> str | None:
    """Lower-case ASCII (IDNA for non-ASCII) without a trailing dot, or ``None`` if not a hostname."""
    if host.endswith("."):
        host = host[:-1]
    if not host or len(host) > 253:
        return None
    if not host.isascii():
        try:
            import idna

            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            return None
    host = host.lower()
    labels = host.split(".")
    if any(not _LABEL.match(label) for label in labels):
        return None
    if labels[-1].isdigit():
        return None  # a numeric last label is a broken IP literal, not a hostname
    return host


def _port(text: str) -> int | None:
    if not _PORT.match(text):
        return None
    value = int(text)
    return value if 1 <= value <= 65535 else None


def _ip(text: str) -> IpAddress | None:
    if "%" in text:
        return None  # zone ids never match anything a client could route to
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class NoProxy:
    """A parsed bypass list (see module contract)."""

    def __init__(self, everything: bool, names: list[tuple[str, int | None]],
                 addresses: list[tuple[IpAddress, int | None]], networks: list[IpNetwork]) -> None:
        self.everything = everything
        self.names = names
        self.addresses = addresses
        self.networks = networks

    def __bool__(self) -> bool:
        return self.everything or bool(self.names or self.addresses or self.networks)

    def matches(self, host: str, port: int) -> bool:
        """Whether a request to ``host:port`` (effective port) bypasses the proxy."""
        if self.everything:
            return True
        bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        address = _ip(bare)
        if address is not None:
            if any(a == address and p in (None, port) for a, p in self.addresses):
                return True
            return any(n.version == address.version and address in n for n in self.networks)
        name = normalize_hostname(bare)
        if name is None:
            return False
        return any((name == rule or name.endswith("." + rule)) and p in (None, port) for rule, p in self.names)


def _cidr(entry: str) -> IpNetwork | None:
    address, _, prefix = entry.partition("/")
    if "/" in prefix or not _PREFIX.match(prefix) or "[" in address or "%" in address:
        return None
    ip = _ip(address)
    if ip is None or int(prefix) > ip.max_prefixlen:
        return None
    return ipaddress.ip_network(f"{ip}/{int(prefix)}", strict=False)


def parse(text: str, where: str = "NO_PROXY") -> NoProxy:
    """Parse a bypass list; raises ``NoProxyInvalid`` on the first unsupported entry."""
    everything = False
    names: list[tuple[str, int | None]] = []
    addresses: list[tuple[IpAddress, int | None]] = []
    networks: list[IpNetwork] = []
    for position, entry in enumerate((e for e in _SPLIT.split(text.strip()) if e), start=1):
        if entry == "*":
            everything = True
            continue
        if "://" in entry or entry.count("/") > 1:
            raise NoProxyInvalid(position, where)
        if "/" in entry:
            network = _cidr(entry)
            if network is None:
                raise NoProxyInvalid(position, where)
            networks.append(network)
            continue
        if entry.startswith("["):
            match = re.match(r"^\[([^\]]+)\](?::([^:]+))?$", entry)
            ip = _ip(match.group(1)) if match else None
            port = _port(match.group(2)) if match and match.group(2) is not None else None
            if ip is None or ip.version != 6 or (match and match.group(2) is not None and port is None):
                raise NoProxyInvalid(position, where)
            addresses.append((ip, port))
            continue
        if entry.count(":") >= 2:  # a bare IPv6 literal: ports need brackets
            ip = _ip(entry)
            if ip is None or ip.version != 6:
                raise NoProxyInvalid(position, where)
            addresses.append((ip, None))
            continue
        host, colon, port_text = entry.partition(":")
        port = None
        if colon:
            port = _port(port_text)
            if port is None:
                raise NoProxyInvalid(position, where)
        ip = _ip(host)
        if ip is not None:
            addresses.append((ip, port))
            continue
        if host.startswith("*."):
            host = host[2:]
        elif host.startswith("."):
            host = host[1:]
        name = normalize_hostname(host) if "*" not in host else None
        if name is None:
            raise NoProxyInvalid(position, where)
        names.append((name, port))
    return NoProxy(everything, names, addresses, networks)
