"""Changing your mind: `cm history`, `cm undo`, `cm trash`, `cm restore`."""

from __future__ import annotations

import json

import click

from cmrunner.commands.base import _home, cli, echo
from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.views import history as history_view


def _paths(home: str) -> DataPaths:
    return DataPaths(config_mod.load(home).data_root)


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


@cli.command("undo")
@click.argument("ref")
@click.option("--force", is_flag=True, help="Undo even if the section changed since (the diff is shown first).")
@click.pass_context
def undo_command(ctx: click.Context, ref: str, force: bool) -> None:
    """Put back what a commit (receipt id) or one version (v<number>) replaced, as a new commit."""
    from cmrunner.writer_proc import undo

    home = _home(ctx)
    try:
        done = undo.run(_paths(home), home, ref, force)
    except undo.ChangedSince as exc:
        echo(exc.diff.rstrip("\n"), err=True)
        raise
    for version, target, title in done.sections:
        echo(f"undid {version}: {target} / {title}")
    echo(f"receipt {done.receipt_id}; `cm history` shows it")


@cli.command("restore")
@click.argument("trash_id")
@click.pass_context
def restore_command(ctx: click.Context, trash_id: str) -> None:
    """Bring a section back from the trash into its document."""
    from cmrunner.writer_proc import restore

    home = _home(ctx)
    done = restore.run(_paths(home), home, trash_id)
    echo(f"restored {done.target} / {done.title} (receipt {done.receipt_id})")
