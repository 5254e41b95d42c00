"""Host entries, listed apart in `cm --help` ("Used by hosts"): `cmrunner.entry` dispatches them
before click loads.

Reached through click only when something precedes the entry name (``cm --home X hook codex``)
or when ``--help`` is asked for (``cm hook --help``: ``entry`` hands that to click, which prints
the docstring and exits before the entry runs); the root ``--home`` is handed on with
``forward_home``."""

from __future__ import annotations

import sys

import click

from cmrunner.commands.base import HostCommand, cli, forward_home


@cli.command("hook", cls=HostCommand, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="HOST --home HOME")
@click.pass_context
def hook_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Codex / ChatGPT Work hook entry: `cm hook codex|work --home <abs>` (event on stdin)."""
    from cmrunner.hooks import codex

    sys.exit(codex.main(forward_home(ctx, args)))


@cli.command("capture", cls=HostCommand, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="--home HOME")
@click.pass_context
def capture_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Pi bridge entry: `cm capture --home <abs>` (one Pi event as JSON on stdin)."""
    from cmrunner.hooks import pi

    sys.exit(pi.main(forward_home(ctx, args)))


@cli.command("session-refresh", cls=HostCommand, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="--home HOME --client codex|chatgpt-work [--thread ID]")
@click.pass_context
def refresh_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Replace this session's frozen memory (the /memory-refresh skill runs it)."""
    from cmrunner.hooks import refresh

    sys.exit(refresh.main(forward_home(ctx, args)))


@cli.command("session-drain", cls=HostCommand, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[--home HOME] [--recover ID]")
@click.pass_context
def drain_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """The detached single-instance consumer: `cm session-drain --home <abs>`."""
    from cmrunner.writer_proc import drain

    sys.exit(drain.main(forward_home(ctx, args)))
