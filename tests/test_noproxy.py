"""NO_PROXY grammar: hostnames, wildcards, IP literals with ports, CIDRs, and strict rejection."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, strategies as st

from cmrunner.agentrt import noproxy


@pytest.mark.parametrize("rule", ["example.com", ".example.com", "*.example.com", "EXAMPLE.com.", "example.com,"])
@pytest.mark.parametrize(("host", "expected"), [
    ("example.com", True), ("api.example.com", True), ("a.b.example.com", True), ("Example.COM.", True),
    ("notexample.com", False), ("example.org", False), ("com", False),
])
def test_hostname_forms_cover_apex_and_subdomains(rule, host, expected):
    assert noproxy.parse(rule).matches(host, 443) is expected


@pytest.mark.parametrize(("rules", "host", "port", "expected"), [
    ("example.com:8443", "example.com", 8443, True),
    ("example.com:8443", "example.com", 443, False),
    ("example.com:443", "api.example.com", 443, True),  # the caller passes the effective port
    ("127.0.0.1", "127.0.0.1", 9999, True),
    ("127.0.0.1:8080", "127.0.0.1", 8081, False),
    ("[::1]:443", "::1", 443, True),
    ("[::1]:443", "[::1]", 80, False),
    ("::1", "[0:0:0:0:0:0:0:1]", 1, True),  # IP spelling is normalised
    ("[2001:db8::1]", "2001:0db8:0:0:0:0:0:1", 443, True),
    ("localhost", "127.0.0.1", 80, False),  # no DNS: a name never means an address
    ("127.0.0.1", "localhost", 80, False),
    ("10.0.0.0/8", "10.200.3.4", 443, True),
    ("10.0.0.0/8", "11.0.0.1", 443, False),
    ("10.0.0.0/8", "ten.example", 443, False),  # CIDRs match literal endpoints only
    ("2001:db8::/32", "2001:db8:ffff::1", 443, True),
    ("2001:db8::/32", "10.0.0.1", 443, False),
    ("0.0.0.0/0", "8.8.8.8", 443, True),
    ("0.0.0.0/0", "example.com", 443, False),  # not global *
    ("0.0.0.0/0", "::1", 443, False),  # same family only
    ("::ffff:0:0/96", "10.0.0.1", 443, False),
    ("10.1.2.3/8", "10.9.9.9", 443, True),  # host bits are ignored, as curl and Go do
    ("bücher.example", "xn--bcher-kva.example", 443, True),  # IDNA
    ("xn--bcher-kva.example", "BÜCHER.example", 443, True),
    ("a.example b.example\tc.example", "b.example", 443, True),  # whitespace separates too
    ("foo.example, *", "anything.invalid", 1, True),  # a standalone * anywhere
    ("", "example.com", 443, False),
])
def test_matching(rules, host, port, expected):
    assert noproxy.parse(rules).matches(host, port) is expected


@pytest.mark.parametrize("entry", [
    "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/-1", "10.0.0.0/", "/8", "10.0.0.0/8/9", "10.0.0.0/08x",
    "[10.0.0.0]/8", "[2001:db8::]/32", "10.0.0.0/8:80", "fe80::1%eth0/64", "fe80::1%eth0", "[fe80::1%eth0]",
    "http://proxy.example", "example.com/path", "*example.com", "foo.*.example", "*.", "*.*", ".", "..example",
    "example..com", "-bad.example", "bad-.example", "example.com:0", "example.com:65536", "example.com:http",
    "[::1]:", "[::1]x", "[127.0.0.1]", "10.0.0.256", "010.0.0.1", "a" * 64 + ".example",
    "ex ample.com:99999",
])
def test_malformed_entries_fail_with_a_redacted_error(entry):
    with pytest.raises(noproxy.NoProxyInvalid) as caught:
        noproxy.parse(f"ok.example, {entry}")
    error = caught.value
    assert error.code == "CONFIGURATION" and error.reason == "no_proxy_invalid"
    # The message is the fixed template for the entry's position: no entry text can be in it.
    templates = {noproxy.NoProxyInvalid(n, "NO_PROXY").message for n in (2, 3)}
    assert error.message in templates


def test_error_names_the_bypass_list_it_came_from():
    with pytest.raises(noproxy.NoProxyInvalid) as caught:
        noproxy.parse("10.0.0.0/33", "remote.proxy.noProxy")
    assert caught.value.message.startswith("remote.proxy.noProxy entry 1 ")


@given(st.ip_addresses(v=4), st.integers(0, 32), st.ip_addresses(v=4))
def test_ipv4_cidr_agrees_with_ipaddress(network_address, prefix, probe):
    network = ipaddress.ip_network(f"{network_address}/{prefix}", strict=False)
    rules = noproxy.parse(f"{network_address}/{prefix}")
    assert rules.matches(str(probe), 443) is (probe in network)


@given(st.ip_addresses(v=6), st.integers(0, 128), st.ip_addresses(v=6))
def test_ipv6_cidr_agrees_with_ipaddress(network_address, prefix, probe):
    network = ipaddress.ip_network(f"{network_address}/{prefix}", strict=False)
    rules = noproxy.parse(f"{network_address}/{prefix}")
    assert rules.matches(f"[{probe}]", 443) is (probe in network)


@given(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9](\.[a-z][a-z0-9]{0,8}){1,3}", fullmatch=True))
def test_every_form_of_a_hostname_rule_matches_its_subdomains(name):
    for rule in (name, "." + name, "*." + name, name.upper() + "."):
        rules = noproxy.parse(rule)
        assert rules.matches(name, 443) and rules.matches("x." + name, 80)
        assert not rules.matches("x" + name, 443)
