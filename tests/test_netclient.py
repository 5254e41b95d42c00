"""The outbound client: route selection, proxies with authentication, TLS with an extra CA, fixed origin."""

from __future__ import annotations

import json
import os
import socket

import pytest
from agent_support import configure_remote, job_row, make_agent, make_test_ca, policy, read_doc, run_once
from conftest import db_rows, hook_env, run_cm
from support import fakeproxy
from writer_support import admit

from cmrunner.agentrt.interface import AgentError
from cmrunner.agentrt.netclient import ModelClient, NetworkInputs, resolve_route
from cmrunner.synthetic import fakemodel

TEXT = "I keep my notes in plain text files."
HTTPS = "https://api.example.com/v1"


def _route(mode: str, private: dict | None = None, process: dict | None = None, base: str = HTTPS, **proxy: str):
    remote = {"baseUrl": base, "proxy": {"mode": mode, **proxy}} if mode != "legacy" else {"baseUrl": base}
    return resolve_route(NetworkInputs.capture(remote, private or {}, process or {}))


def _config_reason(mode: str, private: dict | None = None, process: dict | None = None, **proxy: str) -> str:
    remote = {"baseUrl": HTTPS, "proxy": {"mode": mode, **proxy}}
    client = ModelClient(NetworkInputs.capture(remote, private or {}, process or {}), "k")
    with pytest.raises(AgentError) as caught:
        client.client()
    assert caught.value.code == "CONFIGURATION" and caught.value.retryable is False
    assert caught.value.diagnostic["stage"] == "network_config"
    return caught.value.diagnostic["reason"]


# -- route selection (no connection is opened) ---------------------------------------------------

def test_direct_ignores_every_proxy_variable():
    route = _route("direct", {"HTTPS_PROXY": "http://p1:1"}, {"https_proxy": "http://p2:2", "ALL_PROXY": "http://p3:3"})
    assert route.proxy_url is None and route.describe()["via"] == "direct"


