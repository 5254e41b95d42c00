"""Changing your mind: `cm history`, `cm undo`, `cm trash`, `cm restore`, `cm purge`, `cm why`, and `cm fix`
for a memory file edited by hand into a shape cm cannot read."""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from cmrunner.commands.base import _home, cli, confirm, echo
from cmrunner.core.errors import CmError
from cmrunner.views import history as history_view


def _listing(found: list[dict], as_json: bool, empty: str, render: Callable[[dict], list[str]]) -> None:
    """One JSON list for scripts, or each item's lines (``empty`` when there is none)."""
    if as_json:
        echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        echo(empty)
    for item in found:
        for line in render(item):
            echo(line)


@cli.command("history")
@click.argument("document", required=False)
@click.argument("section", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON list for scripts.")
@click.pass_context
def history_command(ctx: click.Context, document: str | None, section: str | None, as_json: bool) -> None:
    """Versions of memory sections, newest first, each with a diff from the one it replaced.

    DOCUMENT is profile, preferences or project:<id>; SECTION a title or sec_ ref."""
    _listing(history_view.versions(_home(ctx), document, section), as_json,
             "no history yet: it is recorded from the first commit that changes a document",
             lambda v: [history_view.version_line(v), history_view.version_detail(v), ""])


@cli.command("trash")
@click.option("--json", "as_json", is_flag=True, help="One JSON list for scripts.")
@click.pass_context
def trash_command(ctx: click.Context, as_json: bool) -> None:
    """Sections the Memory Agent removed, with the decision that removed them and when they expire."""
    _listing(history_view.trash(_home(ctx)), as_json, "the trash is empty", lambda t: [history_view.trash_line(t)])


@cli.command("undo")
@click.argument("ref")
@click.option("--force", is_flag=True, help="Undo even if the section changed since (the diff is shown first).")
@click.pass_context
def undo_command(ctx: click.Context, ref: str, force: bool) -> None:
    """Put back what a commit (receipt id) or one version (v<number>) replaced, as a new commit."""
    from cmrunner.writer_proc import undo

    home = _home(ctx)
    try:
        done = undo.run(history_view.data_paths(home), home, ref, force)
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
    done = restore.run(history_view.data_paths(home), home, trash_id)
    echo(f"restored {done.target} / {done.title} (receipt {done.receipt_id})")


@cli.command("why")
@click.argument("document")
@click.argument("section", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON list for scripts.")
@click.pass_context
def why_command(ctx: click.Context, document: str, section: str | None, as_json: bool) -> None:
    """Why each section of DOCUMENT says what it says: its commits and the words that were its evidence."""
    from cmrunner.views import why

    found = why.explain(_home(ctx), document, section)
    if as_json:
        echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        echo(f"{document} has no sections yet")
    for line in why.lines(found):
        echo(line)


@cli.command("purge")
@click.argument("name")
@click.argument("section", required=False)
@click.option("--all-history", is_flag=True, help="Also every earlier version of the section, not only the latest.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def purge_command(ctx: click.Context, name: str, section: str | None, all_history: bool, yes: bool) -> None:
    """Destroy a section's text for good: NAME is a trash id, or a document followed by SECTION.

    Its text leaves the document, history and the trash; the words that were its evidence are
    deleted and refused from then on. This cannot be undone."""
    from cmrunner.writer_proc import purge

    what = name if section is None else f"{name} / {section}"
    if not yes:
        confirm(f"Destroy the text of {what} for good? This cannot be undone",
                f"this destroys the text of {what} for good (it cannot be undone)")
    home = _home(ctx)
    done = purge.run(history_view.data_paths(home), home, name, section, all_history)
    echo(f"purged {what}: {done.versions} version(s) and {done.observations} observation(s) lost their text"
         + ("; removed from the document" if done.removed_from_document else ""))
    if done.backups_removed:
        echo(f"deleted {done.backups_removed} pre-upgrade backup(s) of the database, which held older copies")
    if done.incomplete:
        raise CmError("PURGE_INCOMPLETE", "another process was reading the database, so its write-ahead log still "
                                          "holds old pages; run `cm purge` on the same name again in a moment")


@cli.command("fix")
@click.argument("document")
@click.option("--yes", is_flag=True, help="Write without asking (for scripts).")
@click.pass_context
def fix_command(ctx: click.Context, document: str, yes: bool) -> None:
    """Show DOCUMENT (profile, preferences or project:<id>) normalised into cm's shape, and write it on confirmation.

    Only what cm cannot read changes; the file as it was is kept in `cm history`, and jobs that
    waited for the document are retried."""
    from cmrunner.manage import docfix

    home = _home(ctx)
    planned = docfix.plan(home, document)
    if planned.problem is not None:
        echo(f"{planned.path}: {planned.problem.message}")
    if not planned.changes:
        echo(f"{planned.path} is already in a shape cm works with; nothing to write")
        return
    echo(planned.diff.rstrip("\n"))
    if not yes:
        confirm(f"Write this normalised version to {planned.path}?", f"this rewrites {planned.path}")
    done = docfix.apply(home, planned)
    echo(f"wrote {planned.path} (receipt {done.receipt_id}); the file as it was is kept in "
         f"`cm history {planned.target}`")
    if done.revived:
        echo(f"revived {len(done.revived)} job(s) that waited for {planned.target}: "
             + ", ".join(j[:12] for j in done.revived))
