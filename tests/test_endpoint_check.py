"""`cm config init` checks the endpoint before it saves: the model list, then one tool-call round trip.

Every server here is the project's fake model on loopback (or a closed loopback port); nothing is
written when a check fails, and no message carries the key.
"""

from __future__ import annotations

import json
import os
import socket

from conftest import run_cm

from cmrunner.manage import endpoint, providers
from cmrunner.synthetic import fakemodel, fakeprobe

KEY = "sk-endpoint-check-4Qx8Wm2Lz7"


def _init(home: str, *args: str, key: str | None = KEY):
    extra = ["--api-key-stdin"] if key is not None else []
    return run_cm(["config", "init", "--home", home, *args, *extra],
                  stdin=(key + "\n").encode() if key is not None else b"")


def _refused(proc, code: str) -> str:
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith(f"cm: {code}: "), (proc.stdout, err)
    assert "Traceback" not in err and KEY not in err + proc.stdout.decode()
    return err


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_the_probe_tool_is_one_name_for_cm_and_the_fake():
    assert endpoint.PROBE_TOOL == fakeprobe.PROBE_TOOL


def test_a_listed_tool_calling_model_is_saved_after_one_round_trip(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["alpha", "beta"]}) as fake:
        for api in ("chat_completions", "responses"):
            proc = _init(home, "--base-url", fake.base_url, "--model", "beta", "--api", api, "--force")
            assert proc.returncode == 0, proc.stderr
        seen = [(r["method"], r["path"]) for r in fake.requests()]
        probes = [r for r in fake.requests() if r.get("cue") == "probe"]
    assert seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions"),
                    ("GET", "/v1/models"), ("POST", "/v1/responses"), ("POST", "/v1/responses")]
    assert len(probes) == 4 and all(r["authorized"] for r in probes)
    # the second request of each round trip carries the tool's result back
    assert any(m.get("role") == "tool" for m in probes[1]["body"]["messages"])
    assert any(i.get("type") == "function_call_output" for i in probes[3]["body"]["input"])
    assert json.load(open(os.path.join(home, "config.json")))["remote"]["model"] == "beta"


def test_a_model_the_server_does_not_list_is_refused_naming_listed_ones(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake"), {"models": [f"m{i}" for i in range(8)]}) as fake:
        err = _refused(_init(home, "--base-url", fake.base_url, "--model", "gpt-9"), "MODEL_NOT_LISTED")
        assert not [r for r in fake.requests() if r["method"] == "POST"]  # refused before any model request
    assert "'gpt-9'" in err and "m0, m1, m2, m3, m4 (and 3 more)" in err
    assert not os.path.exists(home)


def test_a_url_without_its_api_path_is_endpoint_not_found(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        # the fake lists its models at its root too, as some servers do: the test request then 404s
        err = _refused(_init(home, "--base-url", fake.root_url, "--model", "fake-model"), "ENDPOINT_NOT_FOUND")
        assert f"{fake.root_url}/responses answered HTTP 404" in err and "/v1" in err
        err = _refused(_init(home, "--base-url", fake.root_url + "/api", "--model", "fake-model", "--api",
                             "chat_completions"), "ENDPOINT_NOT_FOUND")
        # no list there either: the test request decides, and names where it went
        assert f"{fake.root_url}/api/chat/completions answered HTTP 404" in err and "missing its API path" in err
    assert not os.path.exists(home)


def test_a_server_that_is_down_is_model_unreachable_with_its_url(tmp_path):
    home = str(tmp_path / "home")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    err = _refused(_init(home, "--preset", "ollama", "--base-url", url, "--model", "llama3.1", key=None),
                   "MODEL_UNREACHABLE")
    assert url in err and "start the model server" in err
    assert not os.path.exists(home)


def test_a_model_that_never_calls_tools_is_refused(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake"), {"tools": False}) as fake:
        err = _refused(_init(home, "--preset", "lmstudio", "--base-url", fake.base_url, "--model", "fake-model",
                             key=None), "MODEL_CANNOT_CALL_TOOLS")
    assert "cannot call tools" in err and "'fake-model'" in err
    assert not os.path.exists(home)


def test_skip_check_saves_without_a_request(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake")) as fake:
        proc = _init(home, "--base-url", fake.base_url, "--model", "not-listed", "--skip-check")
        assert proc.returncode == 0, proc.stderr
        assert fake.requests() == []
    assert json.load(open(os.path.join(home, "config.json")))["remote"]["model"] == "not-listed"


def test_a_local_preset_needs_no_key_and_fills_its_url(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake"), {"models": ["qwen3:8b"]}) as fake:
        proc = _init(home, "--preset", "vllm", "--base-url", fake.base_url, "--model", "qwen3:8b", key=None)
        assert proc.returncode == 0, proc.stderr
    remote = json.load(open(os.path.join(home, "config.json")))["remote"]
    assert remote["preset"] == "vllm" and remote["api"] == "chat_completions"
    assert f"{remote['apiKeyEnv']}={providers.LOCAL_KEY}" in open(os.path.join(home, ".env")).read()
    # without --base-url, a preset brings its own URL and protocol
    other = str(tmp_path / "other")
    assert _init(other, "--preset", "llamacpp", "--model", "m", "--skip-check", key=None).returncode == 0
    saved = json.load(open(os.path.join(other, "config.json")))["remote"]
    assert saved["baseUrl"] == "http://127.0.0.1:8080/v1" and saved["api"] == "chat_completions"


def test_a_hosted_preset_without_a_key_is_asked_for_one(tmp_path):
    home = str(tmp_path / "home")
    err = _refused(_init(home, "--preset", "openrouter", "--model", "x", key=None), "API_KEY_MISSING")
    assert "--api-key-stdin" in err and "--skip-check" in err
    assert not os.path.exists(home)


def test_hosted_presets_bring_their_openai_compatible_urls(tmp_path):
    expected = {"anthropic": "https://api.anthropic.com/v1", "openrouter": "https://openrouter.ai/api/v1",
                "gemini": "https://generativelanguage.googleapis.com/v1beta/openai"}
    for preset, url in expected.items():
        home = str(tmp_path / preset)
        proc = _init(home, "--preset", preset, "--model", "some-model", "--skip-check")  # no network here
        assert proc.returncode == 0, proc.stderr
        remote = json.load(open(os.path.join(home, "config.json")))["remote"]
        assert (remote["baseUrl"], remote["api"], remote["preset"]) == (url, "chat_completions", preset)


def test_a_server_without_a_model_list_is_checked_by_the_test_request(tmp_path):
    home = str(tmp_path / "home")
    with fakemodel.running(str(tmp_path / "fake"), {"models": None}) as fake:
        proc = _init(home, "--base-url", fake.base_url, "--model", "any-model", "--api", "chat_completions")
        assert proc.returncode == 0, proc.stderr  # the list 404s, the round trip proves the URL and the model
        assert [(r["method"], r.get("cue")) for r in fake.requests()] == [("GET", None), ("POST", "probe"),
                                                                           ("POST", "probe")]
    assert json.load(open(os.path.join(home, "config.json")))["remote"]["model"] == "any-model"
