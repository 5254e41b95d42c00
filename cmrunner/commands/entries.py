"""Host entries, listed for `cm --help`: `cmrunner.entry` dispatches them before click loads.

Reached through click only when something precedes the entry name (``cm --home X hook codex``);
the root ``--home`` is then handed on with ``forward_home``."""

from __future__ import annotations

import sys

import click

from cmrunner.commands.base import cli, forward_home


@cli.command("hook", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Codex / ChatGPT Work hook entry: `cm hook codex|work --home <abs>` (event on stdin)."""
    from cmrunner.hooks import codex

    sys.exit(codex.main(forward_home(ctx, args)))


@cli.command("capture", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def capture_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Pi bridge entry: `cm capture --home <abs>` (one Pi event as JSON on stdin)."""
    from cmrunner.hooks import pi

    sys.exit(pi.main(forward_home(ctx, args)))


@cli.command("session-refresh", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def refresh_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Replace this session's frozen memory (the /memory-refresh skill runs it)."""
    from cmrunner.hooks import refresh

    sys.exit(refresh.main(forward_home(ctx, args)))


@cli.command("session-drain", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def drain_stub(ctx: click.Context, args: tuple[str, ...]) -> None:
    """The detached single-instance consumer: `cm session-drain --home <abs>`."""
    from cmrunner.writer_proc import drain

    sys.exit(drain.main(forward_home(ctx, args)))
