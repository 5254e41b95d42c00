"""`cm --help` lists the user's commands apart from the entries hosts run, and `--help` works on every command."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner
from conftest import run_cm

from cmrunner import cli as cli_mod
from cmrunner.commands.base import HostCommand

HOST_ENTRIES = ["capture", "hook", "mcp", "session-drain", "session-refresh"]


def _all(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, cmd in group.commands.items():
        found.append((*prefix, name))
        if isinstance(cmd, click.Group):
            found += _all(cmd, (*prefix, name))
    return found


COMMANDS = _all(cli_mod.cli)


def _listed(text: str) -> set[str]:
    return {line.split()[0] for line in text.split("Commands:")[-1].splitlines() if line.startswith("  ")}


def test_host_entries_have_their_own_section():
    out = run_cm(["--help"]).stdout.decode()
    mine, hosts = out.split("Used by hosts (not typed by hand):")
    listed = _listed
    assert listed(hosts) == set(HOST_ENTRIES)
    assert not listed(mine) & set(HOST_ENTRIES) and {"status", "show", "demo"} <= listed(mine)
    assert sorted(n for (n,) in [c for c in COMMANDS if len(c) == 1]
                  if isinstance(cli_mod.cli.commands[n], HostCommand)) == HOST_ENTRIES


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_works_on_every_command(path):
    result = CliRunner().invoke(cli_mod.cli, [*path, "--help"], prog_name="cm")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: cm {' '.join(path)} ")


@pytest.mark.parametrize("entry", ["hook", "capture", "session-refresh", "session-drain"])
def test_help_on_a_host_entry_prints_its_usage_and_runs_nothing(home, entry):
    """The console script dispatches these before click; `--help` still reaches click's help."""
    for args in ([entry, "--help"], [entry, "codex", "-h"]):
        proc = run_cm(args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.decode().startswith(f"Usage: cm {entry} ") and proc.stderr == b""
    assert not os.path.exists(home), "asking for help created nothing"
