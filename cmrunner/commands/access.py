"""Reaching memory: `cm network-test`, `cm mcp`, `cm import`, `cm show`."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import TYPE_CHECKING

import click

from cmrunner.commands.base import HostCommand, _home, cli, confirm, echo, echo_outcome, is_terminal
from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError

if TYPE_CHECKING:  # the import's helpers load only when `cm import` runs
    from cmrunner.manage.projectaccess import FolderOffer

PARTS_LISTED = 10  # a larger import lists its dead or quarantined parts and counts the rest by state


@cli.command("network-test")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def network_test(ctx: click.Context, as_json: bool) -> None:
    """Send one small synthetic model request (through the agent CLI when that is the runtime); report the route and
    the outcome (recorded in `cm usage`)."""
    from cmrunner.agentrt import nettest

    report = nettest.run(config_mod.load(_home(ctx)))
    outcome = report["outcome"]
    if as_json:
        echo(json.dumps(report, indent=2))
        if not outcome["ok"]:
            ctx.exit(1)
        return
    if report.get("runtime") == "agent-cli":
        echo(f"model:   {report['model']} through the {report['agent']} CLI (its own login)")
        echo(f"route:   {report['binary']}, version {report['version'] or 'unknown'}")
    else:
        route = report["route"] or {}
        via = f"proxy {route['proxy']}" if route.get("via") == "proxy" else "direct"
        echo(f"model:   {report['model']} at {report['baseUrl']} ({report['api']})")
        if route:
            echo(f"route:   {via} (mode {route['mode']}: {route['reason']})")
    if outcome["ok"]:
        echo(f"outcome: ok in {outcome['elapsedMs']} ms")
    else:
        status = "".join(f", {k} {outcome[k]}" for k in ("httpStatus", "proxyStatus") if k in outcome)
        echo(f"outcome: {outcome['code']} at {outcome['stage']} ({outcome['reason']}{status})")
        if outcome.get("remedy"):
            echo(f"fix:     {outcome['remedy']}")
    if not outcome["ok"]:
        ctx.exit(1)


@cli.command("mcp", cls=HostCommand)
@click.option("--client-id", default=None, help="Stable id of this integration (required for relay and init).")
@click.option("--capability", "capabilities", multiple=True, type=click.Choice(["relay", "init", "read"]),
              help="relay (default), init or read; repeatable. Fixed for the life of the process.")
@click.option("--global", "allow_global", is_flag=True, help="Allow the global context (Profile, Preferences).")
@click.option("--workspace", "workspaces", multiple=True, help="Absolute path of a registered project (repeatable).")
@click.option("--accept-client-reported-user-turns", "accept", is_flag=True,
              help="Trust this local host to relay verbatim user turns (relay only).")
@click.pass_context
def mcp_command(ctx: click.Context, client_id: str | None, capabilities: tuple[str, ...], allow_global: bool,
                workspaces: tuple[str, ...], accept: bool) -> None:
    """Serve memory to one MCP host over stdio (stdout carries MCP only)."""
    from cmrunner.mcpserver import access as mcp_access, server as mcp_server

    launch = mcp_access.Launch(capabilities, client_id, allow_global, workspaces, accept)
    # a host runs it with the home it was configured with; a home not created yet serves empty memory
    mcp_server.serve(mcp_access.Binding(_home(ctx, may_be_new=True), launch))


@cli.command("import")
@click.argument("file", required=False)
@click.option("--from", "source", default=None, type=click.Choice(["claude", "codex", "gemini", "project"]),
              help="Import what this agent already keeps (its memory or instruction files) instead of FILE.")
@click.option("--workspace", default=None, help="Import into this registered project (default: global).")
@click.option("--author", default="unknown", show_default=True, help="user, agent, third_party, mixed or unknown.")
@click.option("--label", default=None, help="Display label (default: the file name).")
@click.option("--no-wait", is_flag=True, help="Only queue; a background drain processes it.")
@click.option("--dry-run", is_flag=True, help="Show the plan (parts, bytes, estimated tokens); queue nothing.")
@click.option("--yes", is_flag=True, help="Queue a costly import without asking.")
@click.option("--register", "register_folder", is_flag=True,
              help="Register the project folder cm runs in (if needed) and allow its memory without asking, and "
                   "import into it.")
@click.pass_context
def import_command(ctx: click.Context, file: str | None, source: str | None, workspace: str | None, author: str,
                   label: str | None, no_wait: bool, dry_run: bool, yes: bool, register_folder: bool) -> None:
    """Import one Markdown file, or an agent's memory files (--from), through the Writer; exit 1
    unless every part was processed.

    Run in a project folder cm has not registered (or whose memory is not allowed), it asks, in a
    terminal, to register it and allow its memory first, then imports into it; --register does that
    without asking; otherwise (--yes, no terminal) it only names the one command."""
    from cmrunner.manage import importer, importplan, memimport

    if register_folder and workspace is not None:
        raise CmError("INVALID_ARGUMENTS", "--register imports into the folder cm runs in; drop --workspace (or "
                                           "--register)")
    if source is not None and file is None:
        _import_from(ctx, source, workspace, no_wait, dry_run, yes, register_folder)
        return
    if file is None or source is not None:
        raise CmError("INVALID_ARGUMENTS", "give either FILE or --from claude|codex|gemini|project")
    offer = _folder(_home(ctx), workspace, register_folder)
    if offer is not None and _take(_home(ctx), offer, register_folder, quiet=yes):
        workspace, offer = offer.path, None
    planned = importer.plan(_home(ctx), file, workspace, author, label)
    plan = planned.plan
    sending = f"{plan.count} part{'s' if plan.count != 1 else ''}, {plan.file_bytes:,} bytes " \
              f"({plan.wire_bytes:,} as read by the Memory Agent)" if plan.count else \
        f"nothing new to send, {plan.file_bytes:,} bytes in the file"
    if plan.retry_parts:
        sending += f"; {plan.retry_parts} failed part{'s' if plan.retry_parts != 1 else ''} to retry " \
                   f"({plan.retry_bytes:,} bytes as read)"
    echo(f"plan: {sending}; {importplan.estimate_words(plan.tokens, plan.fixed_tokens)} "
         f"(estimate, {plan.token_method})")
    if plan.tokens:
        echo(f"caps: {importplan.cap_words(plan.count + plan.retry_parts, plan.tokens, planned.cfg.spend)}")
        echo(f"sent to: {memimport.destination(planned.cfg)}")
    if plan.delta is not None:
        delta = plan.delta
        if delta.changes or plan.carried.committed:
            echo(f"changes since this file's last import: {delta.edited + delta.added} of {delta.total} sections "
                 f"({delta.edited} edited, {delta.added} added, "
                 + (f"{delta.resent} resent (their earlier part never reached memory), " if delta.resent else "")
                 + f"{delta.unchanged} unchanged); "
                 f"{plan.sent_bytes:,} bytes to send"
                 + (f"; {len(delta.removed)} removed from the file: nothing is forgotten" if delta.removed else ""))
        else:
            echo(f"no section changed since this file's last import ({delta.total} section"
                 f"{'s' if delta.total != 1 else ''})"
                 + (f"; {len(delta.removed)} removed from the file: nothing is forgotten" if delta.removed else ""))
        if not plan.carried.committed:
            echo(f"last import: {memimport.last_import(plan.carried)}")
    if offer is not None:
        why = "its memory is not allowed" if offer.registered else "it is not registered"
        echo(f"project folder: {offer.path} is a project cm may not use ({why}), so this goes to {plan.scope}; to "
             f"import into it, `{offer.remedy()}` then add `--workspace {shlex.quote(offer.path)}`, or pass --register")
    if dry_run:
        echo("dry run: nothing was queued")
        return
    if plan.needs_confirmation and not yes:
        confirm("Queue it?", f"this import is estimated above {importplan.CONFIRM_TOKENS:,} tokens (see --dry-run)")
    report = importer.run(_home(ctx), planned, not no_wait, echo_outcome)
    echo(f"import {report.import_id} into {report.scope}: "
         + (f"retried {plan.retry_parts} failed part{'s' if plan.retry_parts != 1 else ''}" + (
             ", queued the changed sections" if plan.count else "") if plan.retries else
            "unchanged since its last import: nothing queued" if plan.committed else
            "nothing new queued; its last import had not committed (see its parts)" if plan.count == 0 else
            "duplicate of an earlier import (its metadata is kept)" if report.duplicate else "queued"))
    listed = report.parts if len(report.parts) <= PARTS_LISTED else \
        [p for p in report.parts if p["state"] in ("dead", "quarantined")][:PARTS_LISTED]
    for part in listed:
        where = f"; retained in {', '.join(part['retainedIn'])}" if part["retainedIn"] else ""
        issue = f" ({part['issue']})" if part["issue"] else ""
        hint = {"dead": f"; run `cm retry {part['jobId']}`",
                "quarantined": "; final for this content: change the file and the sections you change are sent again"}.get(part["state"], "")
        echo(f"part {part['index']}/{part['count']}: {part['state']}{issue}{where}{hint}")
    if len(report.parts) > PARTS_LISTED:
        states: dict[str, int] = {}
        for part in report.parts:
            states[part["state"]] = states.get(part["state"], 0) + 1
        echo(f"parts: {', '.join(f'{n} {state}' for state, n in sorted(states.items()))}")
    if report.waited and (plan.count or plan.retry_parts) and not report.duplicate:
        echo(f"result: {memimport.outcome(_home(ctx), report)}")
    if report.note:
        echo(report.note, err=True)
    echo(f"complete: {'true' if report.complete else 'false'}")
    if report.waited and not report.complete:
        ctx.exit(1)


def _folder(home: str, workspace: str | None, register_folder: bool,
            skipped_here: bool = False) -> FolderOffer | None:
    """The offer for the folder cm runs in (``projectaccess.folder_offer``); with ``--register``
    in a folder that is no project, ``NOT_A_PROJECT_FOLDER``."""
    from cmrunner.core import projects
    from cmrunner.core.home import DataPaths
    from cmrunner.manage import projectaccess

    if workspace is not None:
        return None
    cwd = _here()
    if cwd is None:
        if register_folder:
            raise CmError("NOT_A_PROJECT_FOLDER", "the folder cm runs in no longer exists; run it in the project's "
                                                  "folder") from None
        return None
    offer = projectaccess.folder_offer(home, cwd, skipped_here)
    if offer is None and register_folder:
        project = projects.match(projects.load(DataPaths(config_mod.load(home).data_root)), os.path.realpath(cwd))
        if project is not None:  # registered and allowed already: --register asks for nothing more
            return projectaccess.FolderOffer(project.path, project.name, project)
        raise CmError("NOT_A_PROJECT_FOLDER",
                      f"{os.path.realpath(cwd)} is no project folder (none of {', '.join(projectaccess.ROOT_MARKERS)}); "
                      "run it in the project's folder, or `cm project register PATH NAME --allow` first")
    return offer


def _here() -> str | None:
    """The folder cm runs in, or ``None`` when it is gone (removed after cm was started in it)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def _take(home: str, offer: FolderOffer, register_folder: bool, quiet: bool) -> bool:
    """Register and allow the offered folder when ``--register`` says so, or the user says yes
    (asked once, on a terminal, unless ``quiet``: --yes never registers silently)."""
    from cmrunner.manage import projectaccess

    if not register_folder:
        if quiet or not (sys.stdin is not None and sys.stdin.isatty() and is_terminal(err=True)):
            return False
        if not click.confirm(offer.question(), default=False, err=True):
            return False
    done = projectaccess.register(home, offer.path, offer.name, True)
    if done.new:
        echo(f"registered {done.project.id} -> {done.project.path}")
    if done.granted:
        echo(f"allowed: {' and '.join(done.granted)} +{done.project.scope} (saved in config.json)")
    return True


