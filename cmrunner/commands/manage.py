"""Interactive management: `cm` with no arguments, `cm config [--network]`, `cm uninstall`.

Contract:
- The interface needs both stdin and stdout to be terminals. `cm` alone outside a terminal prints
  guidance and exits 0 instead of waiting; the `config` and `uninstall` wizards fail with
  ``TTY_REQUIRED`` (exit 1), pointing at the scriptable commands.
- `cm` alone (``commands/base.py``) and `cm config [--network]` alone (``commands/setup.py``)
  call ``home_screen`` / ``config_screen`` here; `config init` and `config show` stay scriptable.
- The textual UI is imported only here, inside the command bodies: never on a hook, capture or read
  path, and not even for other commands.
"""

from __future__ import annotations

import sys

import click

from cmrunner.commands.base import _home, cli, echo
from cmrunner.core.errors import CmError

GUIDANCE = """cm keeps durable, user-owned memory for your coding agents.

Interactive management (setup, agents, memory, model and network settings) runs when you type
`cm` in a terminal: both stdin and stdout must be a TTY, and this invocation has none.

For scripts and automation:
  cm status                  configuration, storage and queue (creates nothing)
  cm config init --base-url URL --model NAME --api-key-stdin < keyfile
  cm show [--plain]          what your agents receive
  cm flush / cm retry JOB    process queued work now / retry a failed job
  cm --help                  every command
"""


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _run(ctx: click.Context, start: str) -> None:
    from cmrunner.tui import app

    # the setup wizard (`cm` alone, `cm config`) creates the home it is given
    app.run(_home(ctx, may_be_new=start != "uninstall"), start)


def home_screen(ctx: click.Context) -> None:
    """`cm` alone: the home screen in a terminal, guidance elsewhere (exit 0, never waits)."""
    if not interactive():
        echo(GUIDANCE, nl=False)
        return
    _run(ctx, "manage")


cli.bare = home_screen


def config_screen(ctx: click.Context, network: bool) -> None:
    """`cm config [--network]` alone: the model wizard or the network settings."""
    if not interactive():
        raise CmError("TTY_REQUIRED", "`cm config` is interactive and needs a terminal; use `cm config init` in "
                                      "scripts")
    _run(ctx, "network" if network else "config")


@cli.command("uninstall")
@click.pass_context
def uninstall_command(ctx: click.Context) -> None:
    """Remove cm's integrations, configuration and program (Memory Data is asked about separately)."""
    if not interactive():
        raise CmError("TTY_REQUIRED", "`cm uninstall` is interactive and needs a terminal; remove agents from `cm` "
                                      "or run it in a terminal")
    _run(ctx, "uninstall")
