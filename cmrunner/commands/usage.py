"""What cm spends and how to cap it: `cm usage`, `cm usage caps`."""

from __future__ import annotations

import json

import click

from cmrunner.commands.base import _home, cli, echo


@cli.group(invoke_without_command=True)
@click.option("--since", default=None, help="Totals from YYYY-MM-DD, YYYY-MM or the last <N>d days (UTC).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def usage(ctx: click.Context, since: str | None, as_json: bool) -> None:
    """Every model request cm made: by day, month, model, outcome, and what left this machine."""
    if ctx.invoked_subcommand is not None:
        return
    from cmrunner.views import usage as usage_view

    report = usage_view.gather(_home(ctx), usage_view.parse_since(since) if since is not None else None)
    if as_json:
        echo(json.dumps(report, indent=2))
        return
    for line in usage_view.lines(report):
        echo(line)


@usage.command("caps")
@click.option("--tokens-per-day", default=None, help="Input + output tokens per UTC day; 'off' for no cap.")
@click.option("--tokens-per-month", default=None, help="Input + output tokens per UTC month; 'off' for no cap.")
@click.option("--requests-per-hour", default=None, help="Model requests per UTC clock hour; 'off' for no cap.")
@click.pass_context
def caps(ctx: click.Context, tokens_per_day: str | None, tokens_per_month: str | None,
         requests_per_hour: str | None) -> None:
    """Show the spend caps, or change them (waiting work resumes at once when a cap is raised)."""
    from cmrunner.core import config as config_mod, spend
    from cmrunner.manage import spendcaps

    given = {"tokensPerDay": tokens_per_day, "tokensPerMonth": tokens_per_month,
             "requestsPerHour": requests_per_hour}
    changes = {name: spend.parse_cap(name, value) for name, value in given.items() if value is not None}
    now = spendcaps.set_caps(_home(ctx), changes) if changes else config_mod.load(_home(ctx)).spend
    for name in spend.NAMES:
        value = now[name]
        echo(f"{name}: {'no cap' if value is None else f'{value:,}'}{' (the Memory Agent is off)' if value == 0 else ''}")