@pytest.mark.parametrize(("private", "process", "expected"), [
    ({}, {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"}, "http://lower:1"),
    ({"https_proxy": "http://private:1"}, {"HTTPS_PROXY": "http://process:1"}, "http://process:1"),
    ({"HTTPS_PROXY": "http://private:1"}, {}, "http://private:1"),
    ({"HTTPS_PROXY": "http://private:1"}, {"https_proxy": ""}, "http://fallback:1"),  # empty clears the group
    ({}, {"HTTP_PROXY": "http://plain:1"}, "http://plain:1"),
    ({}, {"ALL_PROXY": "http://all:1"}, "http://all:1"),
    ({}, {"HTTPS_PROXY": "proxy.corp:3128"}, "http://proxy.corp:3128"),
])
def test_env_mode_lookup_order(private, process, expected):
    if expected == "http://fallback:1":
        process = {**process, "HTTP_PROXY": "http://fallback:1"}
    assert _route("env", private, process).proxy_url == expected


def test_http_origins_skip_https_proxy():
    route = _route("env", {}, {"HTTPS_PROXY": "http://secure:1", "HTTP_PROXY": "http://plain:1"}, base="http://h/v1")
    assert route.proxy_url == "http://plain:1"
    assert _route("env", {}, {"HTTPS_PROXY": "http://secure:1"}, base="http://h/v1").proxy_url is None


def test_env_no_proxy_bypass_and_source_order():
    bypass = _route("env", {"NO_PROXY": "*.example.com"}, {"HTTPS_PROXY": "http://p:1"})
    assert bypass.proxy_url is None and bypass.reason == "NO_PROXY bypass"
    shadowed = _route("env", {"NO_PROXY": "*.example.com"}, {"HTTPS_PROXY": "http://p:1", "no_proxy": "other.example"})
    assert shadowed.proxy_url == "http://p:1", "the process's NO_PROXY wins over the private one"
    port_rule = _route("env", {}, {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:443"})
    assert port_rule.proxy_url is None, "an omitted https port is 443"


def test_legacy_route_reads_only_the_process_environment():
    assert _route("legacy", {"HTTPS_PROXY": "http://private:1"}, {}).proxy_url is None
    assert _route("legacy", {}, {"HTTPS_PROXY": "http://process:1"}).proxy_url == "http://process:1"


def test_custom_mode_reserved_and_other_names():
    private, process = {"COMMON_MEMORY_PROXY_URL": "http://u:pw@private:1"}, {"COMMON_MEMORY_PROXY_URL": "http://shell:1"}
    assert _route("custom", private, process, urlEnv="COMMON_MEMORY_PROXY_URL").proxy_url == "http://u:pw@private:1"
    other = _route("custom", {"MY_PROXY": "http://private:1"}, {"MY_PROXY": "http://shell:1"}, urlEnv="MY_PROXY")
    assert other.proxy_url == "http://shell:1", "other names come from the process environment only"
    bypass = _route("custom", private, {"NO_PROXY": "nothing.example"}, urlEnv="COMMON_MEMORY_PROXY_URL",
                    noProxy=".example.com")
    assert bypass.proxy_url is None and bypass.reason == "remote.proxy.noProxy bypass"
    ignored = _route("custom", private, {"NO_PROXY": "*"}, urlEnv="COMMON_MEMORY_PROXY_URL")
    assert ignored.proxy_url is not None, "custom mode ignores the host's NO_PROXY"


def test_route_description_never_holds_credentials():
    route = _route("custom", {"COMMON_MEMORY_PROXY_URL": "http://alice:s3cr3t-pw@proxy.corp:3128"}, {},
                   urlEnv="COMMON_MEMORY_PROXY_URL")
    described = route.describe()
    assert described == {"mode": "custom", "via": "proxy", "reason": "custom proxy", "proxy": "http://proxy.corp:3128",
                         "proxyCredentials": True}


@pytest.mark.parametrize(("mode", "private", "process", "proxy", "reason"), [
    ("env", {}, {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/33"}, {}, "no_proxy_invalid"),
    ("env", {"no_proxy": "example.com/path"}, {}, {}, "no_proxy_invalid"),
    ("custom", {"COMMON_MEMORY_PROXY_URL": "http://p:1"}, {}, {"urlEnv": "COMMON_MEMORY_PROXY_URL", "noProxy": "a*b"},
     "no_proxy_invalid"),
    ("custom", {}, {}, {"urlEnv": "COMMON_MEMORY_PROXY_URL"}, "proxy_config_invalid"),
    ("custom", {"COMMON_MEMORY_PROXY_URL": "socks4://p:1080"}, {}, {"urlEnv": "COMMON_MEMORY_PROXY_URL"},
     "proxy_config_invalid"),
    ("env", {}, {"HTTPS_PROXY": "http://p:99999"}, {}, "proxy_config_invalid"),
    ("env", {}, {"HTTPS_PROXY": "http://p:1/some/path"}, {}, "proxy_config_invalid"),
])
def test_invalid_network_settings_are_configuration_errors(mode, private, process, proxy, reason):
    assert _config_reason(mode, private, process, **proxy) == reason


def test_requests_to_another_origin_are_refused():
    client = ModelClient(NetworkInputs.capture({"baseUrl": "http://127.0.0.1:9/v1", "proxy": {"mode": "direct"}}, {}, {}), "k")
    with pytest.raises(AgentError) as caught:
        client.client().post("http://127.0.0.1:10/v1/responses")  # type: ignore[attr-defined]
    assert caught.value.code == "CONFIGURATION"
    client.close()


# -- TLS with an extra CA ------------------------------------------------------------------------

def _https_run(home, tmp_path, certs, private=None, **remote):
    with fakemodel.running(str(tmp_path / "fm"), policy(), tls=(certs["cert"], certs["key"])) as fm:
        paths, cfg = configure_remote(home, fm.base_url, private=private, **remote)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        log = fm.model_requests()
    return paths, outcome, log


def test_https_with_the_extra_ca_commits(home, tmp_path):
    certs = make_test_ca(str(tmp_path / "pki"))
    paths, outcome, log = _https_run(home, tmp_path, certs, {"COMMON_MEMORY_CA_FILE": certs["ca"]},
                                     caFileEnv="COMMON_MEMORY_CA_FILE")
    assert outcome.state == "committed" and TEXT in read_doc(paths, "profile") and log


def test_https_without_the_ca_fails_verification_and_is_permanent(home, tmp_path):
    certs = make_test_ca(str(tmp_path / "pki"))
    paths, outcome, log = _https_run(home, tmp_path, certs)
    assert (outcome.state, outcome.code) == ("dead", "UNAVAILABLE")
    assert job_row(paths)[2] == {"stage": "network", "reason": "tls_verification_failed", "retryable": False}
    assert log == []


def test_hostname_is_verified_even_with_the_ca(home, tmp_path):
    certs = make_test_ca(str(tmp_path / "pki"), server_names=("cm-other.test",))
    paths, outcome, _ = _https_run(home, tmp_path, certs, {"COMMON_MEMORY_CA_FILE": certs["ca"]},
                                   caFileEnv="COMMON_MEMORY_CA_FILE")
    assert job_row(paths)[2]["reason"] == "tls_verification_failed"


@pytest.mark.parametrize("problem", ["missing", "relative", "not_pem", "too_large", "symlink"])
def test_a_bad_ca_file_is_a_configuration_error(home, tmp_path, problem):
    bad = str(tmp_path / "ca-bad.pem")
    if problem == "not_pem":
        open(bad, "w").write("hello\n")
    elif problem == "too_large":
        open(bad, "w").write("-----BEGIN CERTIFICATE-----\n" + "A" * (1 << 20) + "\n-----END CERTIFICATE-----\n")
    elif problem == "symlink":
        certs = make_test_ca(str(tmp_path / "pki"))
        os.symlink(certs["ca"], bad)
    value = "ca.pem" if problem == "relative" else bad
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, private={"COMMON_MEMORY_CA_FILE": value},
                                      caFileEnv="COMMON_MEMORY_CA_FILE")
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        assert fm.model_requests() == [], "nothing is sent with a broken trust setting"
    assert (outcome.state, outcome.code) == ("dead", "CONFIGURATION")
    assert job_row(paths)[2] == {"stage": "network_config", "reason": "ca_config_invalid", "retryable": False}


# -- proxies -----------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["http", "https"])
def test_proxy_authentication_failure_never_falls_back_to_direct(home, tmp_path, scheme):
    certs = make_test_ca(str(tmp_path / "pki")) if scheme == "https" else None
    tls = (certs["cert"], certs["key"]) if certs else None
    with fakeproxy.running(str(tmp_path / "px"), credentials="alice:right-pass") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy(), tls=tls) as fm:
        private = {"COMMON_MEMORY_PROXY_URL": proxy.url("alice:wrong-pass")}
        extra = {"caFileEnv": "COMMON_MEMORY_CA_FILE"} if certs else {}
        if certs:
            private["COMMON_MEMORY_CA_FILE"] = certs["ca"]
        paths, cfg = configure_remote(home, fm.base_url, private=private,
                                      proxy={"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"}, **extra)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        model_log, proxy_log = fm.requests(), proxy.requests()
    assert (outcome.state, outcome.code) == ("dead", "PROXY_AUTHENTICATION")
    diagnostic = job_row(paths)[2]
    assert diagnostic == {"stage": "network", "reason": "proxy_authentication", "retryable": False, "proxyStatus": 407}
    assert model_log == [], "the model was never contacted directly"
    assert [(r["method"], r["authorized"], r["status"]) for r in proxy_log] == [
        ("CONNECT" if scheme == "https" else "POST", False, 407)]


def test_authenticated_proxy_tunnel_to_https_commits(home, tmp_path):
    certs = make_test_ca(str(tmp_path / "pki"))
    with fakeproxy.running(str(tmp_path / "px"), credentials="alice:right-pass") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy(), tls=(certs["cert"], certs["key"])) as fm:
        paths, cfg = configure_remote(
            home, fm.base_url, private={"COMMON_MEMORY_PROXY_URL": proxy.url("alice:right-pass"),
                                        "COMMON_MEMORY_CA_FILE": certs["ca"]},
            proxy={"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"}, caFileEnv="COMMON_MEMORY_CA_FILE")
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        proxy_log, model_log = proxy.requests(), fm.model_requests()
    assert outcome.state == "committed" and TEXT in read_doc(paths, "profile")
    assert proxy_log and all(r["method"] == "CONNECT" and r["authorized"] for r in proxy_log)
    assert len(model_log) == 2  # every turn of the job went through the tunnel


def test_env_mode_uses_the_process_proxy_and_honours_no_proxy(home, tmp_path):
    with fakeproxy.running(str(tmp_path / "px")) as proxy, fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy={"mode": "env"})
        admit(paths, TEXT, "e1", batch="b1")
        outcome = run_once(paths, cfg, make_agent(cfg, {"HTTP_PROXY": proxy.url()}))
        through = len(proxy.requests())
        admit(paths, "I also like tea.", "e2", batch="b2")
        bypass = run_once(paths, cfg, make_agent(cfg, {"HTTP_PROXY": proxy.url(), "NO_PROXY": "127.0.0.0/8"}))
        after = len(proxy.requests())
    assert outcome.state == "committed" and through == 2 and all(r["method"] == "POST" for r in proxy.requests())
    assert bypass.state == "committed" and after == through, "NO_PROXY sent the second job direct"


@pytest.mark.parametrize(("status", "state", "retryable"), [(502, "retry", True), (403, "dead", False)])
def test_proxy_refusing_the_tunnel_is_a_proxy_http_error(home, tmp_path, status, state, retryable):
    certs = make_test_ca(str(tmp_path / "pki"))
    with fakeproxy.running(str(tmp_path / "px"), fail_status=status) as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy(), tls=(certs["cert"], certs["key"])) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy={"mode": "env"},
                                      private={"COMMON_MEMORY_CA_FILE": certs["ca"]}, caFileEnv="COMMON_MEMORY_CA_FILE")
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg, {"HTTPS_PROXY": proxy.url()}))
        assert fm.requests() == []
    assert (outcome.state, outcome.code) == (state, "UNAVAILABLE")
    assert job_row(paths)[2] == {"stage": "network", "reason": "proxy_http_error", "retryable": retryable,
                                 "proxyStatus": status}


