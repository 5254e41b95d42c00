"""Running the Writer by hand: `cm flush`, `cm retry`, `cm cancel`, `cm release` and `cm demo`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cmrunner.commands.base import _home, cli, echo, echo_outcome
from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths

if TYPE_CHECKING:  # the Writer side loads only when a command runs it
    from cmrunner.writer_proc.flush import FlushReport


@cli.command()
@click.pass_context
def flush(ctx: click.Context) -> None:
    """Process queued work now, in the foreground; exit 1 unless everything was processed."""
    from cmrunner.writer_proc import flush as flush_mod

    cfg = config_mod.load(_home(ctx))

    report = flush_mod.flush(DataPaths(cfg.data_root), cfg, echo_outcome)
    from cmrunner.secrets import withhold

    withhold.refresh(DataPaths(cfg.data_root))  # the read path's findings for what was just committed
    if report.followed:
        echo("a running drain held the queue; followed it to the end")
    _outcome_summary(_home(ctx), report)
    left = ", ".join(f"{k} {v}" for k, v in report.remaining.items() if v)
    echo(f"remaining: {left or 'nothing'}{'; a job is waiting for its backoff or lease' if report.waiting else ''}")
    if report.open_turns:
        turns = "1 turn waits" if report.open_turns == 1 else f"{report.open_turns} turns wait"
        echo(f"{turns} in open sessions (sealed after ten settled interactions or when the session ends)")
    from cmrunner.commands import sync as sync_command

    sync_command.after_flush(_home(ctx), [o.job_id for o in report.outcomes if o.state == "committed"])
    if report.cap is not None:
        raise report.cap.error()
    if not report.complete:
        echo("flush incomplete: see `cm status`", err=True)
        ctx.exit(1)


def _outcome_summary(home: str, report: FlushReport) -> None:
    """What the flush did to the memory, in the user's terms: the sections added, changed or
    removed, or why nothing was kept. Work that failed before this flush ran (in a drain it followed,
    or earlier) is never called "nothing was waiting"."""
    from cmrunner.views import history as history_view

    outcomes = report.outcomes
    finished = [o.job_id for o in outcomes if o.state in ("committed", "ignored")]
    changed = history_view.changes_of(home, finished)
    dead = report.remaining.get("dead", 0)
    if changed:
        echo("memory changed: " + "; ".join(changed))
    elif not outcomes and dead:
        items = "1 item" if dead == 1 else f"{dead} items"
        echo(f"nothing was kept: the work left failed ({items}); `cm status` says why and `cm retry <job>` "
             "tries it again")
    elif not outcomes and report.followed:
        echo("nothing was kept by this flush: the running drain it followed processed the queue "
             "(`cm history` shows what changed)")
    elif not outcomes:
        echo("nothing was kept, because nothing was waiting to be processed")
    elif finished:
        echo("nothing was kept, because the Memory Agent found nothing in it to remember or change")
    else:
        echo("nothing was kept, because no job finished (see the lines above and `cm status`)")


@cli.command()
@click.argument("job_id")
@click.pass_context
def retry(ctx: click.Context, job_id: str) -> None:
    """Revive a dead or quarantined job (its history is kept) and start a drain.

    JOB_ID may be any unique prefix of at least 8 characters, such as the 12 that `cm status` lists.
    """
    from cmrunner.manage import adjust

    full = adjust.retry(_home(ctx), job_id)
    echo(f"job {full[:12]} queued for another attempt")


@cli.command()
@click.argument("target")
@click.pass_context
def cancel(ctx: click.Context, target: str) -> None:
    """Drop queued, waiting or failed work before it is sent; its text is deleted.

    TARGET is a job id (a unique prefix of at least 8 characters, as `cm status` lists), an
    observation id, or an import id (md-…, as `cm import` printed). A job being processed now is
    refused; processed work is forgotten with Adjust Memory instead.
    """
    from cmrunner.manage import adjust

    done = adjust.cancel(_home(ctx), target)
    jobs = f" and {len(done.job_ids)} job(s) ({', '.join(j[:12] for j in done.job_ids)})" if done.job_ids else ""
    echo(f"cancelled {len(done.observation_ids)} item(s){jobs}; {done.text_bytes:,} bytes of text deleted; "
         "nothing of it will be sent")
    if done.skipped:
        echo(f"{done.skipped} part(s) are being processed now and were left alone; cancel them once that ends",
             err=True)


@cli.command()
@click.argument("observation_id", required=False, type=int)
@click.option("--code", default=None, help="Release every quarantined observation with this code.")
@click.pass_context
def release(ctx: click.Context, observation_id: int | None, code: str | None) -> None:
    """Send quarantined observations back to the queue where their reason allows it."""
    from cmrunner.manage import release as release_mod

    count, released = release_mod.release(_home(ctx), observation_id, code)
    echo(f"released {count} observation(s) ({released}) back to the queue; a drain is on its way")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print the commands to explore it.")
@click.pass_context
def demo(ctx: click.Context, keep: bool) -> None:
    """The whole loop against cm's synthetic model, on a fresh home: a temporary one, removed at the end
    unless --keep, or --home DIR, a new or empty folder (refused otherwise), which is kept."""
    from cmrunner.core.home import resolve_home
    from cmrunner.views import demo as demo_mod

    typed = ctx.find_root().obj.get("home")  # never $COMMON_MEMORY_HOME or the default: the demo never uses yours
    for line in demo_mod.run(keep=keep, demo_home=None if typed is None else resolve_home(typed)):
        echo(line)
