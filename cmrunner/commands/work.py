"""Running the Writer by hand: `cm flush`, `cm retry`, `cm release` and `cm demo`."""

from __future__ import annotations

import click

from cmrunner.commands.base import _home, cli, echo, echo_outcome
from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths


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
    left = ", ".join(f"{k} {v}" for k, v in report.remaining.items() if v)
    echo(f"remaining: {left or 'nothing'}{'; a job is waiting for its backoff or lease' if report.waiting else ''}")
    if report.open_turns:
        turns = "1 turn waits" if report.open_turns == 1 else f"{report.open_turns} turns wait"
        echo(f"{turns} in open sessions (sealed after ten settled interactions or when the session ends)")
    if report.cap is not None:
        raise report.cap.error()
    if not report.complete:
        echo("flush incomplete: see `cm status`", err=True)
        ctx.exit(1)


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
@click.argument("observation_id", required=False, type=int)
@click.option("--code", default=None, help="Release every quarantined observation with this code.")
@click.pass_context
def release(ctx: click.Context, observation_id: int | None, code: str | None) -> None:
    """Send quarantined observations back to the queue where their reason allows it."""
    from cmrunner.manage import release as release_mod

    count, released = release_mod.release(_home(ctx), observation_id, code)
    echo(f"released {count} observation(s) ({released}) back to the queue; a drain is on its way")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
def demo(keep: bool) -> None:
    """A capture round trip on a fresh temporary home: print what was captured."""
    from cmrunner.views import demo as demo_mod

    for line in demo_mod.run(keep=keep):
        echo(line)