def test_unreachable_proxy_is_not_bypassed(home, tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    dead_port = probe.getsockname()[1]
    probe.close()
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy={"mode": "env"})
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg, {"ALL_PROXY": f"http://127.0.0.1:{dead_port}"}))
        assert fm.requests() == [], "a failing proxy never falls back to direct"
    assert outcome.code == "UNAVAILABLE"
    assert job_row(paths)[2] == {"stage": "network", "reason": "proxy_unavailable", "retryable": True}


def test_invalid_no_proxy_sends_nothing_and_keeps_the_batch(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy={"mode": "env"}, private={"NO_PROXY": "10.0.0.0/33"})
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg, {"HTTP_PROXY": "http://127.0.0.1:9"}))
        assert fm.requests() == []
    assert (outcome.state, outcome.code) == ("dead", "CONFIGURATION")
    assert job_row(paths)[2] == {"stage": "network_config", "reason": "no_proxy_invalid", "retryable": False}


# -- cm network-test -------------------------------------------------------------------------------

def test_network_test_reports_route_and_outcome_and_records_the_probe(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), [{"text": "OK"}]) as fm:
        paths, _ = configure_remote(home, fm.base_url, api="chat_completions")
        proc = run_cm(["network-test", "--json"], env=hook_env(COMMON_MEMORY_HOME=home))
        body = fm.model_requests()[0]["body"]
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["route"] == {"mode": "direct", "via": "direct", "reason": "direct mode ignores proxy variables"}
    assert report["outcome"]["ok"] is True and report["api"] == "chat_completions"
    assert body["max_tokens"] == 16 and "tools" not in body
    # The probe is a model request like any other: the disclosure ledger keeps it (no grant, no memory).
    assert db_rows(home, "SELECT process, scopes, provenance, outcome FROM ledger") == [("network_test", "", "", "ok")]
    assert db_rows(home, "SELECT COUNT(*) FROM observations") == [(0,)]


