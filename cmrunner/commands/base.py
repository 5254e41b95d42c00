"""The click group every command registers on, the one place errors become output, ``--home``
and ``echo``.

Domain code raises ``CmError``; ``CmGroup.invoke`` turns it into one ``cm: CODE: message`` line on
stderr and exit code 1 (2 stays click's usage error).

``--home`` is accepted before the subcommand (``cm --home X status``) and by every command and
group itself (``cm status --home X``, ``cm config init --home X``): ``CmGroup.add_command`` gives
each registered command the same option, and ``_take_home`` records every occurrence in the root
context's ``obj``; two different values are ``HOME_CONFLICT``. Commands read the result only
through ``_home(ctx)``; a ``--home`` that is not a directory is ``HOME_NOT_FOUND`` except for the
commands that create a home and the MCP server hosts run (``_home(ctx, may_be_new=True)``).
Host-entry stubs (``hook``, ``capture``, …) pass their arguments through
unparsed to their own stdlib parser, which reads ``--home`` itself; ``forward_home`` hands them a
``--home`` given before the subcommand.

``echo`` is the only way commands print. When the stream is a terminal, the text passes through
``textchars.for_terminal``, so memory, configuration or provider text can never send escape
sequences, bells or bidirectional overrides to the user's terminal (they show as ``^[``, ``^G``,
``\\u202e``). ``lead`` is the command's own fixed label and may carry styling. Output to a pipe or
a file stays byte for byte (``cm show > file`` is what consumers receive).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from cmrunner.core import textchars
from cmrunner.core.errors import CmError
from cmrunner.core.home import resolve_home
from cmrunner.secrets import safety

if TYPE_CHECKING:
    from cmrunner.writer_proc.writer import Outcome

HOME_HELP = "Configuration home, an absolute path (default: $COMMON_MEMORY_HOME or ~/.common-memory)."


def _record_home(ctx: click.Context, value: str) -> None:
    root = ctx.find_root()
    root.ensure_object(dict)
    prior = root.obj.get("home")
    if prior is not None and os.path.normpath(prior) != os.path.normpath(value):
        raise CmError("HOME_CONFLICT", f"--home was given twice with different paths ({prior} and {value}); pass it once")
    root.obj["home"] = value


def _take_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        _record_home(ctx, value)


def _passes_arguments_through(cmd: click.Command) -> bool:
    return any(isinstance(p, click.Argument) and p.type is click.UNPROCESSED for p in cmd.params)


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


def confirm(question: str, consequence: str) -> None:
    """Ask ``question`` before a destructive or paid step; ``--yes`` callers skip this.

    With no terminal to ask on (stdin or stderr not a TTY) it is ``CONFIRMATION_REQUIRED``, naming
    ``consequence`` and ``--yes``, never click's bare ``Aborted!``; a "no" is ``NOT_CONFIRMED``."""
    if not (sys.stdin is not None and sys.stdin.isatty() and is_terminal(err=True)):
        raise CmError("CONFIRMATION_REQUIRED", f"{consequence} and there is no terminal to ask on; pass --yes to go "
                                               "ahead")
    if not click.confirm(question, err=True):
        raise CmError("NOT_CONFIRMED", "you answered no; nothing was done")


def echo_outcome(outcome: Outcome) -> None:
    """One line per processed job, for the commands that follow the queue (``flush``, ``import``)."""
    code = f" ({outcome.cause})" if outcome.cause else ""
    echo(f"job {outcome.job_id[:12]}: {outcome.state}{code}")


class HostCommand(click.Command):
    """A command hosts run (hooks, the Pi bridge, the drain, the MCP server): listed apart in
    ``cm --help``, under "Used by hosts", so the user's own commands stand alone."""


class CmGroup(click.Group):
    group_class = type  # subgroups (`cm config`, `cm project`) are CmGroups too, so their commands get --home
    # What the group does when invoked with no subcommand; the module that owns that behaviour
    # (`commands/manage.py` for `cm` alone) sets it, so this base imports no command module.
    bare: Callable[[click.Context], None] | None = None

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not _passes_arguments_through(cmd) and not any(p.name == "home" for p in cmd.params):
            cmd.params.append(click.Option(["--home"], default=None, expose_value=False, callback=_take_home,
                                           help=HOME_HELP))
        super().add_command(cmd, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The user's commands, then the host entries in their own section."""
        listed = [(name, cmd) for name in self.list_commands(ctx)
                  if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        width = formatter.width - 6 - max((len(name) for name, _ in listed), default=0)
        for title, for_hosts in (("Commands", False), ("Used by hosts (not typed by hand)", True)):
            rows = [(name, cmd.get_short_help_str(width)) for name, cmd in listed
                    if isinstance(cmd, HostCommand) == for_hosts]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except CmError as exc:
            echo(exc.line(), err=True)
            ctx.exit(1)


def _home(ctx: click.Context, may_be_new: bool = False) -> str:
    """The home this command works on. A ``--home`` the user typed must exist (``HOME_NOT_FOUND``)
    unless the command creates a home or is run by a host (``may_be_new``): a typo would otherwise
    read as an empty memory. The default and ``$COMMON_MEMORY_HOME`` name the user's own home, which a fresh
    installation has not created yet, so they are not held to it."""
    explicit = ctx.find_root().obj.get("home")
    home = resolve_home(explicit)
    if explicit is not None and not may_be_new and not os.path.isdir(home):
        state = "is not a directory" if os.path.lexists(home) else "does not exist"
        raise CmError("HOME_NOT_FOUND", f"--home {home} {state}; check the path, or create a home there with "
                                        "`cm config init --home …` (or try cm there: `cm demo --home …`)")
    # Every command that works on a home scans with the deep rules and that home's allow-list.
    safety.configure(home, deep=True)
    return home


def forward_home(ctx: click.Context, args: tuple[str, ...]) -> list[str]:
    """A host entry's raw arguments, with a ``--home`` given before the subcommand appended
    (``HOME_CONFLICT`` if the entry's own ``--home`` names another path)."""
    for i, arg in enumerate(args):
        if arg.startswith("--home="):
            _record_home(ctx, arg.split("=", 1)[1])
        elif arg == "--home" and i + 1 < len(args):
            _record_home(ctx, args[i + 1])
        else:
            continue
        return list(args)  # the entry reads its own --home
    home = ctx.find_root().obj.get("home")
    return list(args) if home is None else [*args, "--home", home]


@click.group(cls=CmGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", "home", default=None, help=HOME_HELP)
@click.version_option(package_name="common-memory-cm", prog_name="cm")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """cm: durable, user-owned memory for coding agents.

    Alone, in a terminal, `cm` opens interactive management; elsewhere it prints guidance.
    """
    ctx.ensure_object(dict)
    ctx.obj["home"] = home
    if ctx.invoked_subcommand is None and isinstance(ctx.command, CmGroup) and ctx.command.bare is not None:
        ctx.command.bare(ctx)
