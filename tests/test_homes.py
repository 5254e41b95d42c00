"""Wrong homes do not look like empty memory: a typed ``--home`` must exist (``HOME_NOT_FOUND``)
except for the commands that create one, and ``cm status`` exits 1 when the configuration is
invalid or the data root is unsafe."""

from __future__ import annotations

import json
import os

import click
import pytest
from conftest import run_cm

from cmrunner import cli as cli_mod
from cmrunner.core import config as config_mod

# Every command that reads a home, with arguments that get it past click's own parsing.
READERS = {
    "status": [], "show": [], "history": [], "trash": [], "usage": [], "usage caps": [], "config show": [],
    "config get": ["dataRoot"], "config set": ["spend.tokensPerDay", "5"],
    "project list": [], "project register": ["/tmp", "x"], "project remove": ["x"], "project adopt-remote-id": ["x"], "secrets list": [], "secrets allow": ["ab"], "secrets disallow": ["ab"], "secrets purge-quarantine": [],
    "doctor": [], "flush": [], "network-test": [], "why": ["profile"], "codex-config": [], "mcp-config": [],
    "work-config": ["--mode", "posix", "--output", "/tmp/nc-x"], "undo": ["v1"], "purge": ["profile", "X", "--yes"],
    "restore": ["t"], "retry": ["abcdefgh"], "cancel": ["abcdefgh"], "release": ["1"], "import": ["/tmp/x.md"],
    "eval": ["--synthetic", "careful", "--world", "remember-profile"],
    "agents": [], "agents install": ["claude-code"], "agents remove": ["claude-code"], "fix": ["profile"],
    "sync": [], "sync init": ["/tmp/remote.git"], "sync status": [], "sync repair": [], "sync purge-history": ["--yes"],
}
# Commands that create the home they are given; `cm uninstall` needs a terminal before it reads one
# (tests/test_uninstall.py); host entries have their own parsers and never fail a host.
CREATORS = {"config", "config init", "demo", "uninstall"}
ENTRIES = {"hook", "capture", "session-refresh", "session-drain", "mcp"}
# Commands that read no home at all.
HOMELESS = {"synthetic-model serve"}


def _not_found(proc) -> bool:
    return proc.returncode == 1 and proc.stderr.decode().startswith("cm: HOME_NOT_FOUND: ")


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_typed_home_that_does_not_exist_is_home_not_found(tmp_path, name):
    missing = str(tmp_path / "typo")
    proc = run_cm(["--home", missing, *name.split(), *READERS[name]])
    assert _not_found(proc), proc.stderr
    assert "--home " + missing + " does not exist" in proc.stderr.decode()
    assert not os.path.exists(missing), "nothing was created at the typo"


def _commands(group: click.Group, prefix: str = "") -> set[str]:
    found = set()
    for name, cmd in group.commands.items():
        found.add(prefix + name)
        if isinstance(cmd, click.Group):
            found |= _commands(cmd, prefix + name + " ")
    return found


def test_every_command_is_held_to_it_or_creates_a_home():
    every = _commands(cli_mod.cli)
    assert every >= set(READERS) | CREATORS | ENTRIES | HOMELESS, "the lists name commands that no longer exist"
    assert every - set(READERS) - CREATORS - ENTRIES - HOMELESS == {"project", "secrets", "synthetic-model"}, "say which list a new command belongs to"


def test_a_typed_home_that_is_a_file_is_not_a_home(tmp_path):
    proc = run_cm(["--home", "/etc/passwd", "status"])
    assert _not_found(proc) and "is not a directory" in proc.stderr.decode()


def test_config_init_creates_the_typed_home(tmp_path):
    new = str(tmp_path / "new-home")
    assert run_cm(["--home", new, "config", "init"]).returncode == 0
    assert run_cm(["--home", new, "status"]).returncode == 0


def test_the_environment_home_of_a_fresh_installation_is_not_an_error(home):
    proc = run_cm(["show", "--plain"])
    assert proc.returncode == 0 and "no memory is stored yet" in proc.stdout.decode()


def test_status_exits_1_for_an_invalid_configuration(home):
    os.makedirs(home)
    with open(os.path.join(home, "config.json"), "w") as handle:
        handle.write("{not json")
    text = run_cm(["status"])
    assert text.returncode == 1 and "invalid: CONFIG_INVALID" in text.stdout.decode()
    as_json = run_cm(["status", "--json"])
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["config"]["error"]["code"] == "CONFIG_INVALID"


@pytest.mark.parametrize("kind", ["file", "link"])
def test_status_exits_1_for_an_unsafe_data_root(home, tmp_path, kind):
    root = tmp_path / "root"
    if kind == "file":
        root.write_text("not a directory")
    else:
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        root.symlink_to(real)
    data = config_mod.default_config(home)
    data["dataRoot"] = str(root)
    config_mod.save(home, data)
    proc = run_cm(["status"])
    assert proc.returncode == 1
    assert "problem: UNSAFE_PATH: " in proc.stdout.decode()
    report = json.loads(run_cm(["status", "--json"]).stdout)
    assert report["dataRootProblem"]["code"] == "UNSAFE_PATH"


def test_status_exits_0_for_a_healthy_home(home):
    assert run_cm(["config", "init"]).returncode == 0
    proc = run_cm(["status", "--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dataRootProblem"] is None
