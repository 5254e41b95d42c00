"""`cm history` and `cm trash`: what the Memory Agent and you changed in memory, and what it removed."""

from __future__ import annotations

import json

import click

from cmrunner.commands.base import _home, cli, echo
from cmrunner.views import history as history_view


def _header(v: dict) -> str:
    who = v["author"] if v["decision"] is None else f"{v['author']} ({v['decision']})"
    where = " ".join(f"{label} {v[key]}" for label, key in (("receipt", "receipt"), ("client", "client"),
                                                             ("session", "session"), ("model", "model")) if v[key])
    return f"{v['id']}  {v['target']} / {v['section']}  v{v['version']} {v['kind']} by {who}  {v['at']}" + \
        (f"  {where}" if where else "")


@cli.command("history")
@click.argument("document", required=False)
@click.argument("section", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON list for scripts.")
@click.pass_context
def history_command(ctx: click.Context, document: str | None, section: str | None, as_json: bool) -> None:
    """Versions of memory sections, newest first, each with a diff from the one it replaced.

    DOCUMENT is profile, preferences or project:<id>; SECTION a title or sec_ ref."""
    found = history_view.versions(_home(ctx), document, section)
    if as_json:
        echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        echo("no history yet: it is recorded from the first commit that changes a document")
    for v in found:
        echo(_header(v))
        if v["purgedAt"]:
            echo(f"  (purged {v['purgedAt']})")
        elif v["withheld"]:
            echo(f"  (withheld: looks like a secret: {', '.join(v['withheld'])}; see `cm secrets list`)")
        else:
            echo(v["diff"].rstrip("\n") or "  (no text change)")
        echo()


@cli.command("trash")
@click.option("--json", "as_json", is_flag=True, help="One JSON list for scripts.")
@click.pass_context
def trash_command(ctx: click.Context, as_json: bool) -> None:
    """Sections the Memory Agent removed, with the decision that removed them and when they expire."""
    found = history_view.trash(_home(ctx))
    if as_json:
        echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        echo("the trash is empty")
    for t in found:
        why = f"by a {t['decision']} decision" if t["decision"] else "by the Memory Agent"
        echo(f"{t['id']}  {t['target']} / {t['section']}  removed {t['removedAt']} {why} (receipt {t['receipt']}), "
             f"kept until {t['expiresAt']}")
