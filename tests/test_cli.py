"""The management CLI: non-interactive configuration and error translation."""

from __future__ import annotations

import json
import os
import stat

from conftest import run_cm


def test_config_init_capture_only(home):
    proc = run_cm(["config", "init"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(open(os.path.join(home, "config.json")).read())
    assert data["schemaVersion"] == 2 and "remote" not in data


def test_config_init_with_model_and_key_from_stdin(home):
    proc = run_cm(["config", "init", "--base-url", "https://api.example.com/v1", "--model", "gpt-x",
                   "--api", "chat_completions", "--allow-scope", "global", "--api-key-stdin"],
                  stdin=b"sk-abcdefghijklmnop\n")
    assert proc.returncode == 0, proc.stderr
    assert b"sk-abc" not in proc.stdout + proc.stderr
    data = json.loads(open(os.path.join(home, "config.json")).read())
    assert data["remote"]["api"] == "chat_completions"
    assert data["remote"]["proxy"] == {"mode": "direct"}
    env = os.path.join(home, ".env")
    assert stat.S_IMODE(os.stat(env).st_mode) == 0o600
    assert "COMMON_MEMORY_API_KEY=sk-abcdefghijklmnop" in open(env).read()
    assert b"sk-abc" not in json.dumps(data).encode()


def test_config_init_refuses_to_overwrite_without_force(home):
    assert run_cm(["config", "init"]).returncode == 0
    again = run_cm(["config", "init"])
    assert again.returncode == 1 and again.stderr.decode().startswith("cm: CONFIG_EXISTS: ")
    assert run_cm(["config", "init", "--force"]).returncode == 0


def test_config_init_validates_like_the_loader(home):
    proc = run_cm(["config", "init", "--allow-scope", "project:has space"])
    assert proc.returncode == 1
    assert "disclosure.allowedScopes" in proc.stderr.decode()
    assert not os.path.exists(os.path.join(home, "config.json"))
    half = run_cm(["config", "init", "--model", "m"])
    assert half.returncode == 1 and "--base-url and --model" in half.stderr.decode()


def test_config_show_prints_defaults_when_absent(home):
    proc = run_cm(["config", "show"])
    assert json.loads(proc.stdout)["dataRoot"] == os.path.join(home, "data")
    assert b"defaults" in proc.stderr


def test_home_must_be_absolute(home):
    proc = run_cm(["--home", "relative", "status"])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: PATH_NOT_ABSOLUTE: ")


def test_common_memory_alias_is_the_same_program(home):
    import subprocess
    import sys

    alias = os.path.join(os.path.dirname(sys.executable), "common-memory")
    proc = subprocess.run([alias, "status", "--json"], capture_output=True, timeout=30)
    assert proc.returncode == 0 and json.loads(proc.stdout)["home"] == home
