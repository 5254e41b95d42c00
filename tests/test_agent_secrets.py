"""No byte of a planted secret reaches the model server, a diagnostic, the database or the terminal."""

from __future__ import annotations

import glob
import hashlib

from agent_support import TEST_KEY, configure_remote, job_row, make_agent, make_test_ca, policy, run_once
from conftest import hook_env, run_cm
from support import fakeproxy
from writer_support import admit

from cmrunner.synthetic import fakemodel

PLANTED = "ghp_Pl4ntedT0kenThatMustNeverLeave0123456"
PROXY_USER = "carol-proxy-user"
PROXY_PASS = "Pr0xyPa55-9f3d1c"


def _secrets() -> list[str]:
    return [TEST_KEY, PLANTED, PROXY_USER, PROXY_PASS]


def _database_bytes(paths) -> bytes:
    return b"".join(open(path, "rb").read() for path in glob.glob(paths.db + "*"))


def test_secrets_stay_out_of_every_request_on_a_committed_run(home, tmp_path):
    certs = make_test_ca(str(tmp_path / "pki"))
    credentials = f"{PROXY_USER}:{PROXY_PASS}"
    with fakeproxy.running(str(tmp_path / "px"), credentials=credentials) as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy(), tls=(certs["cert"], certs["key"])) as fm:
        paths, cfg = configure_remote(
            home, fm.base_url, api="chat_completions",
            private={"COMMON_MEMORY_PROXY_URL": proxy.url(credentials), "COMMON_MEMORY_CA_FILE": certs["ca"],
                     "PLANTED_TOKEN": PLANTED},
            proxy={"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL"}, caFileEnv="COMMON_MEMORY_CA_FILE")
        admit(paths, "I work mostly in Rust these days.", "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        raw_log = open(fm.log_path, encoding="utf-8").read()
        requests = fm.model_requests()
        proxy_log = open(proxy.log_path, encoding="utf-8").read()
    assert outcome.state == "committed" and len(requests) == 2  # the task, then the read of everything; submission
    for secret in _secrets():
        assert secret not in raw_log, "no secret in any logged body or header"
        assert secret not in proxy_log
        assert secret.encode() not in _database_bytes(paths)
    expected = hashlib.sha256(f"Bearer {TEST_KEY}".encode()).hexdigest()
    assert all(r["auth_sha256"] == expected for r in requests), "the key travels only in Authorization"
    assert all("proxy-authorization" not in r["headers"] for r in requests)


def test_secrets_stay_out_of_diagnostics_on_failures(home, tmp_path):
    echo = {"error": {"message": f"Incorrect API key provided: {TEST_KEY}", "type": "invalid_request_error",
                      "code": "invalid_api_key"}}
    with fakemodel.running(str(tmp_path / "fm"), policy(inject={"first": {"error": {"status": 401, "body": echo}}})) as fm:
        paths, cfg = configure_remote(home, fm.base_url, private={"PLANTED_TOKEN": PLANTED})
        admit(paths, "I like quiet mornings.", "e1")
        proc = run_cm(["flush"], env=hook_env(COMMON_MEMORY_HOME=home))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and b"AUTHENTICATION" in out
    state, issue, diagnostic, *_ = job_row(paths)
    assert (state, issue) == ("dead", "AUTHENTICATION")
    assert diagnostic == {"stage": "http", "reason": "authentication", "retryable": False, "httpStatus": 401}
    for secret in _secrets():
        assert secret.encode() not in out
        assert secret.encode() not in _database_bytes(paths), "the echoed provider body is never stored"


def test_proxy_credentials_stay_out_of_a_proxy_failure(home, tmp_path):
    with fakeproxy.running(str(tmp_path / "px"), credentials="someone:else") as proxy, \
            fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, cfg = configure_remote(home, fm.base_url, proxy={"mode": "env"},
                                      private={"HTTP_PROXY": proxy.url(f"{PROXY_USER}:{PROXY_PASS}")})
        admit(paths, "I like quiet mornings.", "e1")
        outcome = run_once(paths, cfg, make_agent(cfg))
        assert fm.requests() == []
    assert outcome.code == "PROXY_AUTHENTICATION"
    for secret in _secrets():
        assert secret.encode() not in _database_bytes(paths)
