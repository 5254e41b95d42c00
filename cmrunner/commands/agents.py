"""`cm agents [install|remove HOST]`: Agent Integration for scripts (``manage/integrations/agents.py``)."""

from __future__ import annotations

import json

import click

from cmrunner.commands.base import _home, cli, echo
from cmrunner.core.errors import CmError

HOSTS_HELP = "codex, claude-code, gemini, pi or chatgpt-work"


@cli.group("agents", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON array for scripts.")
@click.pass_context
def agents_group(ctx: click.Context, as_json: bool) -> None:
    """List the agents cm knows: installed by cm, found here, version. `install` / `remove` change one."""
    if ctx.invoked_subcommand is not None:
        return
    from cmrunner.manage.integrations import agents

    rows = agents.listing(_home(ctx))
    if as_json:
        echo(json.dumps([r.as_json() for r in rows], indent=2))
        return
    for row in rows:
        state = "installed" if row.installed else "found" if row.found else "not found"
        echo(f"{row.public_id:<13} {state:<10} {row.version or '-':<12} {row.title}: {row.detail}")


def _done(planned: object, verb: str, title: str) -> None:
    from cmrunner.manage.integrations import manager

    assert isinstance(planned, manager.Plan)
    echo(f"{verb} {title}: {len(planned.changes)} file(s) changed" if planned.changes else
         f"{title} is already {verb.lower()}; nothing changed")
    for note in planned.notes:
        echo(note)


@agents_group.command("install")
@click.argument("host")
@click.option("--import-server/--no-import-server", "init", default=None,
              help="ChatGPT Work: also install the AI Understanding Import server (default: as it is).")
@click.option("--allow-agent-observation", "grant", is_flag=True,
              help="Confirm the disclosure the import server needs (adds agent_observation).")
@click.pass_context
def agents_install(ctx: click.Context, host: str, init: bool | None, grant: bool) -> None:
    """Install cm's hooks and read MCP server into HOST (codex, claude-code, gemini, pi, chatgpt-work)."""
    from cmrunner.manage.integrations import agents, discovery

    internal = discovery.parse_id(host)
    if init and internal != "chatgpt":
        raise CmError("IMPORT_SERVER_CHATGPT_ONLY", "--import-server goes with chatgpt-work only")
    _done(agents.install(_home(ctx), internal, init, grant), "Installed", discovery.TITLES[internal])


@agents_group.command("remove")
@click.argument("host")
@click.pass_context
def agents_remove(ctx: click.Context, host: str) -> None:
    """Remove exactly what cm installed into HOST (codex, claude-code, gemini, pi, chatgpt-work)."""
    from cmrunner.manage.integrations import agents, discovery

    internal = discovery.parse_id(host)
    planned = agents.remove(_home(ctx), internal)
    if planned is None:
        echo(f"{discovery.TITLES[internal]} was not installed by cm; nothing changed")
        return
    _done(planned, "Removed", discovery.TITLES[internal])
