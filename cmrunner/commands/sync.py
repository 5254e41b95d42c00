"""One memory on every machine: `cm sync`, `cm sync init|status|repair|purge-history`."""

from __future__ import annotations

import datetime
import json

import click

from cmrunner.commands.base import _home, cli, confirm, echo
from cmrunner.core.home import DataPaths


def _paths(home: str) -> DataPaths:
    from cmrunner.core import config as config_mod

    return DataPaths(config_mod.load(home).data_root)


def _deadline(home: str) -> float:
    """An automatic sync's overall deadline in seconds (``sync.autoDeadlineSeconds``)."""
    from cmrunner.core import config as config_mod

    return float(config_mod.load(home).sync_auto_deadline_seconds)


def _say(outcome: object) -> None:
    from cmrunner.sync.engine import Outcome

    assert isinstance(outcome, Outcome)
    parts = ["committed local changes" if outcome.committed else "nothing new to commit"]
    if outcome.pulled:
        parts.append(f"{outcome.pulled} document(s) updated from the remote")
    if outcome.conflicts:
        parts.append(f"{outcome.conflicts} section(s) changed on both machines: the remote's kept, yours in "
                     "`cm trash` (reason: sync conflict)")
    parts.append("pushed" if outcome.pushed else "the remote already had it")
    echo("synced: " + "; ".join(parts))
    for name in outcome.withheld:
        echo(f"kept on this machine: a section of memory/{name} the secret net withholds is not pushed "
             "(SYNC_SECTION_KEPT_LOCAL); `cm secrets list` shows it, the rest of the file syncs", err=True)


@cli.group(invoke_without_command=True)
@click.option("--receipts", default=None, hidden=True, help="The receipts just published (the drain names them).")
@click.option("--auto", is_flag=True, hidden=True, help="Started by the drain: wait for nothing, print nothing.")
@click.pass_context
def sync(ctx: click.Context, receipts: str | None, auto: bool) -> None:
    """Commit the memory folder as it is, merge the remote's changes by section, and push now."""
    if ctx.invoked_subcommand is not None:
        return
    from cmrunner.core import syncstate
    from cmrunner.core.errors import CmError
    from cmrunner.sync import engine

    home = _home(ctx)
    paths = _paths(home)
    message = engine.commit_message(paths, receipts.split(","), syncstate.device_name(home)) if receipts else None
    if auto:
        try:
            engine.run(paths, home, message, wait=5.0, deadline=_deadline(home))
        except CmError:
            ctx.exit(1)  # recorded for `cm status`; a background run prints nothing
        return
    _say(engine.run(paths, home, message))


def after_flush(home: str, receipts: list[str]) -> None:
    """`cm flush` syncs what it committed, in the foreground; a remote that fails leaves the
    memory committed locally and says so (recorded for `cm status` too)."""
    from cmrunner.core import syncstate
    from cmrunner.core.errors import CmError
    from cmrunner.sync import engine

    paths = _paths(home)
    if not syncstate.configured(paths):
        return
    try:
        outcome = engine.run(paths, home, engine.commit_message(paths, receipts, syncstate.device_name(home))
                             if receipts else None, deadline=_deadline(home))
    except CmError as exc:
        echo(f"sync: not synced ({exc.code}); the memory is committed to git locally and cm retries later; "
             "`cm status` shows it", err=True)
        return
    echo("sync: " + ("pushed" if outcome.pushed else "up to date"))


@sync.command("init")
@click.argument("remote")
@click.option("--branch", default="main", show_default=True, help="The branch that holds the memory.")
@click.pass_context
def init_command(ctx: click.Context, remote: str, branch: str) -> None:
    """Make the memory folder a git working tree synced with REMOTE (a path or any URL git accepts)."""
    from cmrunner.sync import setup

    home = _home(ctx)
    warned = setup.warning(remote)
    if warned:
        echo(f"warning: {warned}", err=True)
    _say(setup.init(_paths(home), home, remote, branch))


@sync.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """Where the memory syncs to, ahead/behind as of the last sync, and the last sync's outcome."""
    from cmrunner.sync import setup

    home = _home(ctx)
    found = setup.status(_paths(home), home)
    if as_json:
        echo(json.dumps(found, indent=2))
        return
    for line in lines(found):
        echo(line)


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def lines(found: dict) -> list[str]:
    if not found["configured"]:
        return ["memory sync is not set up: `cm sync init <remote>` (a private repository you own)"]
    out = [f"remote: {found['remote']} (branch {found['branch']}), this device: {found['device']}"]
    if found.get("ahead") is not None:
        out.append(f"ahead {found['ahead']}, behind {found['behind']} (as of the last fetch)")
    last = found.get("last")
    if last:
        said = "ok" if last["outcome"] == "ok" and not last.get("code") else f"{last['outcome']}: {last['code']}"
        out.append(f"last sync: {_when(last['at'])} {said}")
        if last.get("detail") and last["outcome"] != "ok":
            out.append(f"  {last['detail']}")
    out.append(f"last successful sync: {_when(found.get('lastOk'))}")
    if found.get("problem"):
        out.append(f"problem: {found['problem']}")
    return out


@sync.command("repair")
@click.pass_context
def repair_command(ctx: click.Context) -> None:
    """End a hand-started merge, clear stale git locks, rebuild a damaged repository; then sync."""
    from cmrunner.sync import setup

    home = _home(ctx)
    done, outcome = setup.repair(_paths(home), home)
    for line in done or ["nothing needed repair"]:
        echo(line)
    _say(outcome)


@sync.command("purge-history")
@click.option("--yes", is_flag=True, help="Do not ask.")
@click.pass_context
def purge_history_command(ctx: click.Context, yes: bool) -> None:
    """Rewrite the remote's history to one commit of the memory as it is now (force-with-lease)."""
    from cmrunner.sync import setup

    home = _home(ctx)
    if not yes:
        confirm("Replace the remote's whole history by one commit?",
                "older versions leave the remote branch; other clones keep theirs until they sync")
    new = setup.purge_history(_paths(home), home)
    echo(f"the remote's history is now one commit ({new[:12]}); other clones, forks and the hosting service may "
         "still hold the old commits: re-clone or delete them there")
