"""The device name: the hostname by default, `cm config set deviceName` renames it, `cm status` shows it."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cm

from cmrunner.core import config as config_mod, device
from cmrunner.core.errors import ConfigError


@pytest.mark.parametrize(("hostname", "expected"), [
    ("laptop", "laptop"),
    ("laptop.corp.example.com", "laptop"),          # the domain never becomes part of the name
    ("Alice's MacBook Pro.local", "Alice-s-MacBook-Pro"),
    ("  dev_box-2  ", "dev_box-2"),
    ("-_-edge-_-", "edge"),
    ("ünïcode", "n-code"),
    ("x" * 80, "x" * 64),
    ("", "device"),
    ("...", "device"),
    ("ÄÖÜ", "device"),
])
def test_a_hostname_becomes_a_valid_device_name(hostname, expected):
    assert device.sanitized(hostname) == expected


def test_the_default_is_this_machines_hostname(home):
    cfg = config_mod.load(home)
    assert device.name(cfg) == device.sanitized(os.uname().nodename)
    assert device.source(cfg) == "hostname"


def test_status_shows_the_hostname_then_the_name_the_user_sets(home):
    fresh = json.loads(run_cm(["status", "--json"]).stdout)
    assert fresh["device"] == {"name": device.sanitized(os.uname().nodename), "source": "hostname"}
    assert not os.path.exists(home)  # status still creates nothing
    text = run_cm(["status"]).stdout.decode()
    assert f"device:      {fresh['device']['name']} (from the hostname;" in text

    proc = run_cm(["config", "set", "deviceName", "work-laptop.2"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(run_cm(["status", "--json"]).stdout)
    assert report["device"] == {"name": "work-laptop.2", "source": "config"}
    assert "device:      work-laptop.2 (set in config.json)" in run_cm(["status"]).stdout.decode()
    assert device.name(config_mod.load(home)) == "work-laptop.2"


@pytest.mark.parametrize("bad", ["", "two words", "-dash-first", "x" * 65, "tab\there", "name\n", "dev/../x", 7])
def test_an_invalid_device_name_is_refused_and_nothing_is_written(home, bad):
    data = config_mod.default_config(home)
    data["deviceName"] = bad
    with pytest.raises(ConfigError):
        config_mod.validate(data)
    if not isinstance(bad, str):
        return  # on the command line "7" is the text 7, a valid name
    config_mod.save(home, config_mod.default_config(home))
    with open(os.path.join(home, "config.json"), "rb") as handle:
        before = handle.read()
    proc = run_cm(["config", "set", "--", "deviceName", bad])  # "--": a leading dash is a value here
    assert proc.returncode != 0
    err = proc.stderr.decode()
    assert err.startswith("cm: CONFIG_INVALID: ") and "deviceName" in err and "Traceback" not in err
    with open(os.path.join(home, "config.json"), "rb") as handle:
        assert handle.read() == before
