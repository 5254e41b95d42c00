"""config.json: strict validation naming the field, defaults, atomic private saves."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import stat

import pytest

from cmrunner.core import config as config_mod
from cmrunner.core.errors import ConfigError


def _remote(**over: object) -> dict:
    remote = {"provider": "openai-compatible", "baseUrl": "https://api.example.com/v1", "model": "m",
              "apiKeyEnv": "COMMON_MEMORY_API_KEY"}
    remote.update(over)
    return remote


def _valid(home: str, **over: object) -> dict:
    data = config_mod.default_config(home)
    data.update(over)
    return data


def test_missing_file_gives_defaults_without_creating_anything(home):
    cfg = config_mod.load(home)
    assert not cfg.exists and cfg.remote is None
    assert cfg.data_root == os.path.join(home, "data")
    assert cfg.session_cache == {"maxSessionBytes": 8388608, "maxTotalBytes": 67108864, "contextTailTurns": 2}
    assert not os.path.exists(home)


def test_full_reference_field_set_is_accepted(home):
    data = _valid(home, remote=_remote(
        api="chat_completions", preset="deepseek", apiKeySource="private-env", maxOutputTokens=None,
        maxAgentTurns=64, thinking={"type": "enabled"}, proxy={"mode": "custom", "urlEnv": "COMMON_MEMORY_PROXY_URL",
                                                                "noProxy": "localhost"},
        caFileEnv="COMMON_MEMORY_CA_FILE",
        capability={"source": "unknown/custom", "contextWindow": None, "maxOutput": None}),
        sessionCache={"contextTailTurns": 0})
    data["disclosure"].update(maxExcerptBytes=1000, maxTotalBytes=None,
                              allowedProvenance=["user_explicit", "conversation_context"])
    assert config_mod.validate(copy.deepcopy(data)) == data


BAD = [
    (lambda d: d.update(extra=1), "extra"),
    (lambda d: d.pop("scheduler"), "scheduler"),
    (lambda d: d.update(dataRoot="relative"), "dataRoot"),
    (lambda d: d["disclosure"].update(allowedScopes=[]), "disclosure.allowedScopes"),
    (lambda d: d["disclosure"].update(allowedScopes=["project:bad id"]), "disclosure.allowedScopes"),
    (lambda d: d["disclosure"].update(allowedProvenance=["gossip"]), "disclosure.allowedProvenance"),
    (lambda d: d["disclosure"].update(enabled="yes"), "disclosure.enabled"),
    (lambda d: d["disclosure"].update(maxTotalBytes=0), "disclosure.maxTotalBytes"),
    (lambda d: d.update(writableScopes=["global", "global"]), "writableScopes"),
    (lambda d: d["scheduler"].update(leaseMs=True), "scheduler.leaseMs"),
    (lambda d: d["scheduler"].update(idleMs=0), "scheduler.idleMs"),
    (lambda d: d["scheduler"].pop("maxAttempts"), "scheduler.maxAttempts"),
    (lambda d: d.update(sessionCache={"contextTailTurns": -1}), "sessionCache.contextTailTurns"),
    (lambda d: d.update(history={"trashRetentionDays": 0}), "history.trashRetentionDays"),
    (lambda d: d.update(history={"trashRetentionDays": "30"}), "history.trashRetentionDays"),
    (lambda d: d.update(history={"keepForever": True}), "history.keepForever"),
    (lambda d: d.update(remote=_remote(provider="anthropic")), "remote.provider"),
    (lambda d: d.update(remote=_remote(baseUrl="ftp://x")), "remote.baseUrl"),
    (lambda d: d.update(remote=_remote(baseUrl="https://user:pw@x/v1")), "remote.baseUrl"),
    (lambda d: d.update(remote=_remote(model="  ")), "remote.model"),
    (lambda d: d.update(remote=_remote(apiKeyEnv="1BAD")), "remote.apiKeyEnv"),
    (lambda d: d.update(remote=_remote(api="grpc")), "remote.api"),
    (lambda d: d.update(remote=_remote(maxAgentTurns=2000)), "remote.maxAgentTurns"),
    (lambda d: d.update(remote=_remote(reasoningEffort="extreme")), "remote.reasoningEffort"),
    (lambda d: d.update(remote=_remote(api="chat_completions", reasoningEffort="low")), "remote.reasoningEffort"),
    (lambda d: d.update(remote=_remote(thinking={"type": "enabled"})), "remote.thinking"),
    (lambda d: d.update(remote=_remote(api="chat_completions", thinking={"type": "on"})), "remote.thinking.type"),
    (lambda d: d.update(remote=_remote(api="chat_completions", thinking={"type": "enabled"}, enableThinking=True)),
     "remote.enableThinking"),
    (lambda d: d.update(remote=_remote(proxy={"mode": "socks"})), "remote.proxy.mode"),
    (lambda d: d.update(remote=_remote(proxy={"mode": "custom"})), "remote.proxy.urlEnv"),
    (lambda d: d.update(remote=_remote(caFileEnv="COMMON_MEMORY_CA_FILE")), "remote.caFileEnv"),
    (lambda d: d.update(remote=_remote(capability={"source": "official-catalog", "version": "1",
                                                    "digest": "xyz", "contextWindow": 1, "maxOutput": 1})),
     "remote.capability.digest"),
]


@pytest.mark.parametrize(("mutate", "field"), BAD)
def test_invalid_values_name_the_field_and_what_is_accepted(home, mutate, field):
    data = config_mod.default_config(home)
    mutate(data)
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(data)
    assert caught.value.code == "CONFIG_INVALID"
    assert f"'{field}'" in caught.value.message
    assert "must be" in caught.value.message


def test_other_schema_version_is_refused(home):
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(_valid(home, schemaVersion=1))
    assert caught.value.code == "UNSUPPORTED_CONFIG_VERSION"


def test_save_is_atomic_private_and_round_trips(home):
    data = _valid(home, remote=_remote())
    config_mod.save(home, data)
    path = os.path.join(home, "config.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
    assert config_mod.load(home).data == data
    assert [n for n in os.listdir(home) if n.endswith(".tmp")] == []


def test_invalid_file_does_not_get_saved(home):
    with pytest.raises(ConfigError):
        config_mod.save(home, _valid(home, dataRoot="x"))
    assert not os.path.exists(os.path.join(home, "config.json"))


def test_unparseable_file_is_reported(home):
    os.makedirs(home)
    with open(os.path.join(home, "config.json"), "w") as handle:
        handle.write("{nope")
    with pytest.raises(ConfigError) as caught:
        config_mod.load(home)
    assert caught.value.code == "CONFIG_INVALID"


def test_symlinked_config_is_refused(home, tmp_path):
    os.makedirs(home)
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps(config_mod.default_config(home)))
    os.symlink(real, os.path.join(home, "config.json"))
    with pytest.raises(Exception) as caught:
        config_mod.load(home)
    assert getattr(caught.value, "code", None) == "UNSAFE_PATH"


@pytest.mark.parametrize("body", [b"{broken", b'{"schemaVersion": 1}', b'{"schemaVersion": 2, "dataRoot": "rel"}',
                                  b"\xff\xfe not utf-8"])
def test_config_init_force_does_what_the_corrupt_config_error_advises(home, body):
    from conftest import run_cm

    path = os.path.join(home, "config.json")
    os.makedirs(home, mode=0o700, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(body)
    refused = run_cm(["config", "show"])
    assert refused.returncode == 1
    line = refused.stderr.decode()
    assert line.startswith(("cm: CONFIG_INVALID: ", "cm: UNSUPPORTED_CONFIG_VERSION: ")), line
    assert "config init" in line
    assert run_cm(["config", "init"]).returncode == 1  # without --force nothing is replaced
    assert open(path, "rb").read() == body
    proc = run_cm(["config", "init", "--force"])
    assert proc.returncode == 0, proc.stderr
    (kept,) = [name for name in os.listdir(home) if name.startswith("config.json.corrupt-")]
    assert f"kept the unreadable config.json as {os.path.join(home, kept)}" in proc.stdout.decode()
    assert open(os.path.join(home, kept), "rb").read() == body
    assert stat.S_IMODE(os.stat(os.path.join(home, kept)).st_mode) == 0o600
    assert config_mod.load(home).exists
    assert run_cm(["config", "show"]).returncode == 0
    again = run_cm(["config", "init", "--force"])  # a valid config is replaced without a copy
    assert again.returncode == 0 and "kept" not in again.stdout.decode()
    assert len([n for n in os.listdir(home) if n.startswith("config.json.corrupt-")]) == 1


def test_corrupt_copies_never_overwrite_each_other(home):
    os.makedirs(home, mode=0o700, exist_ok=True)
    path = os.path.join(home, "config.json")
    kept = []
    for n in range(3):
        with open(path, "w") as handle:
            handle.write(f"corrupt {n}")
        kept.append(config_mod.keep_aside(home))
    assert len(set(kept)) == 3
    assert [open(k).read() for k in kept] == ["corrupt 0", "corrupt 1", "corrupt 2"]


def _cache(home: str) -> dict:
    with open(os.path.join(home, config_mod.CACHE_NAME)) as handle:
        return json.load(handle)


def test_a_save_leaves_a_private_cache_of_exactly_what_it_wrote(home):
    data = _valid(home, remote=_remote())
    config_mod.save(home, data)
    cache = _cache(home)
    assert stat.S_IMODE(os.stat(os.path.join(home, config_mod.CACHE_NAME)).st_mode) == 0o600
    with open(os.path.join(home, "config.json"), "rb") as handle:
        assert cache["digest"] == hashlib.sha256(handle.read()).hexdigest()
    assert cache["config"] == data


def test_a_hand_edit_is_validated_again_not_read_from_the_cache(home):
    config_mod.save(home, _valid(home))
    path = os.path.join(home, "config.json")
    with open(path) as handle:
        data = json.load(handle)
    data["scheduler"]["idleMs"] = 0
    with open(path, "w") as handle:
        json.dump(data, handle)
    with pytest.raises(ConfigError) as caught:
        config_mod.load(home)
    assert caught.value.code == "CONFIG_INVALID" and "'scheduler.idleMs'" in caught.value.message
    data["scheduler"]["idleMs"] = 7
    with open(path, "w") as handle:
        json.dump(data, handle)
    assert config_mod.load(home).scheduler["idleMs"] == 7
    assert _cache(home)["config"]["scheduler"]["idleMs"] == 7  # the cache follows the validated edit


@pytest.mark.parametrize("forge", ["digest", "stamp", "garbage"])
def test_a_cache_that_does_not_match_is_ignored(home, forge):
    config_mod.save(home, _valid(home))
    cache_file = os.path.join(home, config_mod.CACHE_NAME)
    cache = _cache(home)
    cache["config"]["dataRoot"] = "/elsewhere"
    if forge == "digest":
        cache["digest"] = "0" * 64
    elif forge == "stamp":
        cache["stamp"] = "an older cm"
    with open(cache_file, "w") as handle:
        handle.write("{not json" if forge == "garbage" else json.dumps(cache))
    assert config_mod.load(home).data_root == os.path.join(home, "data")
    assert _cache(home)["config"]["dataRoot"] == os.path.join(home, "data")  # rewritten from the real file


def test_the_cache_of_an_unchanged_file_is_used(home):
    config_mod.save(home, _valid(home))
    cache_file = os.path.join(home, config_mod.CACHE_NAME)
    cache = _cache(home)
    cache["config"]["scheduler"]["turnThreshold"] = 99  # visible only if the cache is what load returns
    with open(cache_file, "w") as handle:
        json.dump(cache, handle)
    assert config_mod.load(home).scheduler["turnThreshold"] == 99


FIRST_ERROR = [
    # several problems at once: unknown keys first, then missing ones, then fields in order
    (lambda d: (d.update(extra=1), d.pop("scheduler")), "extra",
     "absent (unknown field; accepted fields: schemaVersion, dataRoot, disclosure, writableScopes, scheduler, "
     "remote, sessionCache, history, spend, sync, deviceName)"),
    (lambda d: (d.pop("scheduler"), d.update(dataRoot="rel")), "scheduler", "present (it is required)"),
    (lambda d: (d.update(dataRoot="rel"), d["disclosure"].update(enabled=1)), "dataRoot", "an absolute path"),
    (lambda d: d.update(remote=_remote(model="", bogus=1)), "remote.bogus",
     "absent (unknown field; accepted fields: provider, baseUrl, model, apiKeyEnv, api, preset, capability, "
     "apiKeySource, maxOutputTokens, maxAgentTurns, reasoningEffort, thinking, enableThinking, proxy, caFileEnv, "
     "deadlineMs, maxRequestBytes, agent, agentPath)"),
    (lambda d: (d.update(remote=_remote(model="")), d["disclosure"].update(enabled=1)), "remote.model",
     "a non-empty model name"),
    (lambda d: d.update(writableScopes=["global", "global", 5]), "writableScopes",
     "a list of scopes (global or project:<id>) without duplicates"),
    (lambda d: d.update(writableScopes=["global", 5, "global"]), "writableScopes",
     "a non-empty list of scopes (global or project:<id>)"),
    # whole-string match (cmrunner.core.scopes): the old $-anchored pattern let a trailing newline through
    (lambda d: d.update(writableScopes=["global\n"]), "writableScopes",
     "a non-empty list of scopes (global or project:<id>)"),
    (lambda d: d.update(remote=_remote(api="chat_completions", reasoningEffort="low", thinking={"type": "x"})),
     "remote.reasoningEffort", "absent unless remote.api is responses"),
    (lambda d: d.update(remote=_remote(capability={"source": "official-catalog"})), "remote.capability.version",
     "present (it is required)"),
    (lambda d: d.update(remote=_remote(capability=None)), "remote.capability.source",
     "unknown/custom or official-catalog"),
    (lambda d: d.update(remote=_remote(capability={"source": "unknown/custom", "contextWindow": 1, "maxOutput": None})),
     "remote.capability", "{source: unknown/custom, contextWindow: null, maxOutput: null}"),
    (lambda d: d.update(remote=_remote(proxy={"mode": "env", "urlEnv": "X"})), "remote.proxy.urlEnv",
     "absent (unknown field; accepted fields: mode)"),
    (lambda d: d.update(sessionCache=None), "sessionCache", "an object"),
    (lambda d: d.update(remote=_remote(maxAgentTurns=None)), "remote.maxAgentTurns", "an integer from 1 to 1024"),
    (lambda d: d.update(remote=_remote(maxRequestBytes=1024)), "remote.maxRequestBytes",
     "an integer from 32768 to 67108864"),
    (lambda d: d["disclosure"].update(maxTotalBytes=1.0), "disclosure.maxTotalBytes",
     "an integer from 1 to 9007199254740991 or null"),
]


@pytest.mark.parametrize(("mutate", "field", "expected"), FIRST_ERROR)
def test_the_first_problem_is_reported_word_for_word(home, mutate, field, expected):
    data = config_mod.default_config(home)
    mutate(data)
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(data)
    assert caught.value.code == "CONFIG_INVALID"
    assert caught.value.message == (f"config.json field '{field}' must be {expected}; edit the file or rerun "
                                    "`cm config init --force`")


@pytest.mark.parametrize("version", [1, 2.0, True, "2", None])
def test_only_the_integer_2_is_a_supported_version(home, version):
    with pytest.raises(ConfigError) as caught:
        config_mod.validate(_valid(home, schemaVersion=version))
    assert caught.value.code == "UNSUPPORTED_CONFIG_VERSION"
    assert caught.value.message == ("config.json schemaVersion must be 2; older layouts are not migrated, move the "
                                    "file aside and run `cm config init`")


def test_trash_retention_defaults_to_30_days_and_is_configurable(home):
    config_mod.save(home, config_mod.default_config(home))
    assert config_mod.load(home).trash_retention_ms == 30 * 86_400_000
    config_mod.save(home, _valid(home, history={"trashRetentionDays": 7}))
    assert config_mod.load(home).trash_retention_ms == 7 * 86_400_000
