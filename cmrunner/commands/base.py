"""The click group every command registers on, and the one place errors become output.

Domain code raises ``CmError``; ``CmGroup.invoke`` turns it into one ``cm: CODE: message`` line on
stderr and exit code 1 (2 stays click's usage error).
"""

from __future__ import annotations

import click

from cmrunner import safety
from cmrunner.errors import CmError
from cmrunner.home import resolve_home


class CmGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except CmError as exc:
            click.echo(exc.line(), err=True)
            ctx.exit(1)


def _home(ctx: click.Context) -> str:
    home = resolve_home(ctx.obj.get("home"))
    # Every command that works on a home scans with the deep rules and that home's allow-list.
    safety.configure(home, deep=True)
    return home


@click.group(cls=CmGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", "home", default=None, help="Configuration home (default: $COMMON_MEMORY_HOME or ~/.common-memory).")
@click.version_option(package_name="common-memory-cm", prog_name="cm")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """cm: durable, user-owned memory for coding agents.

    Alone, in a terminal, `cm` opens interactive management; elsewhere it prints guidance.
    """
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    if ctx.invoked_subcommand is None:
        from cmrunner.commands import manage

        manage.home_screen(ctx)
