"""The click group every command registers on, the one place errors become output, and ``echo``.

Domain code raises ``CmError``; ``CmGroup.invoke`` turns it into one ``cm: CODE: message`` line on
stderr and exit code 1 (2 stays click's usage error).

``echo`` is the only way commands print. When the stream is a terminal, the text passes through
``textchars.for_terminal``, so memory, configuration or provider text can never send escape
sequences, bells or bidirectional overrides to the user's terminal (they show as ``^[``, ``^G``,
``\\u202e``). ``lead`` is the command's own fixed label and may carry styling. Output to a pipe or
a file stays byte for byte (``cm show > file`` is what consumers receive).
"""

from __future__ import annotations

import sys

import click

from cmrunner import textchars
from cmrunner.errors import CmError
from cmrunner.home import resolve_home


def is_terminal(err: bool = False) -> bool:
    stream = sys.stderr if err else sys.stdout
    return stream is not None and stream.isatty()


def echo(text: str = "", *, err: bool = False, nl: bool = True, lead: str = "") -> None:
    """Print ``lead`` + ``text``; on a terminal ``text`` is shown visibly escaped (see module docstring)."""
    if is_terminal(err):
        text = textchars.for_terminal(text)
    # color=True: click would otherwise strip ANSI-looking sequences from piped output, so a pipe
    # would no longer get exactly the bytes consumers receive; styling is only ever added on a terminal.
    click.echo(lead + text, err=err, nl=nl, color=True)


class CmGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except CmError as exc:
            echo(exc.line(), err=True)
            ctx.exit(1)


def _home(ctx: click.Context) -> str:
    return resolve_home(ctx.obj.get("home"))


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
