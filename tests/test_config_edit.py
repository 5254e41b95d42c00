"""`cm config get KEY` / `cm config set KEY VALUE`: one setting at a time, validated like the whole file."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cm

from cmrunner.core import config as config_mod


def _cm(*args: str):
    return run_cm(list(args))


def _file(home: str) -> dict:
    with open(os.path.join(home, "config.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_import_is_enabled_by_the_command_its_error_names(home, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("# Notes\n\nI prefer short answers.\n")
    refused = _cm("import", str(note), "--no-wait")
    err = refused.stderr.decode()
    assert refused.returncode == 1 and err.startswith("cm: IMPORT_DISABLED: ")
    command = err.split("`")[1]
    assert command == "cm config set disclosure.allowedProvenance +document_import"
    proc = _cm(*command.split()[1:])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == ('disclosure.allowedProvenance: ["user_explicit"] -> '
                                    '["user_explicit", "document_import"]\n')
    assert _file(home)["disclosure"]["allowedProvenance"] == ["user_explicit", "document_import"]
    assert _cm("import", str(note), "--no-wait").returncode == 0
    again = _cm("config", "set", "disclosure.allowedProvenance", "+document_import")
    assert again.returncode == 0 and b"nothing changed" in again.stdout
    removed = _cm("config", "set", "disclosure.allowedProvenance", "-document_import")
    assert removed.returncode == 0, removed.stderr
    assert _file(home)["disclosure"]["allowedProvenance"] == ["user_explicit"]


def test_get_prints_text_bare_and_everything_else_as_json(home):
    assert _cm("config", "get", "dataRoot").stdout.decode() == os.path.join(home, "data") + "\n"
    assert json.loads(_cm("config", "get", "disclosure").stdout)["allowedScopes"] == ["global"]
    assert _cm("config", "get", "scheduler.turnThreshold").stdout.decode().strip().isdigit()
    absent = _cm("config", "get", "spend.tokensPerDay")
    assert absent.returncode == 0 and absent.stdout == b"" and b"not set in config.json" in absent.stderr
    assert not os.path.exists(home), "reading creates nothing"


@pytest.mark.parametrize(("key", "value", "code", "names"), [
    ("nope", "1", "CONFIG_KEY_UNKNOWN", "its fields: schemaVersion, dataRoot"),
    ("disclosure.nope", "1", "CONFIG_KEY_UNKNOWN", "'disclosure' has no field 'nope'"),
    ("dataRoot.x", "1", "CONFIG_KEY_UNKNOWN", "(it is a value)"),
    ("spend.tokensPerDay", "lots", "CONFIG_INVALID", "'spend.tokensPerDay' must be an integer"),
    ("scheduler.turnThreshold", "true", "CONFIG_INVALID", "'scheduler.turnThreshold' must be an integer"),
    ("dataRoot", "relative/path", "CONFIG_INVALID", "'dataRoot' must be an absolute path"),
    ("disclosure.allowedScopes", "+project:has space", "CONFIG_INVALID", "'disclosure.allowedScopes' must be"),
    ("disclosure.allowedProvenance", "+everything", "CONFIG_INVALID", "provenance classes"),
    ("remote.model", "m", "MODEL_NOT_CONFIGURED", "cm config init --base-url"),
])
def test_bad_keys_and_values_are_refused_with_the_loaders_codes_and_nothing_is_written(home, key, value, code, names):
    assert _cm("config", "init").returncode == 0
    before = open(os.path.join(home, "config.json"), "rb").read()
    proc = _cm("config", "set", key, value)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith(f"cm: {code}: ") and names in err, err
    assert open(os.path.join(home, "config.json"), "rb").read() == before
    if code == "CONFIG_KEY_UNKNOWN":
        assert _cm("config", "get", key).stderr.decode().startswith(f"cm: {code}: ")


def test_values_are_read_as_json_then_as_text(home):
    assert _cm("config", "init", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--skip-check").returncode == 0
    for args, expected in [(("remote.model", "5"), "5"),  # a model called 5: JSON 5 is refused, the text is not
                           (("remote.model", "null"), "null"),
                           (("spend.tokensPerDay", "1000"), 1000),
                           (("spend.tokensPerDay", "null"), None),  # no cap
                           (("remote.proxy", '{"mode": "env"}'), {"mode": "env"}),
                           (("writableScopes", '["global"]'), ["global"])]:
        proc = _cm("config", "set", *args)
        assert proc.returncode == 0, proc.stderr
        node = _file(home)
        for part in args[0].split("."):
            node = node[part]
        assert node == expected
    assert config_mod.load(home).spend["tokensPerDay"] is None


def test_null_removes_an_optional_field_that_refuses_null(home):
    assert _cm("config", "init", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--preset", "openai",
               "--skip-check").returncode == 0
    proc = _cm("config", "set", "remote.preset", "null")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == "remote.preset: openai -> (not set)\n"
    assert "preset" not in _file(home)["remote"]


def test_set_on_a_home_without_config_json_starts_from_the_defaults(home):
    proc = _cm("config", "set", "history.trashRetentionDays", "7")
    assert proc.returncode == 0, proc.stderr
    data = _file(home)
    assert data["history"] == {"trashRetentionDays": 7} and data["dataRoot"] == os.path.join(home, "data")
    assert config_mod.load(home).trash_retention_ms == 7 * 86_400_000
