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
                   "--api", "chat_completions", "--allow-scope", "global", "--api-key-stdin", "--skip-check"],
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


# --- --home after the subcommand (README: every command takes it) -------------------------------


def _elsewhere(tmp_path) -> str:
    other = str(tmp_path / "elsewhere")
    os.mkdir(other, 0o700)
    return other


def test_home_after_the_subcommand_is_the_home_used(home, tmp_path):
    other = _elsewhere(tmp_path)
    assert run_cm(["config", "init", "--home", other]).returncode == 0
    assert os.path.exists(os.path.join(other, "config.json")) and not os.path.exists(home)
    status = run_cm(["status", "--json", "--home", other])
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["home"] == other
    project = tmp_path / "proj"
    project.mkdir()
    registered = run_cm(["project", "register", str(project), "Proj", "--home", other])
    assert registered.returncode == 0, registered.stderr
    listed = run_cm(["project", "list", "--json", "--home", other])
    assert [p["name"] for p in json.loads(listed.stdout)] == ["Proj"], listed.stdout
    shown = run_cm(["show", "--plain", "--home", other])
    assert shown.returncode == 0, shown.stderr
    assert run_cm(["config", "--home", other, "show"]).returncode == 0  # a group takes it too
    assert run_cm(["--home", other, "status"]).returncode == 0  # before the subcommand still works
    assert run_cm(["--home", other, "status", "--home", other + "/"]).returncode == 0  # same path twice
    assert not os.path.exists(home), "the environment's home was never used"


def test_two_different_homes_are_refused(home, tmp_path):
    other = _elsewhere(tmp_path)
    for args in (["--home", other, "status", "--home", home], ["config", "--home", other, "init", "--home", home],
                 ["--home", other, "session-drain", "--home", home]):
        proc = run_cm(args)
        assert proc.returncode == 1, args
        assert proc.stderr.decode().startswith("cm: HOME_CONFLICT: "), proc.stderr
        assert not os.path.exists(os.path.join(home, "config.json"))


def test_home_before_a_host_entry_is_handed_to_it(home, tmp_path):
    other = _elsewhere(tmp_path)
    proc = run_cm(["--home", other, "session-drain"])
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(os.path.join(other, "data", "runtime.sqlite")) and not os.path.exists(home)


def test_every_registered_command_accepts_home():
    import click

    from cmrunner.cli import cli

    def walk(group: click.Group, path: list[str]):
        for name, cmd in group.commands.items():
            yield [*path, name], cmd
            if isinstance(cmd, click.Group):
                yield from walk(cmd, [*path, name])

    seen = 0
    for path, cmd in walk(cli, []):
        seen += 1
        passthrough = [p for p in cmd.params if isinstance(p, click.Argument) and p.type is click.UNPROCESSED]
        if passthrough:  # host entries: their own parser reads --home (tested through the real cm above)
            continue
        options = [p for p in cmd.params if isinstance(p, click.Option) and "--home" in p.opts]
        assert len(options) == 1, f"`cm {' '.join(path)}` does not take --home"
        ctx = click.Context(cmd, info_name=path[-1], obj={"home": None})
        parser = cmd.make_parser(ctx)
        values, _args, _order = parser.parse_args(["--home", "/abs/home"])
        assert values["home"] == "/abs/home", path
    assert seen >= 20
