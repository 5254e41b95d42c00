"""Running the Writer by hand: `cm flush`, `cm retry`, and `cm demo`."""

from __future__ import annotations


import click

from cmrunner import config as config_mod
from cmrunner.commands.base import _home, cli
from cmrunner.home import DataPaths


@cli.command()
@click.pass_context
def flush(ctx: click.Context) -> None:
    """Process queued work now, in the foreground; exit 1 unless everything was processed."""
    from cmrunner.writer_proc import flush as flush_mod

    cfg = config_mod.load(_home(ctx))

    def progress(outcome: object) -> None:
        code = f" ({outcome.code})" if outcome.code else ""
        click.echo(f"job {outcome.job_id[:12]}: {outcome.state}{code}")

    report = flush_mod.flush(DataPaths(cfg.data_root), cfg, progress)
    from cmrunner import secretcache

    secretcache.refresh(DataPaths(cfg.data_root))  # the read path's findings for what was just committed
    if report.followed:
        click.echo("a running drain held the queue; followed it to the end")
    left = ", ".join(f"{k} {v}" for k, v in report.remaining.items() if v)
    click.echo(f"remaining: {left or 'nothing'}{'; a job is waiting for its backoff or lease' if report.waiting else ''}")
    if not report.complete:
        click.echo("flush incomplete: see `cm status`", err=True)
        ctx.exit(1)


@cli.command()
@click.argument("job_id")
@click.pass_context
def retry(ctx: click.Context, job_id: str) -> None:
    """Revive a dead or quarantined job (its history is kept) and start a drain."""
    from cmrunner import adjust

    adjust.retry(_home(ctx), job_id)
    click.echo(f"job {job_id} queued for another attempt")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
def demo(keep: bool) -> None:
    """A capture round trip on a fresh temporary home: print what was captured."""
    from cmrunner import demo as demo_mod

    for line in demo_mod.run(keep=keep):
        click.echo(line)