def test_network_test_failure_is_sanitised(home, tmp_path):
    secret_pw = "pw-Zq81xTT"
    with fakeproxy.running(str(tmp_path / "px"), credentials="bob:other") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), [{"text": "OK"}]) as fm:
        configure_remote(home, fm.base_url, private={"COMMON_MEMORY_PROXY_URL": proxy.url(f"bob:{secret_pw}")},
                         proxy={"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"})
        proc = run_cm(["network-test"], env=hook_env(COMMON_MEMORY_HOME=home))
        assert fm.requests() == []
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 1
    assert f"route:   proxy http://127.0.0.1:{proxy.port} (mode custom: custom proxy)" in out
    assert "outcome: PROXY_AUTHENTICATION at network (proxy_authentication, proxyStatus 407)" in out
    assert secret_pw not in out and "bob" not in out


def test_network_test_without_a_key(home):
    configure_remote(home, "http://127.0.0.1:9/v1", key=None)
    proc = run_cm(["network-test"], env=hook_env(COMMON_MEMORY_HOME=home))
    assert proc.returncode == 1 and b"API_KEY_MISSING" in proc.stderr


@pytest.mark.parametrize(("cause", "via_proxy", "reason", "retryable"), [
    (socket.gaierror(-2, "Name or service not known"), False, "dns_error", True),
    (socket.gaierror(-3, "Temporary failure in name resolution"), True, "proxy_dns_error", True),
    (ConnectionRefusedError(111, "refused"), True, "proxy_unavailable", True),
    (OSError(101, "Network is unreachable"), False, "network_error", True),
])
def test_transport_causes_are_classified_through_the_chain(cause, via_proxy, reason, retryable):
    # DNS failures cannot be provoked without a resolver on this machine, so the cause chain that
    # httpx2 builds is reproduced here: the client error wraps the transport's, which wraps the OS's.
    import httpcore2
    import httpx2

    from cmrunner.agentrt import errors_map

    inner = httpcore2.ConnectError(str(cause))
    inner.__cause__ = cause
    outer = httpx2.ConnectError("connect failed")
    outer.__cause__ = inner
    failure = errors_map.from_transport(outer, via_proxy)
    assert failure.code == "UNAVAILABLE"
    assert failure.diagnostic == {"stage": "network", "reason": reason, "retryable": retryable}
