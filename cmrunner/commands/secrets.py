"""`cm secrets`: what looks like a secret in memory, marking findings as not secret, the quarantine."""

from __future__ import annotations

import json

import click

from cmrunner.commands.base import _home, cli, echo
from cmrunner.views import secretreport


@cli.group()
def secrets() -> None:
    """Sections withheld because they look like secrets, the allow-list, quarantined secrets."""


@secrets.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the findings and the quarantine count.")
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    """Every finding in memory: document, section, rule, the matched span masked to its first and
    last characters, and the fingerprint for `cm secrets allow` (never the value)."""
    report = secretreport.gather(_home(ctx), previews=True)
    if as_json:
        echo(json.dumps({"findings": [row.as_dict() for row in report.rows],
                         "quarantinedSecrets": report.quarantined}, ensure_ascii=False, indent=2))
        return
    if not report.rows:
        echo("no memory section looks like a secret")
    for row in report.rows:
        echo(secretreport.line(row))
    if report.withheld:
        echo("withheld sections reach no agent: remove the value from the file, or if it is not a secret run "
                   "`cm secrets allow <fingerprint>`")
    if report.quarantined:
        echo(f"{report.quarantined} quarantined observation(s) keep text that looked like a secret; "
                   "`cm secrets purge-quarantine` deletes it now (it is deleted after 7 days anyway)")


@secrets.command("allow")
@click.argument("fingerprint")
@click.pass_context
def allow_command(ctx: click.Context, fingerprint: str) -> None:
    """Mark a finding as not secret: its sections are delivered and the Writer accepts it."""
    added = secretreport.allow(_home(ctx), fingerprint)
    echo(f"{fingerprint.lower()}: {'allowed' if added else 'was already allowed'}")


@secrets.command("disallow")
@click.argument("fingerprint")
@click.pass_context
def disallow_command(ctx: click.Context, fingerprint: str) -> None:
    """Undo `cm secrets allow`."""
    removed = secretreport.disallow(_home(ctx), fingerprint)
    echo(f"{fingerprint.lower()}: {'no longer allowed' if removed else 'was not allowed'}")


@secrets.command("purge-quarantine")
@click.pass_context
def purge_command(ctx: click.Context) -> None:
    """Delete now the text of quarantined observations that looked like secrets."""
    count = secretreport.purge_quarantine(_home(ctx))
    echo(f"deleted the text of {count} quarantined observation(s)")
