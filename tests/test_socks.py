"""SOCKS5 proxies (experimental, as the specification's custom proxy allows) through httpx2's socks
extra: the route, the Memory Agent through a real loopback SOCKS5 proxy, its authentication
failure never falling back to direct, and `cm network-test` naming the proxy."""

from __future__ import annotations

import json

import pytest
from agent_support import configure_remote, job_row, make_agent, make_test_ca, policy, read_doc, run_once
from conftest import run_cm
from support import fakeproxy
from writer_support import admit

from cmrunner.agentrt.netclient import NetworkInputs, resolve_route
from cmrunner.manage import netsettings
from cmrunner.synthetic import fakemodel

TEXT = "I prefer tabs over spaces."
CUSTOM = {"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"}


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_a_socks5_url_is_a_route_for_custom_and_env_modes(scheme):
    url = f"{scheme}://u:p@127.0.0.1:1080"
    custom = resolve_route(NetworkInputs.capture({"baseUrl": "https://api.example.com/v1", "proxy": CUSTOM},
                                                 {"COMMON_MEMORY_PROXY_URL": url}, {}))
    assert custom.proxy_url == url and custom.describe()["proxy"] == f"{scheme}://127.0.0.1:1080"
    env = resolve_route(NetworkInputs.capture({"baseUrl": "https://api.example.com/v1", "proxy": {"mode": "env"}},
                                              {}, {"ALL_PROXY": url}))
    assert env.proxy_url == url and env.reason == "ALL_PROXY"
    assert netsettings.check_proxy_url(url) == url
    with pytest.raises(Exception) as refused:
        netsettings.check_proxy_url("socks4://127.0.0.1:1080")
    assert getattr(refused.value, "code", None) == "PROXY_URL_INVALID"


@pytest.mark.parametrize("tls", [False, True], ids=["http-model", "https-model"])
def test_the_memory_agent_commits_through_an_authenticated_socks5_proxy(home, tmp_path, tls):
    certs = make_test_ca(str(tmp_path / "pki")) if tls else None
    with fakeproxy.running(str(tmp_path / "px"), credentials="alice:right-pass") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy(),
                              tls=(certs["cert"], certs["key"]) if certs else None) as fm:
        private = {"COMMON_MEMORY_PROXY_URL": proxy.url("alice:right-pass", "socks5")}
        extra = {}
        if certs:
            private["COMMON_MEMORY_CA_FILE"] = certs["ca"]
            extra = {"caFileEnv": "COMMON_MEMORY_CA_FILE"}
        paths, cfg = configure_remote(home, fm.base_url, private=private, proxy=CUSTOM, **extra)
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        proxy_log, model_log = proxy.requests(), fm.model_requests()
    assert outcome.state == "committed" and TEXT in read_doc(paths, "profile")
    assert proxy_log and all(r["method"] == "SOCKS5" and r["authorized"] and r["status"] == 200 for r in proxy_log)
    assert {r["target"] for r in proxy_log} == {f"127.0.0.1:{fm.port}"}
    assert len(model_log) == 2  # every turn of the job went through the proxy


def test_a_socks5_authentication_failure_never_falls_back_to_direct(home, tmp_path):
    with fakeproxy.running(str(tmp_path / "px"), credentials="alice:right-pass") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy=CUSTOM,
                                      private={"COMMON_MEMORY_PROXY_URL": proxy.url("alice:wrong-pass", "socks5")})
        admit(paths, TEXT, "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        proxy_log, model_log = proxy.requests(), fm.requests()
    assert (outcome.state, outcome.code) == ("dead", "PROXY_AUTHENTICATION")  # as for an HTTP proxy's 407
    assert job_row(paths)[2] == {"stage": "network", "reason": "proxy_authentication", "retryable": False}
    assert model_log == [], "the model was never contacted directly"
    assert [(r["method"], r["authorized"]) for r in proxy_log][:1] == [("SOCKS5", False)]


def test_network_test_names_the_socks5_proxy_without_its_credentials(home, tmp_path):
    with fakeproxy.running(str(tmp_path / "px"), credentials="alice:right-pass") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), {"replies": [{"text": "OK"}]}) as fm:
        configure_remote(home, fm.base_url, proxy=CUSTOM,
                         private={"COMMON_MEMORY_PROXY_URL": proxy.url("alice:right-pass", "socks5")})
        proc = run_cm(["network-test", "--json"])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
    assert report["route"]["proxy"] == f"socks5://127.0.0.1:{proxy.port}" and report["route"]["via"] == "proxy"
    assert b"right-pass" not in proc.stdout + proc.stderr