def _import_from(ctx: click.Context, source: str, workspace: str | None, no_wait: bool, dry_run: bool,
                 yes: bool, register_folder: bool) -> None:
    from cmrunner.manage import importplan, memimport

    home = _home(ctx)
    offer = _folder(home, workspace, False)
    found = None
    if offer is None and workspace is None and source != "project":
        found = memimport.plan(home, source, workspace, cwd=_here())
        here = _here()
        skipped = here is not None and memimport.skipped_folder([found], here) is not None  # Claude Code's memory of it
        offer = _folder(home, workspace, register_folder, skipped_here=skipped)
    elif offer is None:
        offer = _folder(home, workspace, register_folder)
    if offer is not None and _take(home, offer, register_folder, quiet=yes):
        workspace = offer.path if source == "project" else workspace
        found, offer = None, None
    if offer is not None and source == "project" and workspace is None:
        raise CmError("WORKSPACE_REQUIRED", f"--from project imports a registered project's files; {offer.path} is "
                                            f"not one cm may use: `{offer.remedy()}` then add `--workspace "
                                            f"{shlex.quote(offer.path)}`, or pass --register")
    if found is None:  # planned (again) once the folder's project is registered and allowed
        found = memimport.plan(home, source, workspace, cwd=_here())
    if not found.files and not found.skipped:
        echo(f"nothing found: no {source} memory files on this machine")
        return
    echo(f"plan for {source}: {len(found.new)} file{'s' if len(found.new) != 1 else ''} to import, "
         f"{importplan.estimate_words(found.tokens, found.fixed_tokens)} (estimate)")
    if found.tokens:
        echo(f"caps: {importplan.cap_words(found.parts, found.tokens, found.cfg.spend)}")
        echo(f"sent to: {memimport.destination(found.cfg)}")
    for f in found.files:
        p = f.plan
        if f.imported or p.count == 0:
            sending = ", nothing to send" if f.imported else "" if not p.retry_parts else \
                f", {p.retry_parts} part{'s' if p.retry_parts != 1 else ''} to retry, ~{p.text_tokens:,} tokens of text"
            echo(f"  {f.found.label} [{f.kind_label}] -> {p.scope}: {f.status}{sending} ({f.found.path})")
        else:
            echo(f"  {f.found.label} [{f.kind_label}] -> {p.scope}: {f.status}, {p.count} part"
                 f"{'s' if p.count != 1 else ''}, {p.sent_bytes:,} of {p.file_bytes:,} bytes to send, "
                 f"~{p.text_tokens:,} tokens of text ({f.found.path})")
        if not f.imported:
            instructions = f.instruction_lines
            note = f"; {instructions} line{'s' if instructions != 1 else ''} read as instructions to an agent " \
                   "(preferences, never profile)" if instructions else ""
            echo(f"    may become: {f.may_become}{note}")
    for skip in found.skipped:
        echo(f"  skipped {skip.code}: {skip.path}: {skip.reason}")
    if offer is not None:
        why = "its memory is not allowed" if offer.registered else "it is not registered"
        echo(f"project folder: {offer.path} is a project cm may not use ({why}); `{offer.remedy()}` (or "
             "--register) imports its files into it")
    if found.needs_permission:
        echo("permission: imports are off (disclosure.allowedProvenance lacks document_import); "
             "confirming grants it in config.json")
    if dry_run:
        echo("dry run: nothing was queued")
        return
    if not found.new:
        echo("nothing new to import")
        return
    if not yes:
        confirm("Import these files" + (" and allow document imports?" if found.needs_permission else "?"),
                f"importing {len(found.new)} file(s) sends them to the Memory Agent")
    if found.needs_permission:
        memimport.grant(home)
        echo("granted: disclosure.allowedProvenance +document_import")
    reports = memimport.run(home, found, not no_wait, echo_outcome)
    for f, report in zip(found.new, reports, strict=True):
        echo(f"{f.found.label} -> {report.scope}: {memimport.outcome(home, report)}")
    if reports and reports[0].note:
        echo(reports[0].note, err=True)
    complete = all(r.complete for r in reports)
    echo(f"complete: {'true' if complete else 'false'}")
    if not no_wait and not complete:
        ctx.exit(1)


@cli.command("show")
@click.option("--plain", is_flag=True, help="Plain output even in a terminal.")
@click.option("--workspace", default=None, help="Also show this registered project's memory.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts (the text as consumers get it).")
@click.pass_context
def show_command(ctx: click.Context, plain: bool, workspace: str | None, as_json: bool) -> None:
    """Print the memory directory and exactly what consumers receive (opens no database)."""
    from cmrunner.views import show as show_mod

    report = show_mod.gather(_home(ctx), workspace)
    if as_json:
        echo(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
        return
    styled = not plain and workspace is None and sys.stdout.isatty()

    def label(text: str) -> str:
        return click.style(text, bold=True) if styled else text

    echo(report.memory_dir, lead=label("memory directory:") + " ")
    echo(", ".join(report.contexts) or "none", lead=label("contexts:") + " ")
    for note in report.notes:
        echo(note, lead=label("note:") + " ")
    echo("")
    echo(report.text, nl=False)
